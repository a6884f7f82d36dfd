"""One module per message-passing layer family, and the registry ``MPNN_TYPES`` (HydraGNN's names)."""

from __future__ import annotations

from hydragnn_ensemble.model.layers.base import ConvLayer, LayerConfig
from hydragnn_ensemble.model.layers.cgcnn import CGCNNLayer
from hydragnn_ensemble.model.layers.egnn import EGNNLayer
from hydragnn_ensemble.model.layers.gat import GATLayer
from hydragnn_ensemble.model.layers.gin import GINLayer
from hydragnn_ensemble.model.layers.painn import PaiNNLayer
from hydragnn_ensemble.model.layers.pna import DEFAULT_PNA_DEGREE_HISTOGRAM, PNALayer, degree_histogram
from hydragnn_ensemble.model.layers.schnet import SchNetLayer

MPNN_TYPES: dict[str, type[ConvLayer]] = {
    "GIN": GINLayer,
    "PNA": PNALayer,
    "GAT": GATLayer,
    "CGCNN": CGCNNLayer,
    "SchNet": SchNetLayer,
    "EGNN": EGNNLayer,
    "PaiNN": PaiNNLayer,
}


def layer_class(mpnn_type: str) -> type[ConvLayer]:
    """The layer class registered under ``mpnn_type`` (ValueError listing the valid names)."""
    try:
        return MPNN_TYPES[mpnn_type]
    except KeyError:
        raise ValueError(
            f"unknown mpnn_type {mpnn_type!r}; valid names: {', '.join(MPNN_TYPES)}"
        ) from None


__all__ = [
    "DEFAULT_PNA_DEGREE_HISTOGRAM",
    "MPNN_TYPES",
    "CGCNNLayer",
    "ConvLayer",
    "EGNNLayer",
    "GATLayer",
    "GINLayer",
    "LayerConfig",
    "PNALayer",
    "PaiNNLayer",
    "SchNetLayer",
    "degree_histogram",
    "layer_class",
]
