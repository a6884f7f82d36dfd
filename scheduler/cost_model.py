"""Predicted cost of a HydraGNN trial: work (slot-seconds at one slot), memory per slot, and
duration on ``n`` slots; refined online from finished trials.

Analytic part: a FLOPs-like count per graph and conv layer for each ``mpnn_type``
(:mod:`scheduler.flop_model`); one graph's training time on one CPU thread is the measured
:class:`scheduler.cost_anchors.TypeRates` of its type (seconds per FLOP x FLOPs + fixed seconds per
batch and per batch and layer / batch size, ``scheduler/cost_anchors.json``), on the dataset's
:class:`scheduler.dataset_stats.DatasetStats`. ``device_speedup`` converts to the target slot (e.g.
one GCD).

A trial's wall time on ``n`` slots is three terms::

    seconds = start-up + num_epoch x train_epoch(n) x eval_factor

``start-up`` (process, imports, data preparation; the median of what attempts showed, a prior before
any did), ``train_epoch(n)`` the training pass of one epoch on ``n`` slots (analytic x the learnt
correction / (n e(n))), ``eval_factor`` the whole epoch over its training pass (validation and test
passes; the median of what epochs showed, the measured anchors' figure before).

Online part, from every epoch of every attempt (:meth:`CostModel.learn_epoch`; running, stopped,
timed out or completed alike, each attempt one row that its latest epoch replaces): ridge
regression of ``log(observed one-slot training seconds / analytic)`` on ``[1, one-hot(mpnn_type),
log(analytic)]`` (the intercept unshrunk: a common bias is learnt from the first epoch; the
per-type rates shrink quickly to what is observed, the ridge weight is one row), robust to a lying
trial or a broken node (:mod:`scheduler.robust_ridge`: targets clipped against the population,
per-node factors kept per node, the latest 1,024 attempts). A trial that
reports no epochs teaches the model its whole wall time when it ends (:meth:`CostModel.update`).
:meth:`CostModel.prediction_error` reports the median and p90 of ``|log(pred / actual)|`` where each
prediction was made before that trial was learnt from.

Data-parallel efficiency ``e(n)``: :mod:`scheduler.efficiency`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping

import numpy as np
from hydragnn_ensemble.config import ConfigError, get_by_dotted_key
from scheduler.cost_anchors import CostAnchors, load_anchors
from scheduler.data_cost import DataCost
from scheduler.dataset_stats import DatasetStats
from scheduler.efficiency import Efficiency, ParallelEfficiency
from scheduler.flop_model import MPNN_COSTS, graph_flops
from scheduler.robust_ridge import RobustRidge

#: the learnt correction of the measured anchors stays within a millionfold either way, so a
#: prediction stays finite whatever all trials reported (each row is clipped, the median is not)
MAX_LOG_CORRECTION = math.log(1e6)
MAX_EVAL_FACTOR = 5.0  # an epoch's wall time over its training pass is clipped to [1, this]
STARTUP_PRIOR_S = 5.0  # a trial's start-up before any attempt showed it (the runtime's prior)
BASE_MEMORY_GB = 0.5  # runtime, framework and CUDA/HIP context per process


class CostModelError(ValueError):
    """A trial configuration the cost model cannot read (names the key and value)."""


def _cost_model_name(mpnn_type: str) -> str:
    """The cost tables' spelling of a HydraGNN ``mpnn_type`` (HydraGNN writes ``PAINN`` for PaiNN);
    an unknown type is kept as it is (and refused by :class:`TrialFeatures`)."""
    return {name.lower(): name for name in MPNN_COSTS}.get(mpnn_type.lower(), mpnn_type)


@dataclass(frozen=True)
class TrialFeatures:
    """The hyperparameters that set a trial's cost."""

    mpnn_type: str
    hidden_dim: int
    num_conv_layers: int
    batch_size: int
    num_epoch: int
    heads: int = 1
    potential: bool = False  # an interatomic potential: forces and stress are derivatives of the energy

    def __post_init__(self) -> None:
        if self.mpnn_type not in MPNN_COSTS:
            raise CostModelError(f"mpnn_type {self.mpnn_type!r} is not one of {sorted(MPNN_COSTS)}")
        for name in ("hidden_dim", "num_conv_layers", "batch_size", "num_epoch", "heads"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise CostModelError(f"{name} must be a positive integer, got {value!r}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "TrialFeatures":
        """From a HydraGNN config dict. A key the config leaves out takes the HydraGNN schema's
        default (what the trainer will use: ``num_epoch`` 100, ``batch_size`` 32), never one of
        this class; the architecture keys the schema requires must be there. ``heads`` is the number
        of ``Variables_of_interest.output_names`` (1 when a custom trial program's config names none)."""
        def value(key: str) -> Any:
            return get_by_dotted_key(config, key)

        try:
            try:
                names = value("NeuralNetwork.Variables_of_interest.output_names")
                if names is None:
                    names = value("NeuralNetwork.Variables_of_interest.output_index") or []
                heads = max(1, len(names))
            except ConfigError:
                heads = 1
            try:
                potential = bool(value("NeuralNetwork.Training.compute_grad_energy")) or bool(
                    value("NeuralNetwork.Architecture.enable_interatomic_potential"))
            except ConfigError:  # a custom trial program's config
                potential = False
            return cls(
                mpnn_type=_cost_model_name(str(value("NeuralNetwork.Architecture.mpnn_type"))),
                hidden_dim=int(value("NeuralNetwork.Architecture.hidden_dim")),
                num_conv_layers=int(value("NeuralNetwork.Architecture.num_conv_layers")),
                batch_size=int(value("NeuralNetwork.Training.batch_size")),
                num_epoch=int(value("NeuralNetwork.Training.num_epoch")),
                heads=heads,
                potential=potential,
            )
        except (ConfigError, TypeError, ValueError) as exc:
            if isinstance(exc, CostModelError):
                raise
            raise CostModelError(f"NeuralNetwork config: {exc}") from None


@dataclass(frozen=True)
class EpochTimes:
    """What a running attempt showed of its cost: its start-up (seconds from launch to its first
    epoch; None: not known), its latest epoch's wall seconds and training seconds (None: not
    reported)."""

    startup_s: float | None
    epoch_s: float
    train_s: float | None = None


@dataclass(frozen=True)
class ErrorSummary:
    """Prediction error of the model on the trials it has seen: ``|log(pred / actual)|``."""

    count: int
    median: float | None
    p90: float | None


@dataclass(frozen=True)
class GpuBusy:
    """How busy one trial alone keeps a GPU: its step's kernel time over the step's wall time,
    ``C / (C + step_s + layer_s * layers)``. ``C`` is the step's compute at the trainer's measured
    CPU rate (:class:`TypeRates`, per FLOP) made ``compute_speedup`` times faster; ``step_s`` and
    ``layer_s`` are what a step pays whatever its size (optimizer, host-side batching, kernel
    launches per layer forward and backward), during which the GPU idles. Small GNN steps are
    overhead-bound: that is why HydraGNN's trials kept Frontier's GPUs under 40% busy.

    The defaults are not measured (no device has run this code yet): a GPU's kernels 100x one
    CPU thread, 4 ms of fixed work per step and 1 ms per layer (tens of kernel launches of ~10 us
    each, forward and backward). ``bench/gpu_colocation.py`` measures the busy share on a device."""

    compute_speedup: float = 100.0
    step_s: float = 0.004
    layer_s: float = 0.001
    source: str = "assumed (not measured on a device)"


@dataclass
class CostModel:
    """Predicts a trial's wall time and memory; learns from every epoch of every attempt."""

    stats: DatasetStats
    device_speedup: float = 1.0
    efficiency: Efficiency = field(default_factory=ParallelEfficiency)
    anchors: CostAnchors = field(default_factory=load_anchors)  # the trainer's measured rates
    ridge: float = 1.0
    startup_prior_s: float = 0.0  # the start-up assumed before any attempt showed one
    gpu_busy: GpuBusy = field(default_factory=GpuBusy)  # a trial's busy share of a GPU alone
    data: DataCost = field(default_factory=DataCost)  # reading the data (measured: load_data_cost())
    _all: RobustRidge = field(init=False, repr=False)  # every attempt's row
    _one_slot: RobustRidge = field(init=False, repr=False)  # one-slot attempts': what speed-ups are measured against
    _startups: "_RecentMedian" = field(default_factory=lambda: _RecentMedian(), init=False, repr=False)
    _eval_factors: "_RecentMedian" = field(default_factory=lambda: _RecentMedian(), init=False, repr=False)
    _errors: list[float] = field(default_factory=list, init=False, repr=False)
    _finished: int = field(default=0, init=False, repr=False)

    _TYPES = tuple(sorted(MPNN_COSTS))

    def __post_init__(self) -> None:
        self._all = RobustRidge(2 + len(self._TYPES), self.ridge)
        self._one_slot = RobustRidge(2 + len(self._TYPES), self.ridge)

    # -- analytic --------------------------------------------------------------------------------
    def seconds_per_graph_cpu(self, f: TrialFeatures) -> float:
        """Training time per graph on one CPU thread, at the rates the trainer measured (a
        potential's with its measured factor)."""
        seconds = self.anchors.rates[f.mpnn_type].seconds_per_graph(f.mpnn_type, f.hidden_dim, f.num_conv_layers,
                                                                    f.batch_size, f.heads, self.stats)
        return seconds * self.anchors.potential_factor_of(f.mpnn_type) if f.potential else seconds

    def analytic_epoch(self, f: TrialFeatures) -> float:
        """Seconds of one epoch's training pass on one slot, before the learnt correction: the
        model's work on the device and reading the graphs (:mod:`scheduler.data_cost`, on the host)."""
        n = self.stats.num_graphs
        return n * self.seconds_per_graph_cpu(f) / self.device_speedup + self.data.epoch_s(n, self.stats.bytes_per_graph)

    def analytic_work(self, f: TrialFeatures) -> float:
        """Slot-seconds of the whole trial's epochs on one slot, before the learnt correction."""
        return f.num_epoch * self.analytic_epoch(f) * self.anchors.epoch_over_train

    def utilisation_alone(self, f: TrialFeatures) -> float:
        """The busy share in (0, 1) of one GPU that the trial alone keeps (:class:`GpuBusy`); the
        host reading a step's graphs (:mod:`scheduler.data_cost`) is time the GPU idles too."""
        rate, busy = self.anchors.rates[f.mpnn_type], self.gpu_busy
        flops = graph_flops(f.mpnn_type, f.hidden_dim, f.num_conv_layers, f.heads, self.stats.mean_nodes,
                                 self.stats.mean_edges)
        compute = rate.seconds_per_flop * flops * f.batch_size / busy.compute_speedup
        reading = self.data.epoch_s(f.batch_size, self.stats.bytes_per_graph)
        return compute / (compute + busy.step_s + busy.layer_s * f.num_conv_layers + reading)

    def num_parameters(self, f: TrialFeatures) -> float:
        dense, message, edge_dense = MPNN_COSTS[f.mpnn_type]
        h = float(f.hidden_dim)
        return f.num_conv_layers * h * h * (dense + edge_dense + 0.5 * message) + f.heads * 2 * h * h

    def memory_per_slot_gb(self, f: TrialFeatures, slots: int = 1) -> float:
        """Peak memory of one process: weights + gradients + Adam state, plus the activations of its
        share (``ceil(batch_size / slots)``) of the global batch."""
        dense, message, edge_dense = MPNN_COSTS[f.mpnn_type]
        h = float(f.hidden_dim)
        n, e = self.stats.mean_nodes, self.stats.mean_edges
        act_per_graph = f.num_conv_layers * (n * h * (dense + 2) + e * h * (message + 2 * edge_dense)) * 8.0
        per_slot_batch = math.ceil(f.batch_size / slots)
        return BASE_MEMORY_GB + (16.0 * self.num_parameters(f) + per_slot_batch * act_per_graph) / 1e9

    # -- learnt terms ----------------------------------------------------------------------------
    @property
    def startup_s(self) -> float:
        """Predicted start-up of an attempt: the median of the latest attempts seen, else the prior
        and opening the dataset (its facts: not growing with it)."""
        return self._startups.median(self.startup_prior_s + self.data.open_s)

    @property
    def eval_factor(self) -> float:
        """An epoch's wall time over its training pass: the median of those seen, else the prior."""
        return self._eval_factors.median(self.anchors.epoch_over_train)

    def _features(self, f: TrialFeatures, analytic: float) -> np.ndarray:
        x = np.zeros(2 + len(self._TYPES))
        x[0] = 1.0
        x[1 + self._TYPES.index(f.mpnn_type)] = 1.0
        x[-1] = math.log(analytic)
        return x

    # -- predictions -----------------------------------------------------------------------------
    def train_epoch_seconds(self, f: TrialFeatures, slots: int = 1) -> float:
        """Seconds of one epoch's training pass on ``slots`` slots (data parallel)."""
        return self._one_slot_seconds(f, self._all) / (slots * self.efficiency(slots))

    def _one_slot_seconds(self, f: TrialFeatures, ridge: RobustRidge) -> float:
        analytic = self.analytic_epoch(f)
        correction = ridge.predict(self._features(f, analytic))
        return analytic * math.exp(min(MAX_LOG_CORRECTION, max(-MAX_LOG_CORRECTION, correction)))

    def epoch_seconds(self, f: TrialFeatures, slots: int = 1) -> float:
        """Wall seconds of one whole epoch (training and evaluation) on ``slots`` slots."""
        return self.train_epoch_seconds(f, slots) * self.eval_factor

    def predict_seconds(self, f: TrialFeatures, slots: int, epochs: float | None = None) -> float:
        """Wall time on ``slots`` slots of the start-up and ``epochs`` epochs (default: all)."""
        return self.startup_s + (f.num_epoch if epochs is None else epochs) * self.epoch_seconds(f, slots)

    def predict_work(self, f: TrialFeatures) -> float:
        """Slot-seconds of the whole trial on one slot."""
        return self.predict_seconds(f, 1)

    # -- learning --------------------------------------------------------------------------------
    def learn_epoch(self, key: Hashable, f: TrialFeatures, slots: int, times: EpochTimes,
                    node: Hashable = None) -> bool:
        """Learn from an epoch of a running attempt (``key``; its later epochs replace this one) on
        ``node`` (None: not known, or several): its start-up, its evaluation share and its training
        rate (which, on more than one slot, also measures the data-parallel efficiency). False
        (nothing learnt) for times that are not finite and positive. What one attempt or one node
        can move is bounded (:mod:`scheduler.robust_ridge`; the evaluation share is clipped to
        ``[1, MAX_EVAL_FACTOR]``)."""
        usable = lambda v: v is not None and math.isfinite(v) and v > 0  # noqa: E731
        if not usable(times.epoch_s) or (times.train_s is not None and not usable(times.train_s)):
            return False
        if times.startup_s is not None and math.isfinite(times.startup_s) and times.startup_s >= 0:
            self._startups.set(key, times.startup_s)
        if times.train_s is not None:
            self._eval_factors.set(key, min(MAX_EVAL_FACTOR, max(1.0, times.epoch_s / times.train_s)))
        train_s = times.train_s if times.train_s is not None else times.epoch_s / self.eval_factor
        if slots > 1 and self._one_slot.rows:  # how much faster than what one-slot attempts predict
            self.efficiency.learn(key, slots, self._one_slot_seconds(f, self._one_slot) / train_s)
        analytic = self.analytic_epoch(f)
        y = math.log(train_s) + math.log(slots * self.efficiency(slots)) - math.log(analytic)
        if not math.isfinite(y):
            return False
        x = self._features(f, analytic)
        self._all.set_row(key, x, y, node)
        if slots == 1:
            self._one_slot.set_row(key, x, y, node)
        return True

    def node_factor(self, node: Hashable) -> float:
        """How many times slower than the typical node ``node``'s trials train (1: not known)."""
        return self._all.group_factor(node)

    def update(self, f: TrialFeatures, slots: int, wall_time_s: float, epochs: int | None = None,
               node: Hashable = None) -> None:
        """Learn from a finished attempt that took ``wall_time_s`` on ``slots`` slots (on ``node``)
        for ``epochs`` epochs (default: all of them); its error is recorded first. Attempts that
        reported their epochs (:meth:`learn_epoch`) have taught the model already: call this for
        the others."""
        if wall_time_s <= 0 or not math.isfinite(wall_time_s):
            raise ValueError(f"wall time must be positive and finite, got {wall_time_s}")
        epochs = f.num_epoch if epochs is None else max(1, epochs)
        self.record_error(self.predict_seconds(f, slots, epochs), wall_time_s)
        per_epoch = max(wall_time_s - self.startup_s, 0.05 * wall_time_s) / epochs
        self._finished += 1
        self.learn_epoch(("finished", self._finished), f, slots, EpochTimes(None, per_epoch), node)

    def record_error(self, predicted_s: float, actual_s: float) -> None:
        """Keep ``|log(predicted / actual)|`` of a prediction made before its trial taught the model."""
        if predicted_s > 0 and actual_s > 0 and math.isfinite(predicted_s / actual_s):
            self._errors.append(abs(math.log(predicted_s / actual_s)))

    @property
    def observations(self) -> int:
        """Attempts the regression has learnt from."""
        return self._all.rows

    def prediction_error(self) -> ErrorSummary:
        """Median and p90 of ``|log(pred / actual)|`` over the predictions recorded so far."""
        if not self._errors:
            return ErrorSummary(0, None, None)
        err = np.asarray(self._errors)
        return ErrorSummary(len(err), float(np.median(err)), float(np.quantile(err, 0.9)))


class _RecentMedian:
    """The median of one value per key over the latest ``window`` keys (a key set again counts as
    new), computed once per change: rank 0 asks it for every candidate it sizes."""

    def __init__(self, window: int = 256) -> None:
        self.window = window
        self._values: dict[Hashable, float] = {}
        self._median: float | None = None

    def set(self, key: Hashable, value: float) -> None:
        self._values.pop(key, None)
        self._values[key] = value
        if len(self._values) > self.window:
            del self._values[next(iter(self._values))]
        self._median = None

    def median(self, default: float) -> float:
        if not self._values:
            return default
        if self._median is None:
            self._median = float(np.median(list(self._values.values())))
        return self._median
