"""Workloads for the simulator: HydraGNN-like trials drawn from a search space, sized through the
real cost model and sizer, with true run times lognormally scattered around the predictions; or a
replay of a campaign's ``results.csv``."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scheduler.cost_model import CostModel, DatasetStats, ParallelEfficiency, TrialFeatures
from scheduler.sizing import Sizer, default_sizes

# A large multi-dataset run (HydraGNN multidataset HPO-like): graphs, mean atoms and directed edges
MULTIDATASET_STATS = DatasetStats(num_graphs=2_000_000, mean_nodes=30.0, mean_edges=600.0)
GCD_SPEEDUP = 30.0  # one MI250X GCD against one CPU thread of the ANCHORS measurements
GCD_MEMORY_GB = 64.0
MPNN_TYPES = ("GIN", "SchNet", "EGNN", "PNA", "PaiNN")
BATCH_SIZES = (16, 32, 64, 128)


class WorkloadError(ValueError):
    """A replay file that cannot be read (names the file and row)."""


@dataclass(frozen=True)
class SimTrial:
    """One trial of a simulated campaign: its size, what placement is told, and the truth."""

    trial_id: int
    slots: int
    predicted_seconds: float
    true_seconds: float
    memory_per_slot_gb: float = 0.0
    features: TrialFeatures | None = None
    alternatives: tuple[tuple[int, float], ...] = ()  # wider sizes (slots, predicted seconds)
    true_work_one: float | None = None  # true slot-seconds at one slot (None: rigid trial)
    time_limit_s: float = math.inf
    efficiency: ParallelEfficiency | None = None
    curve: tuple[float, ...] | None = None  # validation objective after each epoch (early discarding)

    @property
    def true_work(self) -> float:
        return self.slots * self.true_seconds

    def true_seconds_at(self, slots: int) -> float:
        """True wall time at ``slots`` (its sized width gives :attr:`true_seconds`)."""
        if slots == self.slots or self.true_work_one is None or self.efficiency is None:
            return self.true_seconds
        return min(self.true_work_one / (slots * self.efficiency(slots)), self.time_limit_s)


def sample_features(rng: np.random.Generator) -> TrialFeatures:
    """A configuration from the HydraGNN search space (hidden 64-2000 log-uniform, 2-6 layers)."""
    hidden = int(round(math.exp(rng.uniform(math.log(64), math.log(2000)))))
    return TrialFeatures(
        mpnn_type=str(rng.choice(MPNN_TYPES)), hidden_dim=hidden,
        num_conv_layers=int(rng.integers(2, 7)), batch_size=int(rng.choice(BATCH_SIZES)),
        num_epoch=int(rng.integers(5, 31)), heads=int(rng.integers(1, 4)))


def learning_curve(epochs: int, rng: np.random.Generator) -> tuple[float, ...]:
    """A noisy decreasing validation curve: a final level drawn lognormally, a start 3-6x above it,
    approached with a time constant of 1-6 epochs (so early epochs rank trials imperfectly)."""
    final = 0.1 * math.exp(0.5 * rng.standard_normal())
    start = final * rng.uniform(3.0, 6.0)
    tau = rng.uniform(1.0, 6.0)
    return tuple(float(final + (start - final) * math.exp(-e / tau) + 0.02 * final * rng.standard_normal())
                 for e in range(1, epochs + 1))


def make_cost_model(slots_per_node: int) -> CostModel:
    """The cost model the simulator sizes trials with (GCD speed, multidataset statistics)."""
    return CostModel(MULTIDATASET_STATS, device_speedup=GCD_SPEEDUP,
                     efficiency=ParallelEfficiency(slots_per_node=slots_per_node))


def generate_workload(num_trials: int, nodes: int, slots_per_node: int, estimate_error: float,
                      seed: int, target_seconds: float = 1800.0, max_trial_nodes: int = 256,
                      time_limit_s: float | None = None, cost_model: CostModel | None = None,
                      moldable: bool = True, curves: bool = False) -> list[SimTrial]:
    """``num_trials`` trials: features -> cost model -> sizer (memory first, then the target
    duration) -> predicted seconds; true seconds = predicted x exp(N(0, estimate_error^2)).

    ``moldable``: give placement the wider sizes each trial may run at (``alternatives``).
    ``curves``: give every trial a learning curve of ``num_epoch`` epochs (:func:`learning_curve`,
    drawn from its own generator so the trials are the same with or without).
    Like the runtime's ``trial_time_limit_s`` (the trainer's time budget), no trial runs longer than
    ``time_limit_s`` (default 3 x the target): a trial too big for the largest size is cut there.
    """
    limit = time_limit_s if time_limit_s is not None else 3.0 * target_seconds
    if num_trials < 1:
        raise ValueError(f"num_trials must be >= 1, got {num_trials}")
    if estimate_error < 0:
        raise ValueError(f"estimate_error must be >= 0, got {estimate_error}")
    rng = np.random.default_rng(seed)
    curve_rng = np.random.default_rng(seed + 104729)
    model = cost_model or make_cost_model(slots_per_node)
    sizer = Sizer(model, default_sizes(slots_per_node, min(nodes, max_trial_nodes)), target_seconds,
                  memory_per_slot_gb=GCD_MEMORY_GB)
    trials = []
    for tid in range(num_trials):
        features = sample_features(rng)
        choice = sizer.choose(features)
        noise = math.exp(estimate_error * rng.standard_normal())  # always drawn: same trials at every error
        predicted = min(choice.predicted_seconds, limit)
        eff = model.efficiency
        trials.append(SimTrial(
            tid, choice.slots, predicted, min(choice.predicted_seconds * noise, limit),
            choice.memory_per_slot_gb, features,
            alternatives=tuple((n, min(sec, limit)) for n, sec in choice.alternatives) if moldable else (),
            true_work_one=choice.predicted_seconds * noise * choice.slots * eff(choice.slots),
            time_limit_s=limit, efficiency=eff,
            curve=learning_curve(features.num_epoch, curve_rng) if curves else None))
    return trials


def replay_workload(path: str | Path, slots_per_node: int, estimate_error: float, seed: int) -> list[SimTrial]:
    """Trials of a real campaign's ``results.csv`` (``m:wall_time_s``, ``m:slots``); predictions are
    the true times scattered by ``estimate_error``. Rows without a wall time are skipped."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    trials = []
    with open(path, newline="") as fh:
        for row_no, row in enumerate(csv.DictReader(fh), start=2):
            wall, slots = row.get("m:wall_time_s", ""), row.get("m:slots", "")
            if not wall:
                continue
            try:
                seconds, size = float(wall), int(float(slots or 1))
            except ValueError:
                raise WorkloadError(f"{path}, row {row_no}: m:wall_time_s={wall!r} m:slots={slots!r} "
                                    "are not numbers") from None
            if seconds <= 0 or size < 1:
                continue
            if size > slots_per_node and size % slots_per_node:
                size = -(-size // slots_per_node) * slots_per_node  # whole nodes
            noise = math.exp(estimate_error * rng.standard_normal()) if estimate_error else 1.0
            trials.append(SimTrial(len(trials), size, seconds * noise, seconds))
    if not trials:
        raise WorkloadError(f"{path}: no row with a positive m:wall_time_s")
    return trials
