"""GIN (Xu et al. 2019): ``h_i' = MLP((1 + eps) h_i + sum_j h_j)``; ignores edge features/geometry."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.geometry import EdgeGeometry
from hydragnn_ensemble.model.layers.base import ConvLayer, LayerConfig, make_activation


class GINLayer(ConvLayer):
    """Graph isomorphism layer with a learnable ``eps`` and a two-layer MLP."""

    reads_raw_input = True

    def __init__(self, config: LayerConfig) -> None:
        super().__init__(config)
        dim = config.hidden_dim
        self.eps = nn.Parameter(torch.zeros(1))
        self.mlp = nn.Sequential(nn.Linear(config.width_in, dim), make_activation(config.activation),
                                 nn.Linear(dim, dim))

    def forward(
        self, h: Tensor, edges: Edges, geom: EdgeGeometry, vec: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        return self.mlp((1.0 + self.eps) * h + edges.neighbour_sum(h)), None
