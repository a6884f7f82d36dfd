"""The trial attempts the campaign loop keeps track of: waiting for slots, running, sent ahead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hydragnn_ensemble.result import EpochReport
from scheduler.sizing import SizedTrial


class Candidate(Protocol):
    """A suggestion of the optimizer (:class:`hpo.optimizers.base.Suggestion` in a campaign)."""

    params: dict[str, Any]
    suggestion_id: int


class CandidateSource(Protocol):
    """Where new candidates come from (:class:`hpo.pool.CandidatePool` in a campaign)."""

    def take(self, n: int) -> list[Candidate]:
        """Up to ``n`` candidates, oldest first (fewer when the source has no more now)."""


@dataclass
class TrialSpec:
    """A trial attempt waiting for slots, sent ahead or running."""

    trial_id: int
    params: dict[str, Any]
    attempt: int = 0
    size: int = 1
    suggestion_id: int | None = None  # None: suggested in an earlier run -> tell_past when it ends
    retries_used: int = 0
    oom_retried: bool = False
    sized: SizedTrial | None = None  # the sizer's answer (size, prediction, wider sizes); None: ask it

    def next_attempt(self, size: int) -> "TrialSpec":
        """The retry of this attempt on ``size`` slots (same id, parameters and retry counts)."""
        return TrialSpec(self.trial_id, self.params, self.attempt + 1, size, self.suggestion_id,
                         self.retries_used, self.oom_retried)


@dataclass
class RunningTrial:
    """A trial attempt holding slots since ``start_time``."""

    spec: TrialSpec
    slots: tuple[int, ...]
    start_time: float
    stopping: str | None = None  # why the stopper asked it to stop (it ends after its epoch)
    best_report: EpochReport | None = None  # its epoch report with the lowest campaign objective
    best_value: float | None = None  # that objective

    def predicted_end(self) -> float:
        """When the sizer expects it to end (its start when it was never sized)."""
        return self.start_time + (self.spec.sized.seconds_at(len(self.slots)) if self.spec.sized else 0.0)


@dataclass
class QueuedTrial:
    """A single-slot trial sent ahead to ``slot``, to start when the trial it follows exits."""

    spec: TrialSpec
    slot: int
    after: tuple[int, int]  # the trial attempt it follows
    taking_back: bool = False  # asked back, answer not in yet
