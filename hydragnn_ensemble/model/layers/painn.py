"""PaiNN (Schütt et al. 2021): scalar features ``s`` [N, F] and vector features ``v`` [N, 3, F].

Vectors are stored as [N, 3, F] (Cartesian axis before channels) so per-channel linear maps act on
the last axis and one edge message is a single [E, 3, F] tensor. Message block (edge j -> i, unit
vector ``u_ij`` from i to j)::

    (a, b, c) = split(MLP(s)_j * (Linear(rbf_ij) * cutoff_ij))   (the filter looked up in the
                                                                  radial table where there is one)
    ds_i = sum_j a ;  dv_i = sum_j v_j * b + u_ij * c   (computed one Cartesian axis at a time)

Update block::

    U v, V v ;  (p, q, r) = split(MLP([s, |V v|]))
    v <- v + p * U v ;  s <- s + q * <U v, V v> + r

The layer is ``self_contained``: it returns the updated ``s`` (residual inside).

HydraGNN-shaped (``LayerConfig.hydragnn_shaped``): HydraGNN's PaiNN. The blocks work at the width
they read (the first layer at the raw input width, ``F = 1`` for the atomic number), then map to the
hidden width: ``s <- Linear(tanh(Linear(s)))``, ``v <- Linear(v)`` (no bias); the last layer's update
leaves ``v`` alone (its MLP gives ``q, r`` only, no vector map). With edge features the filter is
multiplied by ``MLP(edge_attr)``. The radial basis is HydraGNN's sinc (``hydragnn_radial_basis``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.geometry import EdgeGeometry
from hydragnn_ensemble.model.layers.base import ConvLayer, LayerConfig


class PaiNNLayer(ConvLayer):
    """One PaiNN message + update block."""

    needs_geometry = True
    filters_on_distance = True
    carries_vectors = True
    self_contained = True
    reads_raw_input = True
    hydragnn_batch_norm = False
    hydragnn_radial_basis = "sinc"

    def __init__(self, config: LayerConfig) -> None:
        super().__init__(config)
        shaped = config.hydragnn_shaped
        dim = config.width_in  # the blocks' width: hidden, or (HydraGNN-shaped) the width read
        self.dim = dim
        self.updates_vectors = not (shaped and config.is_last)
        self.message_mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, 3 * dim))
        self.filter = nn.Linear(config.num_gaussians, 3 * dim)
        self.edge_filter = (nn.Sequential(nn.Linear(config.edge_dim, dim), nn.SiLU(), nn.Linear(dim, 3 * dim))
                            if shaped and config.edge_dim > 0 else None)
        self.uv = nn.Linear(dim, 2 * dim, bias=False)
        outputs = 3 if self.updates_vectors else 2
        self.update_mlp = nn.Sequential(nn.Linear(2 * dim, dim), nn.SiLU(), nn.Linear(dim, outputs * dim))
        hidden = config.hidden_dim
        self.scalar_out = (nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden))
                           if shaped else None)
        self.vector_out = nn.Linear(dim, hidden, bias=False) if shaped and self.updates_vectors else None

    def forward(
        self, h: Tensor, edges: Edges, geom: EdgeGeometry, vec: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        dim = self.dim
        # message block
        # filter(rbf) * cutoff = [rbf * cutoff, cutoff] @ [W, b]^T: the cutoff scales the [E, G] basis
        # instead of the [E, 3F] product (one pass over the widest tensor less, forward and backward)
        if geom.radial is not None:  # the filter on the table's distances, interpolated per edge
            table = geom.radial
            weight = table.lookup(self.filter(table.rbf) * table.cutoff.unsqueeze(-1))
        else:
            cutoff = geom.require("cutoff").unsqueeze(-1)
            scaled = torch.cat([geom.require("rbf") * cutoff, cutoff], dim=-1)
            weight = F.linear(scaled, torch.cat([self.filter.weight, self.filter.bias.unsqueeze(-1)], dim=-1))
        if self.edge_filter is not None:
            weight = weight * self.edge_filter(geom.require("edge_attr").to(weight.dtype))
        x = edges.gather_source_times(self.message_mlp(h), weight)
        a, b, c = torch.split(x, dim, dim=-1)
        s = h + edges.sum_at_target(a)
        # one Cartesian axis at a time: [E, F] temporaries instead of [E, 3, F] ones (the broadcast
        # products and gathers of [E, 3, F] tensors were 2-4x slower for the same arithmetic)
        unit = geom.require("unit")
        axes = []
        for k in range(3):
            dv = unit[:, k : k + 1] * c
            if vec is not None:
                dv = dv + edges.gather_source(vec[:, k]) * b
            axes.append(edges.sum_at_target(dv))
        v = torch.stack(axes, dim=1) if vec is None else vec + torch.stack(axes, dim=1)
        return self._update(s, v)

    def _update(self, s: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """The update block (and, HydraGNN-shaped, the maps to the hidden width)."""
        u_v, v_v = torch.split(self.uv(v), self.dim, dim=-1)
        v_norm = ((v_v * v_v).sum(dim=1) + 1e-8).sqrt()
        gates = torch.split(self.update_mlp(torch.cat([s, v_norm], dim=-1)), self.dim, dim=-1)
        q, r = gates[-2:]
        s = s + q * (u_v * v_v).sum(dim=1) + r
        if self.updates_vectors:
            v = v + gates[0].unsqueeze(1) * u_v
        if self.scalar_out is not None:
            s = self.scalar_out(s)
        if self.vector_out is not None:
            v = self.vector_out(v)
        return s, v
