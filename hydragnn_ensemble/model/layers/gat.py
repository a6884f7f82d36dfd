"""GAT: PyG's ``GATv2Conv`` (Brody et al. 2022), with the builder's edge features when ``edge_dim > 0``.

Four attention heads concatenated (one when ``hidden_dim`` is not divisible by four). No self-loops
are added: ``GATv2Conv`` would first remove existing ones, which drops periodic self-image edges;
the model's residual connection carries each node's own state instead.
"""

from __future__ import annotations

from torch import Tensor
from torch_geometric.nn import GATv2Conv

from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.geometry import EdgeGeometry
from hydragnn_ensemble.model.layers.base import ConvLayer, LayerConfig

NUM_HEADS = 4


class GATLayer(ConvLayer):
    """Attention-weighted neighbour sum (GATv2)."""

    def __init__(self, config: LayerConfig) -> None:
        super().__init__(config)
        dim = config.hidden_dim
        heads = NUM_HEADS if dim % NUM_HEADS == 0 else 1
        self.uses_edge_attr = config.edge_dim > 0
        self.conv = GATv2Conv(
            dim,
            dim // heads,
            heads=heads,
            concat=True,
            edge_dim=config.edge_dim if self.uses_edge_attr else None,
            add_self_loops=False,
        )

    def forward(
        self, h: Tensor, edges: Edges, geom: EdgeGeometry, vec: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        edge_attr = geom.require("edge_attr") if self.uses_edge_attr else None
        return self.conv(h, edges.index, edge_attr=edge_attr), None
