"""The O(n) originals of the rung-based stoppers and the median rule, kept to check decisions.

These are the implementations before issue #45 (each decision sorted, or sorted into fronts, every
value at its rung or epoch): their constructors and ``report`` (with what it calls) verbatim but for
the names; the planning methods (``decision_epochs``, ``expected_fraction``), unchanged in
:mod:`hpo.stoppers`, are left out. ``tests/hpo/test_stopper_equivalence.py`` feeds the same reports
to them and to :mod:`hpo.stoppers` and asserts equal decisions; ``bench/stopper_scale.py`` times
them as the anchor. Nothing in the package uses them.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

from hpo.stoppers.base import Stopper, Value, is_nan
from hpo.stoppers.pareto import dominates

__all__ = ["ReferenceAshaStopper", "ReferenceIEpochStopper", "ReferenceMedianStopper", "ReferenceParetoAshaStopper",
           "ReferenceRungs", "reference_front_index"]


class ReferenceRungs:
    """Values recorded per trial at each rung (a re-run's value replaces its earlier one) and the
    next rung each trial is to be checked at; what rung-based stoppers share."""

    def __init__(self) -> None:
        self.values: list[dict[int, Value]] = []  # rung -> {trial: value}
        self.next_rung: dict[int, int] = {}
        self.last_epoch: dict[int, int] = {}

    def start(self, trial_id: int, epoch: int) -> int:
        """The rung to check ``trial_id`` at now (a report of an epoch not after its last one
        means the trial was re-run: it starts again at rung 0)."""
        if epoch <= self.last_epoch.get(trial_id, 0):
            self.next_rung[trial_id] = 0
        self.last_epoch[trial_id] = epoch
        return self.next_rung.get(trial_id, 0)

    def competing(self, rung: int, trial_id: int, value: Value) -> list[Value]:
        """Record ``value`` at ``rung``; returns the values there of the other trials plus it."""
        while len(self.values) <= rung:
            self.values.append({})
        at = self.values[rung]
        at.pop(trial_id, None)
        others = list(at.values())
        at[trial_id] = value
        return others + [value]


class ReferenceAshaStopper(Stopper):
    """:class:`hpo.stoppers.AshaStopper` as it was: the rung sorted per decision."""

    name = "asha"

    def __init__(self, min_epochs: int = 1, reduction_factor: int = 3, min_early_stopping_rate: int = 0) -> None:
        if min_epochs < 1 or reduction_factor < 2 or min_early_stopping_rate < 0:
            raise ValueError("asha: min_epochs >= 1, reduction_factor >= 2 and min_early_stopping_rate >= 0, got "
                             f"{min_epochs}, {reduction_factor}, {min_early_stopping_rate}")
        self.min_epochs = min_epochs
        self.reduction_factor = reduction_factor
        self.rate = min_early_stopping_rate
        self.rungs = ReferenceRungs()

    def rung_epochs(self, rung: int) -> int:
        return self.min_epochs * self.reduction_factor ** (self.rate + rung)

    def report(self, trial_id: int, epoch: int, value: float) -> bool:
        rung = self.rungs.start(trial_id, epoch)
        while epoch >= self.rung_epochs(rung):
            if is_nan(value):
                return True
            competing = sorted(self.rungs.competing(rung, trial_id, value))
            place = max(len(competing) // self.reduction_factor - 1, 0)
            if value > competing[place]:
                return True
            rung += 1
            self.rungs.next_rung[trial_id] = rung
        return False


class ReferenceIEpochStopper(Stopper):
    """:class:`hpo.stoppers.IEpochStopper` as it was: the epoch's values sorted per decision."""

    name = "i-epoch"

    def __init__(self, epochs: int = 1, keep: float = 1 / 3) -> None:
        if epochs < 1 or not 0 < keep <= 1:
            raise ValueError(f"i-epoch: epochs >= 1 and 0 < keep <= 1, got {epochs}, {keep}")
        self.epochs = epochs
        self.keep = keep
        self.rungs = ReferenceRungs()

    def report(self, trial_id: int, epoch: int, value: float) -> bool:
        rung = self.rungs.start(trial_id, epoch)
        if rung > 0 or epoch < self.epochs:
            return False
        if is_nan(value):
            return True
        competing = sorted(self.rungs.competing(0, trial_id, value))
        self.rungs.next_rung[trial_id] = 1
        return value > competing[max(math.ceil(self.keep * len(competing)) - 1, 0)]


class ReferenceMedianStopper(Stopper):
    """:class:`hpo.stoppers.MedianStopper` as it was: ``statistics.median`` of the others per report."""

    name = "median"

    def __init__(self, min_epochs: int = 1, min_trials: int = 3) -> None:
        if min_epochs < 1 or min_trials < 1:
            raise ValueError(f"median: min_epochs >= 1 and min_trials >= 1, got {min_epochs}, {min_trials}")
        self.min_epochs = min_epochs
        self.min_trials = min_trials
        self.at_epoch: dict[int, dict[int, float]] = {}  # epoch -> {trial: value}

    def report(self, trial_id: int, epoch: int, value: float) -> bool:
        here = self.at_epoch.setdefault(epoch, {})
        here.pop(trial_id, None)
        others = [v for v in here.values() if not is_nan(v)]
        here[trial_id] = value
        if is_nan(value):
            return True
        if epoch < self.min_epochs or len(others) < self.min_trials:
            return False
        return value > statistics.median(others)


def reference_front_index(values: list[Sequence[float]]) -> list[int]:
    """Non-dominated sorting: 0 for the Pareto front, 1 for the front once it is removed, ..."""
    index = [-1] * len(values)
    left, front = set(range(len(values))), 0
    while left:
        current = {i for i in left if not any(dominates(values[j], values[i]) for j in left if j != i)}
        for i in current:
            index[i] = front
        left -= current
        front += 1
    return index


class ReferenceParetoAshaStopper(Stopper):
    """:class:`hpo.stoppers.ParetoAshaStopper` as it was: the rung sorted into fronts per decision."""

    name = "pareto-asha"
    objectives = 2

    def __init__(self, min_epochs: int = 1, reduction_factor: int = 3) -> None:
        if min_epochs < 1 or reduction_factor < 2:
            raise ValueError(f"pareto-asha: min_epochs >= 1 and reduction_factor >= 2, got {min_epochs}, {reduction_factor}")
        self.min_epochs = min_epochs
        self.reduction_factor = reduction_factor
        self.rungs = ReferenceRungs()

    def report(self, trial_id: int, epoch: int, value: Sequence[float]) -> bool:
        rung = self.rungs.start(trial_id, epoch)
        value = tuple(value)
        while epoch >= self.min_epochs * self.reduction_factor ** rung:
            if is_nan(value[0]):
                return True
            value = (value[0], *(math.inf if math.isnan(v) else v for v in value[1:]))
            competing = self.rungs.competing(rung, trial_id, value)
            fronts = reference_front_index(competing)
            quota = max(1, math.ceil(len(competing) / self.reduction_factor)) if len(competing) >= self.reduction_factor else 1
            ordered = sorted(fronts)
            if fronts[-1] > ordered[quota - 1]:  # the trial is the last value of ``competing``
                return True
            rung += 1
            self.rungs.next_rung[trial_id] = rung
        return False
