"""The trial attempts the campaign loop keeps track of: waiting for slots, running, sent ahead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hpo.pbt import Exploit
from hydragnn_ensemble.result import EpochReport
from scheduler.placement.base import Growth
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
    resume_epoch: int = 0  # > 0: it continues from its checkpoint after this many epochs (a move)
    time_used_s: float = 0.0  # seconds it ran before it moved (its time limit counts over all moves)
    moves: int = 0  # times it moved onto more slots
    extra: bool = False  # started beyond max_trials to fill the campaign's tail (LoopRules.fill_tail)
    avoid_nodes: frozenset[int] = frozenset()  # nodes an attempt of it failed on for a node-level reason
    inherit_from: int | None = None  # PBT: it starts from this trial's training state (hpo.pbt)

    def next_attempt(self, size: int, avoid_nodes: frozenset[int] = frozenset()) -> "TrialSpec":
        """The retry of this attempt on ``size`` slots (same id, parameters and retry counts; a
        retry starts from scratch), placed off ``avoid_nodes`` and the nodes this one avoided where
        it fits elsewhere."""
        return TrialSpec(self.trial_id, self.params, self.attempt + 1, size, self.suggestion_id,
                         self.retries_used, self.oom_retried, avoid_nodes=self.avoid_nodes | avoid_nodes)

    def moved(self, size: int, epochs_done: int, seconds: float, sized: SizedTrial) -> "TrialSpec":
        """The continuation of this attempt on ``size`` slots from its checkpoint after
        ``epochs_done`` epochs, which took ``seconds``."""
        return TrialSpec(self.trial_id, self.params, self.attempt + 1, size, self.suggestion_id,
                         self.retries_used, self.oom_retried, sized, epochs_done, self.time_used_s + seconds,
                         self.moves + 1)

    def exploited(self, exploit: Exploit, seconds: float, sized: SizedTrial) -> "TrialSpec":
        """PBT's continuation of this attempt (which took ``seconds``) on the same slots: from the
        donor's training state after ``exploit.donor_epoch`` epochs, with the exploit's parameters."""
        return TrialSpec(self.trial_id, dict(exploit.params), self.attempt + 1, self.size, self.suggestion_id,
                         self.retries_used, self.oom_retried, sized, exploit.donor_epoch,
                         self.time_used_s + seconds, self.moves, inherit_from=exploit.donor_id)


@dataclass
class RunningTrial:
    """A trial attempt holding slots since ``start_time``."""

    spec: TrialSpec
    slots: tuple[int, ...]
    start_time: float
    stopping: str | None = None  # why the stopper asked it to stop (it ends after its epoch)
    best_report: EpochReport | None = None  # its epoch report with the lowest campaign objective
    best_value: float | None = None  # that objective
    revised_end: float | None = None  # re-estimated from its reported epochs (None: not yet)
    startup_s: float | None = None  # seconds from its start to its first epoch's, less that epoch
    last_epoch_s: float | None = None  # seconds of the last epoch it reported
    paced_epoch_s: float | None = None  # seconds an epoch takes, from its pace before its first epoch
    moving_to: Growth | None = None  # the slots it moves onto (a growth), at its epoch boundary or now
    on_shared_gpu: bool = False  # its slot is a GPU shared with other trials (scheduler.sharing)
    resumed_from: int | None = None  # epochs it continued after, told by its first report (or pace)
    exploit: Exploit | None = None  # PBT: it stops after its epoch and goes on from a donor's state

    @property
    def first_epoch(self) -> int:
        """The epochs done before this attempt: a re-run that resumed from the trial's training
        state reports the epoch after that state's first (its first report tells; before it, the
        move's ``resume_epoch``); its own epochs are the reported epoch less this."""
        return self.resumed_from if self.resumed_from is not None else self.spec.resume_epoch

    def predicted_end(self) -> float:
        """When it is expected to end: re-estimated from its epochs once it reported one, else the
        sizer's prediction (its start when it was never sized)."""
        if self.revised_end is not None:
            return self.revised_end
        return self.start_time + (self.spec.sized.seconds_at(len(self.slots)) if self.spec.sized else 0.0)


@dataclass
class QueuedTrial:
    """A single-slot trial sent ahead to ``slot``, to start when the trial it follows exits."""

    spec: TrialSpec
    slot: int
    after: tuple[int, int]  # the trial attempt it follows
    taking_back: bool = False  # asked back, answer not in yet
