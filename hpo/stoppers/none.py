"""The stopper of ``early_stopping: none`` (the default): no trial is stopped early."""

from __future__ import annotations

from hpo.stoppers.base import Stopper, Value


class NoStopper(Stopper):
    """Never stops a trial: every trial trains its whole budget (expected fraction 1.0, no
    decision epochs, so no trial waits for a verdict)."""

    name = "none"
    discards = False

    def report(self, trial_id: int, epoch: int, value: Value) -> bool:
        return False
