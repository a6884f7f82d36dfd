"""The campaign's state, folded from its journal events one at a time (one handler per event type).

:meth:`CampaignState.apply` takes one typed event (:mod:`hpo.events`); :meth:`CampaignState.replay`
folds a whole journal (its records, read with :func:`hpo.journal.read_events`, or typed events; the
garbage collector paused: 100,000 events in about a second). The runtime keeps a live state and
applies each event as it is written, so ``results.csv`` and the reports never replay the journal.

What the fold guarantees: finished trials exactly once (an event written twice is counted once),
trials that were running when the campaign stopped (to be re-run as their next attempt), decided
retries, the next trial id, counts and the best objective. An attempt left running when a later
``campaign_started`` (a restart) or a later attempt of the same trial comes becomes ``interrupted``.
Statuses are :class:`hpo.status.TrialStatus` (final) and :class:`hpo.status.PendingStatus`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from hpo.campaign import FrozenCampaign
from hpo.events import (
    EVENT_TYPES,
    JOURNAL_FORMAT,
    CampaignFinished,
    CampaignStarted,
    JournalEvent,
    JournalEventError,
    NodeDrained,
    TrialEnded,
    TrialExploited,
    TrialFailed,
    TrialFinished,
    TrialMoved,
    TrialProgress,
    TrialStarted,
    TrialStopRequested,
    TrialSuggested,
    event_from_json,
)
from hpo.journal import collector_paused
from hpo.objective import ObjectiveKey, Objectives
from hpo.status import ALL_STATUSES, PendingStatus, Status, TrialStatus
from hydragnn_ensemble.result import EpochReport, TrialResult

__all__ = ["AttemptRecord", "CampaignState", "Lineage", "TrialRecord"]


@dataclass(frozen=True, slots=True)
class Lineage:
    """One PBT exploit of a trial: after ``epoch`` it took over trial ``donor_id``'s state (after
    the donor's epoch ``donor_epoch``), its parameters ``params_before`` replaced by ``params``."""

    epoch: int
    donor_id: int
    donor_epoch: int
    params_before: dict[str, Any]
    params: dict[str, Any]

    def text(self) -> str:
        """``<epoch>:<donor>@<donor epoch>``, as results.csv and the reports show it."""
        return f"{self.epoch}:{self.donor_id}@{self.donor_epoch}"


@dataclass(slots=True)
class AttemptRecord:
    """One run of a trial on some slots.

    ``status`` is a :class:`TrialStatus` once the attempt ended, else ``PendingStatus.RUNNING``
    (started, no end event yet) or ``PendingStatus.INTERRUPTED`` (the campaign was restarted or the
    trial re-run before it ended)."""

    attempt: int
    start: float | None = None
    end: float | None = None
    slots: list[int] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    size: int = 0
    status: Status = PendingStatus.RUNNING
    reason: str | None = None
    log_tail: str | None = None
    result: TrialResult | None = None
    predicted_slot_s: float | None = None  # the cost model's prediction at placement (None: not journaled)
    predicted_startup_s: float | None = None  # ... of its start-up and of each epoch's seconds there
    predicted_epoch_s: float | None = None
    retry_size: int | None = None  # a failed attempt the runtime decided to re-run, on this many slots
    reports: list[EpochReport] = field(default_factory=list)  # the epochs it reported, in order
    curve: list[tuple[int, float | None]] = field(default_factory=list)  # (epoch, campaign objective)
    stop_requested: str | None = None  # the campaign asked it to stop (early discarding), and why
    stop_obeyed: bool | None = None  # it ended by itself after the request (False: terminated)
    stop_epoch: int | None = None  # the last epoch it had reported when the stop was requested
    moved_after: int | None = None  # it checkpointed after this many epochs and continues as the next attempt
    gathered_at: float | None = None  # when rank 0 journaled its end (``end``: when its processes ended)

    @property
    def ended(self) -> bool:
        return isinstance(self.status, TrialStatus)

    @property
    def epochs_past_stop(self) -> float | None:
        """Epochs a stopped attempt trained after the epoch the stop was decided on (its completed
        epochs and the share of an interrupted one, less that epoch); None unless it ended stopped."""
        if self.stop_epoch is None or self.result is None or self.status != TrialStatus.STOPPED:
            return None
        return max(0.0, self.result.epochs + self.result.partial_epoch - self.stop_epoch)


