"""Successive halving for several objectives: a trial goes on when few enough trials dominate it."""

from __future__ import annotations

import itertools
import math
from typing import Sequence

from hpo.stoppers.base import Rungs, Stopper, is_nan


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """``a`` is no worse than ``b`` in every objective and better in one (all minimised)."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def front_index(values: list[Sequence[float]]) -> list[int]:
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


class ParetoAshaStopper(Stopper):
    """ASHA's rungs (``min_epochs * reduction_factor ** k`` epochs) for a vector of objectives: in a
    campaign, the campaign objective and the time the trial has trained (accuracy against cost).
    At a rung the recorded vectors are sorted into Pareto fronts; a trial goes on when its front is
    among the first fronts that together hold ``ceil(n / reduction_factor)`` of the ``n`` trials
    there (while ``n < reduction_factor``: only on the Pareto front). A trial dominated by most of
    its rung (worse and slower) stops; one that trades one objective for another is kept."""

    name = "pareto-asha"
    EXAMPLE_OPTIONS = {"min_epochs": 1, "reduction_factor": 3}
    objectives = 2

    def __init__(self, min_epochs: int = 1, reduction_factor: int = 3) -> None:
        if min_epochs < 1 or reduction_factor < 2:
            raise ValueError(f"pareto-asha: min_epochs >= 1 and reduction_factor >= 2, got {min_epochs}, {reduction_factor}")
        self.min_epochs = min_epochs
        self.reduction_factor = reduction_factor
        self.rungs = Rungs()

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
            competing = self.rungs.competing(rung, trial_id, value)
            fronts = front_index(competing)
            quota = max(1, math.ceil(len(competing) / self.reduction_factor)) if len(competing) >= self.reduction_factor else 1
            ordered = sorted(fronts)
            if fronts[-1] > ordered[quota - 1]:  # the trial is the last value of ``competing``
                return True
            rung += 1
            self.rungs.next_rung[trial_id] = rung
        return False
