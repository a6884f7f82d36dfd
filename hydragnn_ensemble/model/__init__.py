"""The multi-headed GNN: shared message-passing trunk, graph-level and node-level heads."""

from hydragnn_ensemble.model.spec import GraphHeadSpec, ModelSpec, NodeHeadSpec

__all__ = ["GraphHeadSpec", "ModelSpec", "NodeHeadSpec"]