@dataclass(slots=True)
class TrialRecord:
    """Everything the journal says about one trial id."""

    trial_id: int
    params: dict[str, Any] = field(default_factory=dict)
    suggested_time: float | None = None
    attempts: dict[int, AttemptRecord] = field(default_factory=dict)
    objective: float | None = None  # the (primary) objective of its last attempt
    objective_values: tuple[float, ...] | None = None  # a multi-objective campaign's every objective
    lineage: list[Lineage] = field(default_factory=list)  # PBT: its exploits in order (params: the last one's)

    @property
    def last_attempt(self) -> AttemptRecord | None:
        return self.attempts[max(self.attempts)] if self.attempts else None

    @property
    def status(self) -> Status:
        """The final status, or the pending one: running, interrupted, retrying (the last attempt
        failed and the runtime decided to re-run it) or suggested (never started)."""
        last = self.last_attempt
        if last is None:
            return PendingStatus.SUGGESTED
        return PendingStatus.RETRYING if last.retry_size is not None else last.status

    @property
    def finished(self) -> bool:
        last = self.last_attempt
        return last is not None and last.ended and last.retry_size is None

    @property
    def result(self) -> TrialResult | None:
        last = self.last_attempt
        return None if last is None else last.result

    @property
    def curve(self) -> list[tuple[int, float | None]]:
        """The trial's learning curve over its attempts, ``(epoch, campaign objective)``: an
        attempt's points replace the earlier attempts' from its first epoch on, so a re-run that
        resumed from the trial's training state continues the curve and a re-run from scratch
        starts it again (each attempt's own points stay in :attr:`AttemptRecord.curve`)."""
        points: list[tuple[int, float | None]] = []
        for number in sorted(self.attempts):
            own = self.attempts[number].curve
            if own:
                points = [p for p in points if p[0] < own[0][0]] + own
        return points

    @property
    def next_attempt(self) -> int:
        """Attempt number for a re-run."""
        return max(self.attempts) + 1 if self.attempts else 0


