"""Moldable trial sizes: how many slots each trial gets.

Rule (:meth:`Sizer.choose`): among the allowed sizes (1, 2, 4, 8 slots of one node; whole nodes
beyond), keep those where the predicted memory per slot fits the device; among them take the size
whose predicted duration (:meth:`scheduler.cost_model.CostModel.predict_seconds`: start-up and
epochs at ``n e(n)`` times one slot's rate) is closest to the target duration in log ratio (ties: the smaller size). If no size fits the memory the
largest one is chosen and flagged.

:class:`CostModelSizer` adapts this to the MPI runtime's sizer protocol
(``choose(params) -> SizedTrial``, ``size(params) -> (slots, seconds)``, ``observe(...)``,
``larger_than(slots)``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

from scheduler.cost_model import CostModel, CostModelError, EpochTimes, TrialFeatures
from scheduler.dataset_stats import DatasetStats
from scheduler.placement.base import TrialRequest
from scheduler.sharing import Packing, ShareDemand

DEFAULT_STATS = DatasetStats(num_graphs=1000, mean_nodes=30.0, mean_edges=600.0)  # unreadable dataset


@dataclass(frozen=True)
class SizeChoice:
    """The size picked for a trial and what the cost model expects there."""

    slots: int
    predicted_seconds: float
    predicted_work: float  # slot-seconds at that size (slots x predicted_seconds)
    memory_per_slot_gb: float
    fits_memory: bool
    alternatives: tuple[tuple[int, float], ...] = ()  # larger sizes that fit memory: (slots, seconds)


@dataclass(frozen=True)
class SizedTrial:
    """What placement needs about a candidate: its size, the predicted wall time there, and the
    wider sizes it may run at instead (moldable), as ``(slots, predicted seconds)`` ascending."""

    slots: int
    predicted_seconds: float
    alternatives: tuple[tuple[int, float], ...] = ()
    epochs: int | None = None  # the trial's epoch budget (None: unknown); a running trial's remaining
    #                            time is re-estimated from its epochs (scheduler.loop)
    startup_s: float | None = None  # predicted start-up (None: the sizer has no such term)
    epoch_seconds: tuple[tuple[int, float], ...] = ()  # predicted seconds per epoch: (slots, seconds)
    memory_gb: float | None = None  # predicted peak memory per slot at its size (None: not predicted)
    utilisation: float | None = None  # predicted busy share of one GPU alone (None: not predicted)

    def demand(self) -> ShareDemand | None:
        """What it asks of a GPU it might share (:mod:`scheduler.sharing`); None when its memory is
        not predicted or it needs more than one slot."""
        if self.memory_gb is None or self.slots != 1:
            return None
        seconds, per_epoch = self.predicted_seconds, self.epoch_s_at(1)
        if self.epochs is not None and per_epoch is not None:  # its whole budget (a stopper may have
            seconds = (self.startup_s or 0.0) + self.epochs * per_epoch  # planned it with less)
        return ShareDemand(self.memory_gb, self.utilisation, seconds)

    def epoch_s_at(self, slots: int) -> float | None:
        """Predicted seconds of one epoch on ``slots`` slots (None: not predicted)."""
        for n, seconds in self.epoch_seconds:
            if n == slots:
                return seconds
        return None

    def seconds_at(self, slots: int) -> float:
        """Predicted wall time on ``slots`` slots: the sizer's own figure for its size and the
        alternatives, else ideal scaling from its size (a size it did not offer)."""
        if slots == self.slots:
            return self.predicted_seconds
        for n, seconds in self.alternatives:
            if n == slots:
                return seconds
        return self.predicted_seconds * self.slots / slots


def default_sizes(slots_per_node: int, max_nodes: int) -> list[int]:
    """1, 2, 4, ... up to one node, then whole nodes in powers of two up to ``max_nodes``."""
    sizes, s = [], 1
    while s < slots_per_node:
        sizes.append(s)
        s *= 2
    nodes = 1
    while nodes <= max_nodes:
        sizes.append(nodes * slots_per_node)
        nodes *= 2
    return sizes


class Sizer:
    """Chooses a trial's slot count from the cost model's predictions.

    ``packing``: with GPU sharing (:class:`scheduler.sharing.Packing`), a trial predicted to use
    less than ``packing.below`` of one GPU alone is sized at one slot when its memory fits there and
    it is predicted to end within ``packing.within_s`` there (the trial time limit: beyond it the
    trainer would stop it with fewer epochs); with ``packing.rigid`` it gets no wider alternatives:
    spread over several GPUs it would leave each of them idler still, packed with others on one it
    shares the idle part."""

    def __init__(self, cost_model: CostModel, sizes: Sequence[int], target_seconds: float,
                 memory_per_slot_gb: float = 64.0, packing: Packing | None = None) -> None:
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError(f"allowed sizes must be positive, got {list(sizes)}")
        if target_seconds <= 0:
            raise ValueError(f"target duration must be positive, got {target_seconds}")
        self.cost_model = cost_model
        self.sizes = sorted(set(sizes))
        self.target_seconds = target_seconds
        self.memory_per_slot_gb = memory_per_slot_gb
        self.packing = packing

    def choose(self, features: TrialFeatures) -> SizeChoice:
        """Memory first, then the predicted duration closest to the target (a small trial with
        ``packing``: one slot)."""
        options = []
        for s in self.sizes:
            mem = self.cost_model.memory_per_slot_gb(features, s)
            seconds = self.cost_model.predict_seconds(features, s)
            options.append((s, seconds, mem, mem <= self.memory_per_slot_gb))
        fitting = [o for o in options if o[3]]
        pack = self.packing
        packed = (pack is not None and fitting and fitting[0][0] == self.sizes[0] == 1
                  and fitting[0][1] <= pack.within_s and self.cost_model.utilisation_alone(features) < pack.below)
        if packed:
            s, seconds, mem, ok = fitting[0]
        elif fitting:
            s, seconds, mem, ok = min(fitting, key=lambda o: (abs(math.log(o[1] / self.target_seconds)), o[0]))
        else:
            s, seconds, mem, ok = options[-1]
        # only sizes that are faster; none for a trial packed rigidly
        rigid = packed and pack is not None and pack.rigid
        wider = () if rigid else tuple((o[0], o[1]) for o in fitting if o[0] > s and o[1] < seconds)
        return SizeChoice(s, seconds, s * seconds, mem, ok, wider)

    def larger_than(self, slots: int) -> int | None:
        """The next allowed size above ``slots`` (for retrying an out-of-memory trial), or None."""
        return next((s for s in self.sizes if s > slots), None)


class CostModelSizer:
    """The runtime's sizer: turns a candidate's params into a full HydraGNN config
    (``config_of``), sizes it with :class:`Sizer` and teaches the cost model finished trials.

    A config the cost model cannot read (no ``NeuralNetwork`` section, unknown ``mpnn_type``) gets the
    smallest size and the running mean wall time of finished trials as its prediction. A trial's
    features are computed once (when it is sized) and kept until it is observed.
    """

    def __init__(self, sizer: Sizer, config_of: Callable[[Mapping[str, Any]], Mapping[str, Any]],
                 fallback_seconds: float, work_fraction: Callable[[int], float] | None = None) -> None:
        self.sizer = sizer
        self.config_of = config_of
        self.fallback_seconds = fallback_seconds
        # under early discarding, the share of its epochs a trial is expected to train: placement
        # plans with that (expected work), not with the whole budget (the size stays the full one's)
        self.work_fraction = work_fraction
        self.notice: str | None = None  # e.g. why default dataset statistics are used
        self._sum = 0.0
        self._n = 0
        self._known: dict[str, TrialFeatures | None] = {}  # params (JSON) -> features, until observed
        self._taught: set[str] = set()  # params (JSON) of running attempts whose epochs taught the model

    @property
    def sizes(self) -> list[int]:
        return self.sizer.sizes

    @property
    def cost_model(self) -> CostModel:
        return self.sizer.cost_model

    @staticmethod
    def _key(params: Mapping[str, Any]) -> str:
        return json.dumps(params, sort_keys=True, default=str)

    def _features(self, params: Mapping[str, Any], forget: bool = False) -> TrialFeatures | None:
        key = self._key(params)
        if key not in self._known:
            try:
                self._known[key] = TrialFeatures.from_config(self.config_of(params))
            except CostModelError:
                self._known[key] = None
        return self._known.pop(key) if forget else self._known[key]

    def choose(self, params: Mapping[str, Any]) -> SizedTrial:
        """Size, predicted seconds and the wider sizes (that fit memory) of a candidate; an
        unreadable config gets the smallest size and no alternatives."""
        features = self._features(params)
        if features is None:
            mean = self._sum / self._n if self._n else self.fallback_seconds
            return SizedTrial(self.sizer.sizes[0], mean)
        choice = self.sizer.choose(features)
        f = 1.0 if self.work_fraction is None else self.work_fraction(features.num_epoch)
        model = self.cost_model
        sizes = (choice.slots, *(n for n, _ in choice.alternatives))
        return SizedTrial(choice.slots, choice.predicted_seconds * f, tuple((n, sec * f) for n, sec in choice.alternatives),
                          epochs=features.num_epoch, startup_s=model.startup_s,
                          epoch_seconds=tuple((n, model.epoch_seconds(features, n)) for n in sizes),
                          memory_gb=choice.memory_per_slot_gb, utilisation=model.utilisation_alone(features))

    def size(self, params: Mapping[str, Any]) -> tuple[int, float]:
        """(slots, predicted seconds) for a candidate."""
        sized = self.choose(params)
        return sized.slots, sized.predicted_seconds

    def observe_epoch(self, params: Mapping[str, Any], slots: int, attempt: tuple[int, int],
                      times: EpochTimes, node: int | None = None) -> bool:
        """Learn from the latest epoch of a running attempt (``(trial id, attempt)``) on ``node``
        (None: several, or not known); False when nothing was learnt (a config the model cannot
        read, times that are not usable)."""
        features = self._features(params)
        if features is None or not self.cost_model.learn_epoch(attempt, features, slots, times, node):
            return False
        self._taught.add(self._key(params))
        return True

    def observe(self, params: Mapping[str, Any], slots: int, wall_time_s: float, ok: bool,
                epochs: int | None = None, node: int | None = None) -> None:
        """A trial attempt ended after ``epochs`` epochs (None: not known) on ``node``. Its epochs
        taught the model already when it reported them; otherwise a successful one with a positive
        wall time teaches it now."""
        taught = self._key(params) in self._taught
        self._taught.discard(self._key(params))
        features = self._features(params, forget=True)
        if not ok or wall_time_s <= 0 or not math.isfinite(wall_time_s):
            return
        self._sum += wall_time_s
        self._n += 1
        if features is not None and not taught:
            self.sizer.cost_model.update(features, slots, wall_time_s, epochs, node)

    def larger_than(self, slots: int) -> int | None:
        return self.sizer.larger_than(slots)

    def regrow(self, params: Mapping[str, Any], slots: int, epoch_s: float) -> tuple[tuple[int, float], ...]:
        """Wider sizes that pay at the learnt efficiency (before it is measured, at what a move
        assumes: :meth:`scheduler.efficiency.Efficiency.for_move`)."""
        return wider_epochs(self.sizes, slots, epoch_s, self.cost_model.efficiency.for_move)


def runtime_sizer(dataset: str, sizes: Sequence[int], slots_per_node: int, time_limit_s: float,
                  config_of: Callable[[Mapping[str, Any]], Mapping[str, Any]], device: str = "cpu",
                  memory_per_slot_gb: float | None = None,
                  work_fraction: Callable[[int], float] | None = None,
                  packing: Packing | None = None) -> CostModelSizer:
    """The sizer the MPI runtime uses: a cost model on the campaign's dataset statistics (defaults
    when the dataset cannot be read as a graph store) that learns from every epoch, with the
    data-parallel efficiency learnt (no widening for speed until measured), target duration a
    quarter of the trial time limit, device memory per slot (GPU: 64 GB, one MI250X GCD; CPU: this host's memory / slots per
    node). ``work_fraction``: a stopper's expected share of a trial's epochs (early discarding).
    ``packing``: with GPU sharing, which small trials stay at one GPU to share it (:class:`Sizer`)."""
    from scheduler.cost_model import STARTUP_PRIOR_S
    from scheduler.efficiency import LearntEfficiency
    from scheduler.data_cost import load_data_cost

    notice = None
    try:
        stats = DatasetStats.from_store(dataset)
    except (OSError, ValueError, RuntimeError, KeyError, ImportError) as exc:
        stats = DEFAULT_STATS  # the trainer reports an unreadable dataset; sizing goes on
        notice = f"cost model: dataset statistics of {dataset} not readable ({exc}); using {stats}"
    if memory_per_slot_gb is None:
        memory_per_slot_gb = slot_memory_gb(device, slots_per_node)
    model = CostModel(stats, efficiency=LearntEfficiency(), startup_prior_s=STARTUP_PRIOR_S, data=load_data_cost())
    sizer = Sizer(model, sizes, target_seconds=max(1e-3, time_limit_s / 4.0), memory_per_slot_gb=memory_per_slot_gb,
                  packing=packing)
    result = CostModelSizer(sizer, config_of, fallback_seconds=time_limit_s, work_fraction=work_fraction)
    result.notice = notice
    return result


def slot_memory_gb(device: str, slots_per_node: int) -> float:
    """Memory of one slot when the campaign does not say: 64 GB (one MI250X GCD) on ``gpu``, this
    host's memory shared by its slots on ``cpu``."""
    import os

    if device == "gpu":
        return 64.0
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return total / max(1, slots_per_node)


