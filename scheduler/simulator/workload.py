"""Workloads for the simulator: HydraGNN-like trials drawn from a search space, sized through the
real cost model and sizer, with true run times lognormally scattered around the predictions; or a
replay of a campaign's ``results.csv``."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from scheduler.cost_anchors import CostAnchors, TypeRates
from scheduler.cost_model import CostModel, TrialFeatures
from scheduler.dataset_stats import DatasetStats
from scheduler.efficiency import ParallelEfficiency
from scheduler.flop_model import MPNN_COSTS, graph_flops
from scheduler.data_cost import load_data_cost
from scheduler.runtime.launch import kill_margin_s
from scheduler.simulator.error_model import ErrorModel, LognormalError
from scheduler.sharing import Packing
from scheduler.sizing import Sizer, default_sizes

# A large multi-dataset run (HydraGNN multidataset HPO-like): graphs, mean atoms and directed edges
#: HydraGNN's multidataset campaigns: 2 M graphs of ~30 atoms, 600 edges, ~21 kB each as stored
MULTIDATASET_STATS = DatasetStats(num_graphs=2_000_000, mean_nodes=30.0, mean_edges=600.0, bytes_per_graph=21_000.0)
GCD_SPEEDUP = 30.0  # one MI250X GCD against one CPU thread of the ANCHORS measurements
GCD_MEMORY_GB = 64.0
STARTUP_S = 60.0  # a trial's fixed start-up on a GCD node (interpreter, imports from Lustre), before
#                   opening its data (DataCost.open_s, charged by the cost model's start-up)
MPNN_TYPES = ("GIN", "SchNet", "EGNN", "PNA", "PaiNN")
BATCH_SIZES = (16, 32, 64, 128)


class WorkloadError(ValueError):
    """A replay file that cannot be read (names the file and row)."""


@dataclass(frozen=True)
class SimTrial:
    """One trial of a simulated campaign: its size, what placement is told, and the truth.

    A trial is a fixed start-up (``startup_s``, paid again by every attempt) and ``epochs`` epochs of
    ``epoch_s`` seconds each at its own size; an epoch on ``n`` slots takes ``slots e(slots) / (n
    e(n))`` times that (``efficiency`` e; without one the epoch time does not change with the
    width). Like the trainer's time budget, ``time_limit_s`` (counted over all its attempts) ends
    it after the epoch that reaches it (or kills it when that epoch outlives the runtime's kill
    margin): it then ends as a timeout with fewer epochs.
    ``true_seconds`` is its wall time at its own size (given: ``epoch_s`` follows from it)."""

    trial_id: int
    slots: int
    predicted_seconds: float
    true_seconds: float  # at its own size, within its time limit
    memory_per_slot_gb: float = 0.0
    features: TrialFeatures | None = None
    alternatives: tuple[tuple[int, float], ...] = ()  # wider sizes it may start at (slots, predicted seconds)
    wider_sizes: tuple[int, ...] = ()  # wider sizes that fit its memory (it may be moved to one, malleable)
    time_limit_s: float = math.inf
    efficiency: ParallelEfficiency | None = None
    curve: tuple[float, ...] | None = None  # validation objective after each epoch (early discarding)
    epochs: int = 1  # its epoch budget: it reports each epoch, from which the campaign re-estimates it
    startup_s: float = 0.0  # true fixed start-up (process, imports, data) before its first epoch
    epoch_s: float | None = None  # true seconds per epoch at its own size (None: from true_seconds)
    learnt_seconds: float | None = None  # its prediction once the cost model learnt (None: never better)

    @property
    def true_work(self) -> float:
        return self.slots * self.true_seconds

    def true_epoch_s(self, slots: int) -> float:
        """True seconds of one epoch on ``slots`` slots."""
        own = self.epoch_s if self.epoch_s is not None else max(self.true_seconds - self.startup_s, 0.0) / self.epochs
        if slots == self.slots or self.efficiency is None:
            return own
        eff = self.efficiency
        return own * self.slots * eff(self.slots) / (slots * eff(slots))

    def attempt(self, slots: int, done: int = 0, used_s: float = 0.0, epoch_factor: float = 1.0,
                startup_s: float | None = None) -> tuple[float, int]:
        """(wall seconds, epochs it ends after) of an attempt on ``slots`` slots that starts after
        ``done`` epochs and ``used_s`` seconds of earlier attempts (a moved trial), each epoch
        ``epoch_factor`` times its own (writing the training state), after ``startup_s`` (default
        its own start-up)."""
        startup = self.startup_s if startup_s is None else startup_s
        if self.epoch_s is None and slots == self.slots and done == 0 and epoch_factor == 1.0 and startup_s is None:
            return self.true_seconds, self.epochs  # a trial given by its wall time only
        per_epoch = self.true_epoch_s(slots) * epoch_factor
        left = self.epochs - done
        budget = self.time_limit_s - used_s - startup  # the epoch that reaches it is the last
        if per_epoch <= 0 or left * per_epoch <= budget:
            return startup + left * per_epoch, self.epochs
        fit = min(left, max(1, math.ceil(budget / per_epoch)))
        killed_at = max(self.time_limit_s - used_s, 0.0) + kill_margin_s(self.time_limit_s)
        if startup + fit * per_epoch > killed_at:  # its last epoch outlives the kill margin
            return killed_at, done + fit - 1
        return startup + fit * per_epoch, done + fit

    def true_seconds_at(self, slots: int) -> float:
        """True wall time of a whole run on ``slots`` slots (:attr:`true_seconds` at its own size)."""
        return self.attempt(slots)[0]

    def shortest_s(self, epochs: int) -> float:
        """The shortest a run of its start-up and ``epochs`` epochs can be, at any size it may run
        at (a lower bound on the makespan of any campaign that runs it so far)."""
        return min(self.startup_s + epochs * self.true_epoch_s(n) for n in (self.slots, *self.wider_sizes))

    def work_done(self, epochs: int) -> float:
        """Slot-seconds its start-up and first ``epochs`` epochs need at its own size, within its
        time limit: what a run that got so far needed (a wider one holds more for the same)."""
        return self.slots * min(self.startup_s + epochs * self.true_epoch_s(self.slots), self.time_limit_s)


def sample_features(rng: np.random.Generator) -> TrialFeatures:
    """A configuration from the HydraGNN search space (hidden 64-2000 log-uniform, 2-6 layers)."""
    hidden = int(round(math.exp(rng.uniform(math.log(64), math.log(2000)))))
    return TrialFeatures(
        mpnn_type=str(rng.choice(MPNN_TYPES)), hidden_dim=hidden,
        num_conv_layers=int(rng.integers(2, 7)), batch_size=int(rng.choice(BATCH_SIZES)),
        num_epoch=int(rng.integers(5, 31)), heads=int(rng.integers(1, 4)))


def sample_demo_features(rng: np.random.Generator) -> TrialFeatures:
    """A configuration from the demo's search space (``examples/alloy/campaign.yaml``: GIN, CGCNN or
    SchNet, hidden 16-64 in steps of 16, 1-3 layers, batch 16/32/64; 30 epochs, 3 heads): small
    models, each a fraction of a GPU."""
    return TrialFeatures(
        mpnn_type=str(rng.choice(("GIN", "CGCNN", "SchNet"))), hidden_dim=int(rng.choice((16, 32, 48, 64))),
        num_conv_layers=int(rng.integers(1, 4)), batch_size=int(rng.choice((16, 32, 64))), num_epoch=30, heads=3)


#: the search spaces a synthetic workload draws its trials from (``simulate --space``)
SEARCH_SPACES = {"hydragnn": sample_features, "demo": sample_demo_features}


def learning_curve(epochs: int, rng: np.random.Generator) -> tuple[float, ...]:
    """A noisy decreasing validation curve: a final level drawn lognormally, a start 3-6x above it,
    approached with a time constant of 1-6 epochs (so early epochs rank trials imperfectly)."""
    final = 0.1 * math.exp(0.5 * rng.standard_normal())
    start = final * rng.uniform(3.0, 6.0)
    tau = rng.uniform(1.0, 6.0)
    return tuple(float(final + (start - final) * math.exp(-e / tau) + 0.02 * final * rng.standard_normal())
                 for e in range(1, epochs + 1))


def _hydragnn_anchors() -> CostAnchors:
    """The simulated workload's fixed costs: HydraGNN's CPU throughputs of ANCHORS.md at 64 atoms,
    2,590 edges, hidden 64, 3 layers (FLOPs only, an epoch 1.25 x its training pass). Fixed, so
    that simulator figures stay comparable as the trainer changes; what is measured from the
    trainer (``scheduler/cost_anchors.json``) sets the runtime's priors, and the error model the
    scatter around this workload."""
    graphs_per_s = {"GIN": 1208.0, "SchNet": 121.0, "EGNN": 86.0, "PNA": 64.0, "PaiNN": 27.0, "GAT": 300.0,
                    "CGCNN": 150.0}
    rates = {t: TypeRates(1.0 / (g * graph_flops(t, 64, 3, 0, 64.0, 2590.0))) for t, g in graphs_per_s.items()}
    assert set(rates) == set(MPNN_COSTS)
    return CostAnchors(rates, epoch_over_train=1.25, source="HydraGNN, ANCHORS.md")


SIM_ANCHORS = _hydragnn_anchors()


def make_cost_model(slots_per_node: int, graphs: int = MULTIDATASET_STATS.num_graphs) -> CostModel:
    """The cost model the simulator sizes trials with (GCD speed, multidataset statistics with
    ``graphs`` training graphs, the fixed workload costs :data:`SIM_ANCHORS`, the measured data cost)."""
    return CostModel(replace(MULTIDATASET_STATS, num_graphs=graphs), device_speedup=GCD_SPEEDUP,
                     efficiency=ParallelEfficiency(slots_per_node=slots_per_node), anchors=SIM_ANCHORS,
                     data=load_data_cost())


def default_time_limit(target_seconds: float) -> float:
    """A generated workload's trial time limit unless given: 3x the sizing target."""
    return 3.0 * target_seconds


