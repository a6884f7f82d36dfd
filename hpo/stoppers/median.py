"""The median rule (Golovin et al. 2017, Google Vizier; Optuna's ``MedianPruner``)."""

from __future__ import annotations

import statistics

from hpo.stoppers.base import Stopper, is_nan


class MedianStopper(Stopper):
    """From ``min_epochs`` on, a trial stops when its value is worse than the median of the other
    trials' values at the same epoch, once at least ``min_trials`` other trials reported there."""

    name = "median"

    def __init__(self, min_epochs: int = 1, min_trials: int = 3) -> None:
        if min_epochs < 1 or min_trials < 1:
            raise ValueError(f"median: min_epochs >= 1 and min_trials >= 1, got {min_epochs}, {min_trials}")
        self.min_epochs = min_epochs
        self.min_trials = min_trials
        self.at_epoch: dict[int, dict[int, float]] = {}  # epoch -> {trial: value}

    def first_judged_epoch(self, max_epochs: int) -> int:
        return min(self.min_epochs, max_epochs)

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
