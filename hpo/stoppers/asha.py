"""Asynchronous successive halving (ASHA, Li et al. 2020), decision for decision as Optuna's
``SuccessiveHalvingPruner``."""

from __future__ import annotations

import itertools

from hpo.stoppers.base import RankedRungs, Stopper, is_nan


class AshaStopper(Stopper):
    """Rung ``k`` is at ``min_epochs * reduction_factor ** (min_early_stopping_rate + k)`` epochs. A
    trial reaching a rung goes on when its value is among the best ``1 / reduction_factor`` of the
    values recorded at that rung so far (itself included); while fewer than ``reduction_factor``
    values are there, only when it is the best of them. Otherwise it stops. NaN stops. Each rung is
    kept sorted (:class:`RankedRungs`): a decision costs O(log n) in the values at its rung."""

    name = "asha"
    EXAMPLE_OPTIONS = {"min_epochs": 1, "reduction_factor": 3}

    def __init__(self, min_epochs: int = 1, reduction_factor: int = 3, min_early_stopping_rate: int = 0) -> None:
        if min_epochs < 1 or reduction_factor < 2 or min_early_stopping_rate < 0:
            raise ValueError("asha: min_epochs >= 1, reduction_factor >= 2 and min_early_stopping_rate >= 0, got "
                             f"{min_epochs}, {reduction_factor}, {min_early_stopping_rate}")
        self.min_epochs = min_epochs
        self.reduction_factor = reduction_factor
        self.rate = min_early_stopping_rate
        self.rungs = RankedRungs()

    def rung_epochs(self, rung: int) -> int:
        return self.min_epochs * self.reduction_factor ** (self.rate + rung)

    def decision_epochs(self, max_epochs: int) -> tuple[int, ...]:
        rungs = itertools.takewhile(lambda e: e < max_epochs, map(self.rung_epochs, itertools.count()))
        return tuple(rungs)

    def report(self, trial_id: int, epoch: int, value: float) -> bool:
        rung = self.rungs.start(trial_id, epoch)
        while epoch >= self.rung_epochs(rung):
            if is_nan(value):
                return True
            below, count = self.rungs.place(rung, trial_id, value)
            if below > max(count // self.reduction_factor - 1, 0):  # value > sorted(rung)[that place]
                return True
            rung += 1
            self.rungs.next_rung[trial_id] = rung
        return False

    def expected_fraction(self, max_epochs: int) -> float:
        """Each rung keeps ``1 / reduction_factor`` of the trials reaching it (a lower bound: the
        first trials at a rung are kept more often)."""
        expected, done, keep, rung = 0.0, 0, 1.0, 0
        while self.rung_epochs(rung) < max_epochs:
            expected += keep * (self.rung_epochs(rung) - done)
            done = self.rung_epochs(rung)
            keep /= self.reduction_factor
            rung += 1
        expected += keep * (max_epochs - done)
        return expected / max_epochs
