"""The multi-headed GNN: shared message-passing trunk, graph-level and node-level heads."""

from hydragnn_ensemble.model.builder import build_model
from hydragnn_ensemble.model.heads import VARIANCE_SUFFIX
from hydragnn_ensemble.model.hydra import HydraModel
from hydragnn_ensemble.model.layers import DEFAULT_PNA_DEGREE_HISTOGRAM, MPNN_TYPES, degree_histogram
from hydragnn_ensemble.model.spec import GraphHeadSpec, ModelSpec, NodeHeadSpec

__all__ = [
    "DEFAULT_PNA_DEGREE_HISTOGRAM",
    "MPNN_TYPES",
    "VARIANCE_SUFFIX",
    "GraphHeadSpec",
    "HydraModel",
    "ModelSpec",
    "NodeHeadSpec",
    "build_model",
    "degree_histogram",
]
