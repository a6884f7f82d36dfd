"""The i-epoch baseline (Egele et al., "Is one epoch all you need for multi-fidelity HPO?")."""

from __future__ import annotations

import math

from hpo.stoppers.base import RankedRungs, Stopper, is_nan


class IEpochStopper(Stopper):
    """Every trial trains ``epochs`` epochs; it goes on to its full budget only when its value then
    is among the best ``keep`` fraction of the values recorded at that epoch so far (itself
    included; the first trial always goes on). One decision per trial, O(log n) in the values at
    that epoch (:class:`RankedRungs`)."""

    name = "i-epoch"

    def __init__(self, epochs: int = 1, keep: float = 1 / 3) -> None:
        if epochs < 1 or not 0 < keep <= 1:
            raise ValueError(f"i-epoch: epochs >= 1 and 0 < keep <= 1, got {epochs}, {keep}")
        self.epochs = epochs
        self.keep = keep
        self.rungs = RankedRungs()

    def decision_epochs(self, max_epochs: int) -> tuple[int, ...]:
        return (self.epochs,) if self.epochs < max_epochs else ()

    def report(self, trial_id: int, epoch: int, value: float) -> bool:
        rung = self.rungs.start(trial_id, epoch)
        if rung > 0 or epoch < self.epochs:
            return False
        if is_nan(value):
            return True
        below, count = self.rungs.place(0, trial_id, value)
        self.rungs.next_rung[trial_id] = 1
        return below > max(math.ceil(self.keep * count) - 1, 0)  # value > sorted(values)[that place]

    def expected_fraction(self, max_epochs: int) -> float:
        if self.epochs >= max_epochs:
            return 1.0
        return (self.epochs + self.keep * (max_epochs - self.epochs)) / max_epochs