@dataclass
class CampaignState:
    """The state of a campaign folded from its journal (see the module docstring)."""

    trials: dict[int, TrialRecord] = field(default_factory=dict)
    campaign: FrozenCampaign | None = None  # the last run's frozen campaign
    objectives: Objectives = field(default_factory=lambda: Objectives.parse(["objective"]))
    start_time: float | None = None
    last_time: float | None = None
    segments: list[list[float]] = field(default_factory=list)  # [start, end, slots] of each run
    finished_reason: str | None = None
    drained: list[NodeDrained] = field(default_factory=list)  # nodes taken out of service, in order
    journal_format: int = JOURNAL_FORMAT  # of the last run (hpo.events.JOURNAL_FORMAT)
    num_events: int = 0
    num_duplicates: int = 0
    #: every epoch report, ``(trial_id, epoch, objective, seconds trained)`` in journal order: what a
    #: stopper replays
    progress: list[tuple[int, int, float | None, float | None]] = field(default_factory=list)
    #: trial ids in the order their final end was journaled (rank 0 gathered them): results.csv's rows
    gathered: list[int] = field(default_factory=list)
    _seen_ends: set[tuple[int, int]] = field(default_factory=set, repr=False)
    _gathered_ids: set[int] = field(default_factory=set, repr=False)

    # -- folding ----------------------------------------------------------------------------------
    @classmethod
    def replay(cls, events: Iterable[JournalEvent | Mapping[str, Any]],
               where: Callable[[int], str] | None = None) -> "CampaignState":
        """Fold ``events`` (typed, or a journal's records) in order, with the garbage collector paused.
        A bad event raises :class:`JournalEventError` placed by ``where(index)`` (e.g. the journal's
        file and line; default "journal event #n")."""
        state = cls()
        with collector_paused():
            for index, event in enumerate(events):
                try:
                    state.apply(event if isinstance(event, JournalEvent) else event_from_json(event))
                except (JournalEventError, KeyError, TypeError, ValueError) as exc:
                    place = where(index) if where is not None else f"journal event #{index + 1}"
                    raise JournalEventError(f"{place}: {exc}") from None
        return state

    def apply(self, event: JournalEvent) -> None:
        """Fold one event into the state."""
        handler = _HANDLERS.get(type(event))
        if handler is None:
            raise JournalEventError(f"unknown event {event!r}; known: {sorted(EVENT_TYPES)}")
        t = event.time
        if t is not None:
            if self.start_time is None:
                self.start_time = t
            self.last_time = t
            if self.segments and not isinstance(event, CampaignStarted):
                self.segments[-1][1] = t  # a run lasts until its last event before a restart
        self.num_events += 1
        handler(self, event)

    @property
    def objective_key(self) -> ObjectiveKey:
        """The campaign's (first) objective: it orders the trials."""
        return self.objectives.primary

    @property
    def objective_name(self) -> str:
        """The campaign's objective key as written (``objective``, ``heads.<h>.val_mae`` ...)."""
        return self.objective_key.text

    def _trial(self, trial_id: int) -> TrialRecord:
        record = self.trials.get(trial_id)
        if record is None:
            record = self.trials[trial_id] = TrialRecord(trial_id)
        return record

    def _on_suggested(self, event: TrialSuggested) -> None:
        if event.trial_id in self.trials and self.trials[event.trial_id].params:
            self.num_duplicates += 1
            return
        record = self._trial(event.trial_id)
        record.params = event.params
        record.suggested_time = event.time

    def _on_started(self, event: TrialStarted) -> None:
        record = self._trial(event.trial_id)
        if event.attempt in record.attempts:
            self.num_duplicates += 1
            return
        for earlier in record.attempts.values():
            if earlier.status == PendingStatus.RUNNING:  # re-run without an end event: cut short
                earlier.status = PendingStatus.INTERRUPTED
                earlier.end = event.time
        record.objective = None  # the last attempt has not ended
        record.attempts[event.attempt] = AttemptRecord(
            event.attempt, start=event.time, slots=list(event.slots), hosts=list(event.hosts),
            size=event.size, predicted_slot_s=event.predicted_slot_s,
            predicted_startup_s=event.predicted_startup_s, predicted_epoch_s=event.predicted_epoch_s)

    def _on_progress(self, event: TrialProgress) -> None:
        attempt = self._trial(event.trial_id).attempts.get(event.attempt)
        if attempt is None:
            raise JournalEventError(f"progress of trial {event.trial_id} attempt {event.attempt}, which never "
                                    "started")
        if self.journal_format < 2:  # format 1 journaled the campaign's objective value as ``objective``
            value = ObjectiveKey.parse("objective").of_report(event.report)
        else:
            value = self.objective_key.of_report(event.report)
        attempt.reports.append(event.report)
        attempt.curve.append((event.report.epoch, value))
        self.progress.append((event.trial_id, event.report.epoch, value, event.report.elapsed_s))

    def _on_stop_requested(self, event: TrialStopRequested) -> None:
        attempt = self._trial(event.trial_id).attempts.get(event.attempt)
        if attempt is not None:
            attempt.stop_requested = event.reason
            attempt.stop_epoch = attempt.reports[-1].epoch if attempt.reports else 0

    def _on_ended(self, event: TrialEnded) -> None:
        key = (event.trial_id, event.attempt)
        if key in self._seen_ends:
            self.num_duplicates += 1
            return
        self._seen_ends.add(key)
        record = self._trial(event.trial_id)
        attempt = record.attempts.get(event.attempt)
        if attempt is None:  # end without a start (start event lost): keep the result
            attempt = record.attempts[event.attempt] = AttemptRecord(event.attempt)
        attempt.end = attempt.gathered_at = event.time
        if event.started_at is not None:  # when its processes ran (agents' clocks)
            attempt.start = event.started_at
        if event.ended_at is not None:
            attempt.end = event.ended_at
        attempt.result = event.result
        if event.stop is not None:
            attempt.stop_obeyed = event.stop == "obeyed"
        if isinstance(event, TrialFailed):
            attempt.status = TrialStatus.FAILED
            attempt.reason = event.reason
            attempt.log_tail = event.log_tail
            if event.will_retry:  # journals before retry_size: the same size
                attempt.retry_size = event.retry_size or attempt.size or 1
        else:
            attempt.status = event.result.status if event.result is not None else TrialStatus.COMPLETED
            attempt.reason = event.result.failure_reason if event.result is not None else None
        if attempt.attempt == max(record.attempts):  # the objective is the last attempt's
            record.objective = self.objective_key.of_result(event.result)
            record.objective_values = self.objectives.of_result(event.result) if self.objectives.multi else None
            if record.finished and record.trial_id not in self._gathered_ids:
                self.gathered.append(record.trial_id)
                self._gathered_ids.add(record.trial_id)

    def _on_moved(self, event: TrialMoved) -> None:
        attempt = self._trial(event.trial_id).attempts.get(event.attempt)
        if attempt is None:
            raise JournalEventError(f"trial {event.trial_id} attempt {event.attempt} moved, but it never started")
        attempt.status = PendingStatus.MOVED
        attempt.end = event.time
        attempt.moved_after = event.epochs_done

    def _on_exploited(self, event: TrialExploited) -> None:
        record = self._trial(event.trial_id)
        attempt = record.attempts.get(event.attempt)
        if attempt is None:
            raise JournalEventError(f"trial {event.trial_id} attempt {event.attempt} was exploited, but it never "
                                    "started")
        if attempt.status == PendingStatus.MOVED:  # the same event written twice: counted once
            self.num_duplicates += 1
            return
        attempt.status = PendingStatus.MOVED
        attempt.end = event.time
        attempt.moved_after = event.donor_epoch
        record.lineage.append(Lineage(event.epoch, event.donor_id, event.donor_epoch, dict(record.params),
                                      dict(event.params)))
        record.params = dict(event.params)

    def _on_campaign_started(self, event: CampaignStarted) -> None:
        previous_end = self.segments[-1][1] if self.segments else None
        for record in self.trials.values():
            for attempt in record.attempts.values():
                if attempt.status == PendingStatus.RUNNING:
                    attempt.status = PendingStatus.INTERRUPTED
                    attempt.end = previous_end if previous_end is not None else attempt.start
        self.campaign = event.campaign
        self.objectives = event.campaign.objectives
        self.journal_format = event.format
        self.finished_reason = None
        self.segments.append([event.time, event.time, event.slots])

    def _on_campaign_finished(self, event: CampaignFinished) -> None:
        self.finished_reason = event.reason

    def _on_node_drained(self, event: NodeDrained) -> None:
        self.drained.append(event)

    # -- views ------------------------------------------------------------------------------------
    @property
    def finished(self) -> list[TrialRecord]:
        """Trials with a final status, by trial id (each exactly once)."""
        return [r for _, r in sorted(self.trials.items()) if r.finished]

    @property
    def running_at_crash(self) -> list[TrialRecord]:
        """Trials whose last attempt started and never ended (running or interrupted), or failed
        with a re-run decided but not started (retrying): to re-run once each, as attempt
        ``record.next_attempt``."""
        cut_short = (PendingStatus.RUNNING, PendingStatus.INTERRUPTED, PendingStatus.RETRYING, PendingStatus.MOVED)
        return [r for _, r in sorted(self.trials.items()) if r.status in cut_short]

    @property
    def suggested_only(self) -> list[TrialRecord]:
        """Trials suggested (in the candidate pool) but never started."""
        return [r for _, r in sorted(self.trials.items()) if r.status == PendingStatus.SUGGESTED]

    @property
    def next_trial_id(self) -> int:
        return max(self.trials) + 1 if self.trials else 0

    @property
    def counts(self) -> dict[Status, int]:
        """Number of trials per status (every final and pending status, zeros included)."""
        out: dict[Status, int] = {s: 0 for s in ALL_STATUSES}
        for record in self.trials.values():
            out[record.status] += 1
        return out

    @property
    def num_finished(self) -> int:
        return sum(r.finished for r in self.trials.values())

    @property
    def num_completed(self) -> int:
        """Finished trials with an objective (what the optimizer was told as a number)."""
        return sum(r.finished and r.objective is not None for r in self.trials.values())

    @property
    def num_failed(self) -> int:
        """Finished trials without an objective (told to the optimizer as failures)."""
        return self.num_finished - self.num_completed

    @property
    def without_objective(self) -> list[TrialRecord]:
        """Finished trials without an objective (failures, whatever their status: a ``failed`` one, a
        ``timeout`` in epoch 0 ...), by trial id."""
        return [r for r in self.finished if r.objective is None and r.last_attempt is not None]

    @property
    def best_trial(self) -> TrialRecord | None:
        best = None
        for _, record in sorted(self.trials.items()):
            if record.objective is not None and (best is None or record.objective < best.objective):
                best = record
        return best

    @property
    def best_objective(self) -> float | None:
        best = self.best_trial
        return None if best is None else best.objective

    @property
    def is_pbt(self) -> bool:
        """A population-based training campaign (optimizer ``pbt``): its trials have lineages."""
        config = self.campaign.config if self.campaign is not None else None
        return config is not None and config.optimizer.name == "pbt"

    @property
    def param_keys(self) -> list[str]:
        """Search-space keys (from the campaign, else from the trials, in first-seen order)."""
        if self.campaign is not None and self.campaign.search_space is not None:
            return list(self.campaign.search_space.keys)
        keys: dict[str, None] = {}
        for _, record in sorted(self.trials.items()):
            keys.update(dict.fromkeys(record.params))
        return list(keys)

    def history(self) -> list[tuple[dict[str, Any], float | tuple[float, ...] | None]]:
        """``(params, objective or None)`` of every finished trial (a multi-objective campaign's:
        every objective, or None): what ``tell_past`` replays."""
        if self.objectives.multi:
            return [(r.params, r.objective_values) for r in self.finished]
        return [(r.params, r.objective) for r in self.finished]


_HANDLERS: dict[type, Callable[[CampaignState, Any], None]] = {
    TrialSuggested: CampaignState._on_suggested,
    TrialStarted: CampaignState._on_started,
    TrialProgress: CampaignState._on_progress,
    TrialStopRequested: CampaignState._on_stop_requested,
    TrialFinished: CampaignState._on_ended,
    TrialFailed: CampaignState._on_ended,
    TrialMoved: CampaignState._on_moved,
    TrialExploited: CampaignState._on_exploited,
    CampaignStarted: CampaignState._on_campaign_started,
    NodeDrained: CampaignState._on_node_drained,
    CampaignFinished: CampaignState._on_campaign_finished,
}