class TrialSizer(Protocol):
    """What the campaign loop asks about trial sizes (:class:`CostModelSizer` in the MPI runtime,
    the workload's own sizes in the simulator)."""

    def choose(self, params: dict[str, Any]) -> SizedTrial:
        """Size, predicted seconds and wider sizes (moldable alternatives) of a candidate."""

    def size(self, params: dict[str, Any]) -> tuple[int, float]:
        """(slots, predicted seconds) for a candidate."""

    def observe_epoch(self, params: dict[str, Any], slots: int, attempt: tuple[int, int], times: EpochTimes,
                      node: int | None = None) -> bool:
        """Learn from the latest epoch of a running attempt on ``node`` (None: several, or not
        known); False when nothing was learnt."""

    def observe(self, params: dict[str, Any], slots: int, wall_time_s: float, ok: bool,
                epochs: int | None = None, node: int | None = None) -> None:
        """Learn from a finished trial attempt (``epochs`` trained; None: not known) on ``node``."""

    def larger_than(self, slots: int) -> int | None:
        """The next usable size above ``slots`` (out-of-memory retry), or None."""

    def regrow(self, params: dict[str, Any], slots: int, epoch_s: float) -> tuple[tuple[int, float], ...]:
        """The wider sizes a trial running on ``slots`` slots at ``epoch_s`` seconds per epoch
        could move to where that pays, as ``(slots, predicted seconds per epoch there)`` ascending
        (empty: it stays)."""


