"""The trainer's measured speed, the cost model's anchors: ``scheduler/cost_anchors.json``.

One graph's training time on one CPU thread is, per ``mpnn_type`` (:class:`TypeRates`), seconds per
FLOP of the analytic count (:mod:`scheduler.flop_model`) x FLOPs + fixed seconds per batch (and per
batch and layer) / batch size; :class:`CostAnchors` adds a whole epoch over its training pass and a
potential's training time over direct heads. The file is written by ``bench/cost_anchors.py
--write``: re-run it when the trainer or a layer changes. :func:`load_anchors` reads it and refuses
one that lacks a type or a figure.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.dataset_stats import DatasetStats
from scheduler.flop_model import MPNN_COSTS, graph_flops

__all__ = ["ANCHORS_FILE", "CostAnchors", "TypeRates", "load_anchors"]

ANCHORS_FILE = Path(__file__).with_name("cost_anchors.json")


@dataclass(frozen=True)
class TypeRates:
    """One mpnn_type's training time per graph on one CPU thread::

        seconds_per_flop x graph FLOPs + (batch_s + layer_s x conv layers) / batch size

    (the fixed per-batch costs: loader, optimizer step, kernel launches per layer)."""

    seconds_per_flop: float
    batch_s: float = 0.0
    layer_s: float = 0.0

    def seconds_per_graph(self, mpnn_type: str, hidden: int, layers: int, batch_size: int, heads: int,
                          stats: DatasetStats) -> float:
        flops = graph_flops(mpnn_type, hidden, layers, heads, stats.mean_nodes, stats.mean_edges)
        return self.seconds_per_flop * flops + (self.batch_s + self.layer_s * layers) / batch_size


@dataclass(frozen=True)
class CostAnchors:
    """What the trainer measured (``bench/cost_anchors.py``): :class:`TypeRates` per mpnn_type and
    a whole epoch over its training pass."""

    rates: dict[str, TypeRates]
    epoch_over_train: float
    source: str
    #: per mpnn_type, a potential-mode trial's training time (energy, forces = -dE/dpos, stress,
    #: and their second derivatives in the loss) over the same heads predicted directly; a type
    #: not measured (it cannot be a potential) costs the same either way
    potential_factor: dict[str, float] = field(default_factory=dict)

    def potential_factor_of(self, mpnn_type: str) -> float:
        return self.potential_factor.get(mpnn_type, 1.0)


def load_anchors(path: Path = ANCHORS_FILE) -> CostAnchors:
    """The measured anchors; :class:`ValueError` naming the file when it lacks a type or a figure."""
    record = json.loads(path.read_text())
    rates = {str(t): TypeRates(float(r["seconds_per_gflop"]) * 1e-9, float(r["batch_s"]), float(r["layer_s"]))
             for t, r in record["rates"].items()}
    missing = sorted(set(MPNN_COSTS) - set(rates))
    if missing or not all(r.seconds_per_flop > 0 and r.batch_s >= 0 and r.layer_s >= 0 for r in rates.values()) \
            or not float(record["epoch_over_train"]) >= 1:
        raise ValueError(f"{path}: needs rates (seconds_per_gflop > 0, batch_s and layer_s >= 0) for "
                         f"{sorted(MPNN_COSTS)} (missing {missing}) and epoch_over_train >= 1; "
                         f"re-run bench/cost_anchors.py --write")
    factors = {str(t): float(v) for t, v in record.get("potential_factor", {}).items()}
    if not all(math.isfinite(v) and v >= 1 for v in factors.values()):
        raise ValueError(f"{path}: potential_factor must be finite and >= 1 per type, got {factors}; "
                         f"re-run bench/cost_anchors.py --write")
    return CostAnchors(rates, float(record["epoch_over_train"]),
                       f"{record.get('measured_by', '?')} on {record.get('date', '?')}", factors)

