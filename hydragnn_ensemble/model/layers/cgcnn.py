"""CGCNN convolution (Xie & Grossman 2018) with the shared radial basis as edge features.

``z_ij = [h_i, h_j, e_ij]`` with ``e_ij = [rbf(|r_ij|), edge_attr_ij]``;
``m_i = sum_j sigmoid(z_ij W_f) * softplus(z_ij W_s) * W(rbf(|r_ij|)) * cutoff(|r_ij|)``. The
concatenation is never built: ``z W = h_i A + h_j B + e C`` with the node products computed once per
node. The cutoff factor (not in the original) makes the layer smooth at the radius; the filter ``W``,
a linear map of the radial basis per feature (not in the original either,
``LayerConfig.radial_filter``: :func:`~hydragnn_ensemble.model.layers.base.radial_weight`), lets it
learn forces as a potential (without it, models saved before the option, its forces trained to a
fraction of the trivial predictor's error at best). The model adds the residual, normalisation and
activation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.geometry import EdgeGeometry
from hydragnn_ensemble.model.layers.base import ConvLayer, LayerConfig, radial_weight


class CGCNNLayer(ConvLayer):
    """Gated crystal-graph convolution (filter and core paths in one fused linear map)."""

    needs_geometry = True
    radial_filter_option = True

    def __init__(self, config: LayerConfig) -> None:
        super().__init__(config)
        dim = config.hidden_dim
        self.dim = dim
        self.lin_i = nn.Linear(dim, 2 * dim)
        self.lin_j = nn.Linear(dim, 2 * dim, bias=False)
        self.lin_e = nn.Linear(config.num_gaussians + config.edge_dim, 2 * dim, bias=False)
        self.uses_edge_attr = config.edge_dim > 0
        self.filter = nn.Linear(config.num_gaussians, dim) if config.radial_filter else None

    def forward(
        self, h: Tensor, edges: Edges, geom: EdgeGeometry, vec: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        edge_features = geom.require("rbf")
        if self.uses_edge_attr:
            edge_features = torch.cat([edge_features, geom.require("edge_attr")], dim=-1)
        z = edges.gather_target(self.lin_i(h)) + edges.gather_source(self.lin_j(h)) + self.lin_e(edge_features)
        gate, core = torch.split(z, self.dim, dim=-1)
        messages = torch.sigmoid(gate) * F.softplus(core) * radial_weight(self.filter, geom)
        return edges.sum_at_target(messages), None
