"""The median rule (Golovin et al. 2017, Google Vizier; Optuna's ``MedianPruner``)."""

from __future__ import annotations

from hpo.stoppers.base import Stopper, is_nan
from hpo.stoppers.ordered_values import OrderedValues


class MedianStopper(Stopper):
    """From ``min_epochs`` on, a trial stops when its value is worse than the median of the other
    trials' values at the same epoch, once at least ``min_trials`` other trials reported there.

    ``at_epoch`` holds every trial's value per epoch (NaN included, a repeated report replacing the
    earlier one); ``ordered`` the same values less the NaNs, sorted, so that the median of the
    others costs O(log n) instead of a sort of the epoch's values."""

    name = "median"

    def __init__(self, min_epochs: int = 1, min_trials: int = 3) -> None:
        if min_epochs < 1 or min_trials < 1:
            raise ValueError(f"median: min_epochs >= 1 and min_trials >= 1, got {min_epochs}, {min_trials}")
        self.min_epochs = min_epochs
        self.min_trials = min_trials
        self.at_epoch: dict[int, dict[int, float]] = {}  # epoch -> {trial: value}
        self.ordered: dict[int, OrderedValues] = {}  # epoch -> its values but NaN, sorted

    def first_judged_epoch(self, max_epochs: int) -> int:
        return min(self.min_epochs, max_epochs)

    def report(self, trial_id: int, epoch: int, value: float) -> bool:
        here = self.at_epoch.setdefault(epoch, {})
        others = self.ordered.setdefault(epoch, OrderedValues())
        previous = here.pop(trial_id, None)
        if previous is not None and not is_nan(previous):
            others.remove(previous)
        judged = not is_nan(value) and epoch >= self.min_epochs and len(others) >= self.min_trials
        stop = is_nan(value) or (judged and value > median(others))
        here[trial_id] = value
        if not is_nan(value):
            others.add(value)
        return stop


def median(values: OrderedValues) -> float:
    """``statistics.median`` of ``values`` (not empty), computed as it computes it."""
    n = len(values)
    if n % 2 == 1:
        return values[n // 2]
    return (values[n // 2 - 1] + values[n // 2]) / 2