def wider_epochs(sizes: Sequence[int], slots: int, epoch_s: float,
                 efficiency: Callable[[int], float], min_speedup: float = 1.25) -> tuple[tuple[int, float], ...]:
    """``(n, seconds per epoch on n slots)`` for the ``sizes`` above ``slots`` (ascending) where data
    parallelism with ``efficiency`` pays: each kept size runs an epoch at least ``min_speedup`` times
    faster than the size before it (the current one first)."""
    out: list[tuple[int, float]] = []
    last = epoch_s
    rate = slots * efficiency(slots)
    for n in sorted(set(sizes)):
        if n <= slots:
            continue
        seconds = epoch_s * rate / (n * efficiency(n))
        if seconds * min_speedup <= last:
            out.append((n, seconds))
            last = seconds
    return tuple(out)


MIN_MOLDABLE_S = 60.0  # trials predicted shorter than this at their own size are not widened


def trial_request(trial_id: int, slots: int, sized: SizedTrial, submit_time: float,
                  min_moldable_s: float = MIN_MOLDABLE_S, avoid_nodes: frozenset[int] = frozenset()) -> TrialRequest:
    """The placement request of a trial attempt on ``slots`` slots: the predicted time at that size
    and the sizer's wider sizes as moldable ``alternatives`` (a policy may start it at one of them;
    the trial then runs on that many slots, see :meth:`scheduler.loop.TrialBook.schedule`), placed
    off ``avoid_nodes`` where it fits elsewhere.

    A trial predicted to take less than ``min_moldable_s`` at ``slots`` stays rigid: starting more
    processes and their torch.distributed rendezvous costs seconds, which the cost model does not
    count and which would eat what a wider start saves on a short trial."""
    seconds = sized.seconds_at(slots)
    wider = tuple((n, sec) for n, sec in sized.alternatives if n > slots) if seconds >= min_moldable_s else ()
    return TrialRequest(trial_id, slots, predicted_seconds=seconds, submit_time=submit_time, alternatives=wider,
                        avoid_nodes=avoid_nodes)
