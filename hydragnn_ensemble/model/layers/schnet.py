"""SchNet interaction (Schütt et al. 2018) on the builder's edges.

``m_i = sum_j W(r_ij) * (W1 h)_j`` with the continuous filter
``W(r) = Linear(ssp(Linear(rbf(r)))) * cosine_cutoff(r)``; the layer returns ``Linear(ssp(Linear(m)))``
(the model adds the residual). The Gaussian basis and cutoff come from the shared geometry.

HydraGNN-shaped (``LayerConfig.hydragnn_shaped``): the layer is HydraGNN's ``CFConv`` (PyG's): one
output map ``Linear(m)``, and the filter network reads ``[rbf, edge_attr]`` per edge (no radial table
then), or without edge features ``[rbf, d]``: HydraGNN's SchNet takes our periodic edges only with
``edge_features: ["length"]``, which ``export`` writes for it, and then reads that column (a function
of the distance alone, so the radial table serves). HydraGNN's SchNet with ``equivariance: true``
adds a coordinate network per layer (all but the last), which this layer has not: the counts are
equal with it off (its default).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.geometry import EdgeGeometry
from hydragnn_ensemble.model.layers.base import ConvLayer, LayerConfig, ShiftedSoftplus


class SchNetLayer(ConvLayer):
    """Continuous-filter convolution with a two-layer filter network."""

    needs_geometry = True
    filters_on_distance = True
    reads_raw_input = True
    hydragnn_batch_norm = False

    def __init__(self, config: LayerConfig) -> None:
        super().__init__(config)
        dim = config.hidden_dim
        self.reads_edge_attr = config.hydragnn_shaped and config.edge_dim > 0
        self.reads_length = config.hydragnn_shaped and config.edge_dim == 0
        filter_in = config.num_gaussians + (config.edge_dim if self.reads_edge_attr else int(self.reads_length))
        self.filter_net = nn.Sequential(nn.Linear(filter_in, dim), ShiftedSoftplus(), nn.Linear(dim, dim))
        self.lin_in = nn.Linear(config.width_in, dim, bias=False)
        self.lin_out = (nn.Linear(dim, dim) if config.hydragnn_shaped
                        else nn.Sequential(nn.Linear(dim, dim), ShiftedSoftplus(), nn.Linear(dim, dim)))

    def forward(
        self, h: Tensor, edges: Edges, geom: EdgeGeometry, vec: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        if self.reads_edge_attr:  # HydraGNN-shaped with edge features: the filter per edge
            inputs = torch.cat([geom.require("rbf"), geom.require("edge_attr").to(geom.require("rbf").dtype)], dim=-1)
            weight = self.filter_net(inputs) * geom.require("cutoff").unsqueeze(-1)
        elif geom.radial is not None:  # the filter on the table's distances, interpolated per edge
            table = geom.radial
            weight = table.lookup(self.filter_net(self._basis(table.rbf, table.distance)) * table.cutoff.unsqueeze(-1))
        else:
            weight = (self.filter_net(self._basis(geom.require("rbf"), geom.require("distance")))
                      * geom.require("cutoff").unsqueeze(-1))
        messages = edges.gather_source_times(self.lin_in(h), weight)
        return self.lin_out(edges.sum_at_target(messages)), None

    def _basis(self, rbf: Tensor, distance: Tensor) -> Tensor:
        """What the filter network reads: the radial basis, and (HydraGNN-shaped) the distance."""
        return torch.cat([rbf, distance.unsqueeze(-1).to(rbf.dtype)], dim=-1) if self.reads_length else rbf
