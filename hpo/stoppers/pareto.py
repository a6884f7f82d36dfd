"""Successive halving for several objectives: a trial goes on when few enough trials dominate it."""

from __future__ import annotations

import itertools
import math
from typing import Sequence

from hpo.stoppers.base import Rungs, Stopper, is_nan
from hpo.stoppers.pareto_layers import ParetoLayers, front_index_2d


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """``a`` is no worse than ``b`` in every objective and better in one (all minimised)."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def front_index(values: list[Sequence[float]]) -> list[int]:
    """Non-dominated sorting: 0 for the Pareto front, 1 for the front once it is removed, ...
    Two objectives without NaN: in O(n log^2 n) (:func:`front_index_2d`); otherwise by peeling
    off the non-dominated values again and again (O(n^2) per front)."""
    if all(len(v) == 2 and not math.isnan(v[0]) and not math.isnan(v[1]) for v in values):
        return front_index_2d(values)
    index = [-1] * len(values)
    left, front = set(range(len(values))), 0
    while left:
        current = {i for i in left if not any(dominates(values[j], values[i]) for j in left if j != i)}
        for i in current:
            index[i] = front
        left -= current
        front += 1
    return index


class ParetoAshaStopper(Stopper):
    """ASHA's rungs (``min_epochs * reduction_factor ** k`` epochs) for a vector of objectives: in a
    campaign, the campaign objective and the time the trial has trained (accuracy against cost).
    At a rung the recorded vectors are sorted into Pareto fronts; a trial goes on when its front is
    among the first fronts that together hold ``ceil(n / reduction_factor)`` of the ``n`` trials
    there (while ``n < reduction_factor``: only on the Pareto front). A trial dominated by most of
    its rung (worse and slower) stops; one that trades one objective for another is kept.

    The fronts of a rung of two objectives are kept up to date as values arrive
    (:class:`ParetoLayers`, in ``layers``), so a decision does not sort the rung again; a rung
    where a vector of another length was recorded is sorted per decision (:func:`front_index`)."""

    name = "pareto-asha"
    EXAMPLE_OPTIONS = {"min_epochs": 1, "reduction_factor": 3}
    objectives = 2

    def __init__(self, min_epochs: int = 1, reduction_factor: int = 3) -> None:
        if min_epochs < 1 or reduction_factor < 2:
            raise ValueError(f"pareto-asha: min_epochs >= 1 and reduction_factor >= 2, got {min_epochs}, {reduction_factor}")
        self.min_epochs = min_epochs
        self.reduction_factor = reduction_factor
        self.rungs = Rungs()
        self.layers: list[ParetoLayers | None] = []  # rung -> its values' fronts (None: not all pairs)

    def decision_epochs(self, max_epochs: int) -> tuple[int, ...]:
        rungs = (self.min_epochs * self.reduction_factor ** k for k in itertools.count())
        return tuple(itertools.takewhile(lambda e: e < max_epochs, rungs))

    def report(self, trial_id: int, epoch: int, value: Sequence[float]) -> bool:
        """A NaN first objective (the loss) stops the trial; a NaN later one (a cost not reported)
        counts as the worst (infinite)."""
        rung = self.rungs.start(trial_id, epoch)
        value = tuple(value)
        while epoch >= self.min_epochs * self.reduction_factor ** rung:
            if is_nan(value[0]):
                return True
            value = (value[0], *(math.inf if math.isnan(v) else v for v in value[1:]))
            before, count = self._place(rung, trial_id, value)
            quota = max(1, math.ceil(count / self.reduction_factor)) if count >= self.reduction_factor else 1
            if before >= quota:  # the quota-th best front is before the trial's
                return True
            rung += 1
            self.rungs.next_rung[trial_id] = rung
        return False

    def _place(self, rung: int, trial_id: int, value: tuple[float, ...]) -> tuple[int, int]:
        """Record ``value`` at ``rung`` (replacing the trial's earlier value there); returns how
        many of the other values there lie on fronts before its front, and how many there are (it
        included). The others' fronts before its front are the same with it as without it."""
        previous = self.rungs.record(rung, trial_id, value)
        while len(self.layers) <= rung:
            self.layers.append(ParetoLayers())
        layers = self.layers[rung]
        if layers is not None and len(value) != 2:
            layers = self.layers[rung] = None
        if layers is None:
            competing = [v for t, v in self.rungs.values[rung].items() if t != trial_id] + [value]
            fronts = front_index(competing)
            return sum(f < fronts[-1] for f in fronts), len(competing)
        if previous is not None:
            layers.remove(previous)
        return layers.count_before(layers.add(value)), len(layers)
