"""SchNet interaction (Schütt et al. 2018) on the builder's edges.

``m_i = sum_j W(r_ij) * (W1 h)_j`` with the continuous filter
``W(r) = Linear(ssp(Linear(rbf(r)))) * cosine_cutoff(r)``; the layer returns ``Linear(ssp(Linear(m)))``
(the model adds the residual). The Gaussian basis and cutoff come from the shared geometry.
"""

from __future__ import annotations

from torch import Tensor, nn

from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.geometry import EdgeGeometry
from hydragnn_ensemble.model.layers.base import ConvLayer, LayerConfig, ShiftedSoftplus


class SchNetLayer(ConvLayer):
    """Continuous-filter convolution with a two-layer filter network."""

    needs_geometry = True
    filters_on_distance = True

    def __init__(self, config: LayerConfig) -> None:
        super().__init__(config)
        dim = config.hidden_dim
        self.filter_net = nn.Sequential(
            nn.Linear(config.num_gaussians, dim), ShiftedSoftplus(), nn.Linear(dim, dim)
        )
        self.lin_in = nn.Linear(dim, dim, bias=False)
        self.lin_out = nn.Sequential(nn.Linear(dim, dim), ShiftedSoftplus(), nn.Linear(dim, dim))

    def forward(
        self, h: Tensor, edges: Edges, geom: EdgeGeometry, vec: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        if geom.radial is not None:  # the filter on the table's distances, interpolated per edge
            table = geom.radial
            weight = table.lookup(self.filter_net(table.rbf) * table.cutoff.unsqueeze(-1))
        else:
            weight = self.filter_net(geom.require("rbf")) * geom.require("cutoff").unsqueeze(-1)
        messages = edges.gather_source_times(self.lin_in(h), weight)
        return self.lin_out(edges.sum_at_target(messages)), None