def generate_workload(num_trials: int, nodes: int, slots_per_node: int, estimate_error: float,
                      seed: int, target_seconds: float = 1800.0, max_trial_nodes: int = 256,
                      time_limit_s: float | None = None, cost_model: CostModel | None = None,
                      moldable: bool = True, curves: bool = False, startup_s: float = STARTUP_S,
                      error_model: ErrorModel | None = None, space: str = "hydragnn",
                      packing: Packing | None = None) -> list[SimTrial]:
    """``num_trials`` trials: features -> cost model -> sizer (memory first, then the target
    duration) -> predicted seconds; true seconds = predicted x the error model's first factor (by
    default :class:`LognormalError` ``(estimate_error)``: exp(N(0, estimate_error^2)), no learning),
    the same for each of its epochs; with a learnt factor the trial also gets the prediction the
    campaign makes of it once the cost model learnt (``learnt_seconds``).

    Each trial has ``num_epoch`` epochs after a fixed start-up of ``startup_s`` (at most half its
    true time); it reports each epoch, so a running trial reveals its true rate after its first one.
    A trial whose true time exceeds ``time_limit_s`` ends as a timeout after the epoch reaching it.
    ``moldable``: give placement the wider sizes each trial may run at (``alternatives``).
    ``curves``: give every trial a learning curve of ``num_epoch`` epochs (:func:`learning_curve`,
    drawn from its own generator so the trials are the same with or without).
    The time limit is like the runtime's ``trial_time_limit_s`` (the trainer's time budget), by
    default 3 x the target. ``space``: a name of :data:`SEARCH_SPACES` the configurations come from.
    ``packing``: the sizer's (:class:`~scheduler.sizing.Sizer`) with GPU sharing: the small trials
    it keeps at one GPU (:meth:`scheduler.sharing.GpuSharing.packing`).
    """
    limit = time_limit_s if time_limit_s is not None else default_time_limit(target_seconds)
    if num_trials < 1:
        raise ValueError(f"num_trials must be >= 1, got {num_trials}")
    if estimate_error < 0:
        raise ValueError(f"estimate_error must be >= 0, got {estimate_error}")
    if space not in SEARCH_SPACES:
        raise ValueError(f"unknown search space {space!r}; valid names: {', '.join(SEARCH_SPACES)}")
    sample = SEARCH_SPACES[space]
    rng = np.random.default_rng(seed)
    curve_rng = np.random.default_rng(seed + 104729)
    error_rng = np.random.default_rng(seed + 15485863)  # the error model's own draws: same trials under each
    errors = error_model or LognormalError(estimate_error)
    model = cost_model or make_cost_model(slots_per_node)
    sizer = Sizer(model, default_sizes(slots_per_node, min(nodes, max_trial_nodes)), target_seconds,
                  memory_per_slot_gb=GCD_MEMORY_GB, packing=packing)
    trials = []
    for tid in range(num_trials):
        features = sample(rng)
        choice = sizer.choose(features)
        error = errors.draw(float(rng.standard_normal()), error_rng)  # z always drawn: same trials at every error
        curve = learning_curve(features.num_epoch, curve_rng) if curves else None
        true_total = choice.predicted_seconds * error.first  # all its epochs at its own size
        startup = min(startup_s + model.data.open_s, 0.5 * true_total)  # the process, then its data
        epoch_s = (true_total - startup) / features.num_epoch
        trial = SimTrial(
            tid, choice.slots, min(choice.predicted_seconds, limit), true_total,
            choice.memory_per_slot_gb, features,
            alternatives=tuple((n, min(sec, limit)) for n, sec in choice.alternatives) if moldable else (),
            wider_sizes=tuple(n for n, _ in choice.alternatives),
            time_limit_s=limit, efficiency=model.efficiency, curve=curve, epochs=features.num_epoch,
            startup_s=startup, epoch_s=epoch_s,
            learnt_seconds=None if error.learnt is None else min(true_total / error.learnt, limit))
        trials.append(replace(trial, true_seconds=trial.attempt(choice.slots)[0]))  # within its time limit
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
