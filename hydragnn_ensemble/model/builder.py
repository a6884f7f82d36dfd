"""``build_model(spec)``: the one entry point the trainer uses to make a model."""

from __future__ import annotations

from hydragnn_ensemble.model.hydra import HydraModel
from hydragnn_ensemble.model.layers import MPNN_TYPES, layer_class
from hydragnn_ensemble.model.spec import ModelSpec


def build_model(spec: ModelSpec) -> HydraModel:
    """A freshly initialised :class:`HydraModel` for ``spec`` (ValueError for an invalid spec,
    e.g. an unknown ``mpnn_type``; the message lists the valid names)."""
    layer_class(spec.mpnn_type)
    return HydraModel(spec)


__all__ = ["MPNN_TYPES", "build_model"]
