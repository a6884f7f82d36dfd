"""PNA (Corso et al. 2020): four aggregators x four degree scalers, as HydraGNN configures it.

Messages ``m_ij = h_i A + h_j B + e_ij C`` (PyG's one-layer pre-transform of ``[h_i, h_j, e_ij]``,
computed per node, not per edge), aggregated by mean, min, max and std, each scaled by identity,
amplification ``log(d+1)/L``, attenuation ``L/log(d+1)`` and linear ``d/D`` where ``L`` and ``D`` are
the average ``log(d+1)`` and ``d`` of the training set's in-degree histogram; then
``Linear([h, 16 aggregates]) -> Linear``.

The histogram comes from ``ModelSpec.pna_degree_histogram`` (``hist[d]`` = number of nodes with
in-degree ``d``; :func:`degree_histogram` computes it from training graphs). Without one the layer
uses :data:`DEFAULT_PNA_DEGREE_HISTOGRAM`: every node at degree 40, the ~2,590 directed edges of a
64-atom FCC alloy at a 5 Å cutoff; it is never estimated from the first batch.

HydraGNN-shaped (``LayerConfig.hydragnn_shaped``): PyG's ``PNAConv`` as HydraGNN configures it (one
tower, one pre and one post layer, input not divided): messages and aggregates at the width read
(the first layer at the raw input width), the post layer maps ``[h, 16 aggregates]`` to the hidden
width, and edge features pass through their own ``Linear(edge_dim, width)`` encoder first.
"""

from __future__ import annotations

import math
from typing import Iterable

import torch
from torch import Tensor, nn

from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.geometry import EdgeGeometry
from hydragnn_ensemble.model.layers.base import ConvLayer, LayerConfig

DEFAULT_PNA_DEGREE_HISTOGRAM: tuple[int, ...] = (0,) * 40 + (1,)
NUM_AGGREGATORS = 4
NUM_SCALERS = 4


def degree_histogram(graphs: Iterable[object]) -> tuple[int, ...]:
    """``hist[d]`` = number of nodes with in-degree ``d`` over ``graphs`` (PyG Data with edge_index)."""
    counts: list[int] = []
    for graph in graphs:
        n = int(graph.num_nodes)
        deg = torch.bincount(graph.edge_index[1], minlength=n)
        hist = torch.bincount(deg).tolist()
        if len(hist) > len(counts):
            counts.extend([0] * (len(hist) - len(counts)))
        for d, c in enumerate(hist):
            counts[d] += int(c)
    return tuple(counts)


def degree_averages(histogram: tuple[int, ...]) -> tuple[float, float]:
    """Average ``log(d+1)`` and ``d`` of a degree histogram (ValueError when it is empty or negative)."""
    if any(c < 0 for c in histogram) or sum(histogram) == 0:
        raise ValueError(f"pna_degree_histogram must hold non-negative counts, not all zero; got {histogram}")
    total = float(sum(histogram))
    avg_log = sum(c * math.log(d + 1) for d, c in enumerate(histogram)) / total
    avg_lin = sum(c * d for d, c in enumerate(histogram)) / total
    if avg_log <= 0:
        raise ValueError("pna_degree_histogram has only degree-0 nodes")
    return avg_log, avg_lin


class PNALayer(ConvLayer):
    """Principal neighbourhood aggregation (mean/min/max/std x identity/amplification/attenuation/linear)."""

    reads_raw_input = True

    def __init__(self, config: LayerConfig) -> None:
        super().__init__(config)
        width, dim = config.width_in, config.hidden_dim
        histogram = config.pna_degree_histogram or DEFAULT_PNA_DEGREE_HISTOGRAM
        self.avg_log, self.avg_lin = degree_averages(tuple(histogram))
        self.lin_i = nn.Linear(width, width)
        self.lin_j = nn.Linear(width, width, bias=False)
        self.lin_e: nn.Module | None = None
        if config.edge_dim > 0:
            self.lin_e = (nn.Sequential(nn.Linear(config.edge_dim, width), nn.Linear(width, width, bias=False))
                          if config.hydragnn_shaped else nn.Linear(config.edge_dim, width, bias=False))
        self.post = nn.Linear((1 + NUM_AGGREGATORS * NUM_SCALERS) * width, dim)
        self.lin = nn.Linear(dim, dim)

    def forward(
        self, h: Tensor, edges: Edges, geom: EdgeGeometry, vec: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        m = edges.gather_target(self.lin_i(h)) + edges.gather_source(self.lin_j(h))
        if self.lin_e is not None:
            m = m + self.lin_e(geom.require("edge_attr"))
        deg = edges.in_degree(h.dtype)
        inv_deg = 1.0 / deg.clamp_min(1.0).unsqueeze(-1)
        mean = edges.sum_at_target(m) * inv_deg
        mean_sq = edges.sum_at_target(m * m) * inv_deg
        std = (torch.relu(mean_sq - mean * mean) + 1e-5).sqrt()
        aggs = torch.cat(
            [mean, edges.extreme_at_target(m, "min"), edges.extreme_at_target(m, "max"), std], dim=-1
        )
        log_deg = torch.log(deg.clamp_min(1.0) + 1.0).unsqueeze(-1)
        scaled = [
            aggs,
            aggs * (log_deg / self.avg_log),
            aggs * (self.avg_log / log_deg),
            aggs * (deg.unsqueeze(-1) / max(self.avg_lin, 1e-12)),
        ]
        return self.lin(self.post(torch.cat([h] + scaled, dim=-1))), None
