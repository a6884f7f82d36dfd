"""The campaign's state, folded from its journal events one at a time (one handler per event).

:meth:`CampaignState.apply` takes one event; :meth:`CampaignState.replay` folds a whole journal (the
garbage collector paused: 100,000 events in about a second). The runtime keeps a live state and
applies each event as it is written, so ``results.csv`` and the reports never replay the journal.

What the fold guarantees: finished trials exactly once (an event written twice is counted once),
trials that were running when the campaign stopped (to be re-run as their next attempt), decided
retries, the next trial id, counts and the best objective. An attempt left running when a later
``campaign_started`` (a restart) or a later attempt of the same trial comes becomes ``interrupted``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hpo._events import EVENT_FIELDS, JournalEventError
from hpo.journal import collector_paused
from hpo.objective import objective_value
from hydragnn_ensemble.result import STATUSES

__all__ = ["FINAL_STATUSES", "JOURNAL_STATES", "AttemptRecord", "CampaignState", "TrialRecord"]

FINAL_STATUSES = STATUSES  # how an attempt ended (hydragnn_ensemble.result.TrialStatus)
#: What the journal also says of a trial: started and not ended (``running``), cut short by a
#: restart (``interrupted``), failed with a re-run decided (``retrying``), never started (``suggested``).
JOURNAL_STATES: tuple[str, ...] = ("running", "interrupted", "retrying", "suggested")


@dataclass(slots=True)
class AttemptRecord:
    """One run of a trial on some slots.

    ``status`` is a final status (``completed``, ``diverged``, ``timeout``, ``failed``),
    ``running`` (started, no end event yet) or ``interrupted`` (started, and the campaign was
    restarted or the trial re-run before it ended)."""

    attempt: int
    start: float | None = None
    end: float | None = None
    slots: list[int] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    size: int = 0
    status: str = "running"
    reason: str | None = None
    log_tail: str | None = None
    result: dict | None = None
    predicted_slot_s: float | None = None  # the cost model's prediction at placement (None: not journaled)
    retry_size: int | None = None  # a failed attempt the runtime decided to re-run, on this many slots
    curve: list[tuple[int, float | None]] = field(default_factory=list)  # (epoch, objective) reported
    stop_requested: str | None = None  # the campaign asked it to stop (early discarding), and why
    stop_obeyed: bool | None = None  # it ended by itself after the request (False: terminated)

    @property
    def ended(self) -> bool:
        return self.status in FINAL_STATUSES


@dataclass(slots=True)
class TrialRecord:
    """Everything the journal says about one trial id."""

    trial_id: int
    params: dict[str, Any] = field(default_factory=dict)
    suggested_time: float | None = None
    attempts: dict[int, AttemptRecord] = field(default_factory=dict)
    objective: float | None = None

    @property
    def last_attempt(self) -> AttemptRecord | None:
        return self.attempts[max(self.attempts)] if self.attempts else None

    @property
    def status(self) -> str:
        """The final status, ``running``, ``interrupted``, ``retrying`` (the last attempt failed and
        the runtime decided to re-run it) or ``suggested`` (never started)."""
        last = self.last_attempt
        if last is None:
            return "suggested"
        return "retrying" if last.retry_size is not None else last.status

    @property
    def finished(self) -> bool:
        last = self.last_attempt
        return last is not None and last.ended and last.retry_size is None

    @property
    def result(self) -> dict | None:
        last = self.last_attempt
        return None if last is None else last.result

    @property
    def next_attempt(self) -> int:
        """Attempt number for a re-run."""
        return max(self.attempts) + 1 if self.attempts else 0


@dataclass
class CampaignState:
    """The state of a campaign folded from its journal (see the module docstring)."""

    trials: dict[int, TrialRecord] = field(default_factory=dict)
    campaign: dict[str, Any] | None = None
    objective_key: str = "objective"
    start_time: float | None = None
    last_time: float | None = None
    segments: list[list[float]] = field(default_factory=list)  # [start, end, slots] of each run
    finished_reason: str | None = None
    num_events: int = 0
    num_duplicates: int = 0
    #: every epoch report, ``(trial_id, epoch, objective)`` in journal order: what a stopper replays
    progress: list[tuple[int, int, float | None]] = field(default_factory=list)
    _seen_ends: set[tuple[int, int]] = field(default_factory=set, repr=False)

    # -- folding ----------------------------------------------------------------------------------
    @classmethod
    def replay(cls, events: Iterable[Mapping[str, Any]]) -> "CampaignState":
        """Fold ``events`` in order, with the garbage collector paused."""
        state = cls()
        with collector_paused():
            for event in events:
                state.apply(event)
        return state

    def apply(self, event: Mapping[str, Any]) -> None:
        """Fold one event into the state."""
        name = event.get("event")
        handler = _HANDLERS.get(name)  # type: ignore[arg-type]
        if handler is None:
            raise JournalEventError(
                f"journal event #{self.num_events + 1}: unknown event {name!r}; known: {sorted(EVENT_FIELDS)}")
        t = event.get("time")
        if t is not None:
            if self.start_time is None:
                self.start_time = t
            self.last_time = t
            if self.segments and name != "campaign_started":
                self.segments[-1][1] = t  # a run lasts until its last event before a restart
        self.num_events += 1
        handler(self, event, t)

    def _trial(self, event: Mapping[str, Any]) -> TrialRecord:
        trial_id = event["trial_id"]
        record = self.trials.get(trial_id)
        if record is None:
            record = self.trials[trial_id] = TrialRecord(trial_id)
        return record

    def _on_suggested(self, event: Mapping[str, Any], t: float | None) -> None:
        if event["trial_id"] in self.trials and self.trials[event["trial_id"]].params:
            self.num_duplicates += 1
            return
        record = self._trial(event)
        record.params = event["params"]
        record.suggested_time = t

    def _on_started(self, event: Mapping[str, Any], t: float | None) -> None:
        record = self._trial(event)
        attempt = event["attempt"]
        if attempt in record.attempts:
            self.num_duplicates += 1
            return
        for earlier in record.attempts.values():
            if earlier.status == "running":  # re-run without an end event: cut short
                earlier.status = "interrupted"
                earlier.end = t
        slots = event.get("slots") or []
        record.objective = None  # the last attempt has not ended
        record.attempts[attempt] = AttemptRecord(
            attempt, start=t, slots=slots, hosts=event.get("hosts") or [],
            size=event.get("size") or len(slots), predicted_slot_s=event.get("predicted_slot_s"))

    def _on_progress(self, event: Mapping[str, Any], t: float | None) -> None:
        record = self._trial(event)
        attempt = record.attempts.get(event["attempt"])
        if attempt is None:
            raise JournalEventError(f"journal event #{self.num_events}: progress of trial {event['trial_id']} "
                                    f"attempt {event['attempt']}, which never started")
        value = event["objective"]
        epoch = int(event["epoch"])
        attempt.curve.append((epoch, None if value is None else float(value)))
        self.progress.append((event["trial_id"], epoch, None if value is None else float(value)))

    def _on_stop_requested(self, event: Mapping[str, Any], t: float | None) -> None:
        attempt = self._trial(event).attempts.get(event["attempt"])
        if attempt is not None:
            attempt.stop_requested = event["reason"]

    def _on_ended(self, event: Mapping[str, Any], t: float | None) -> None:
        key = (event["trial_id"], event["attempt"])
        if key in self._seen_ends:
            self.num_duplicates += 1
            return
        self._seen_ends.add(key)
        record = self._trial(event)
        attempt = record.attempts.get(event["attempt"])
        if attempt is None:  # end without a start (start event lost): keep the result
            attempt = record.attempts[event["attempt"]] = AttemptRecord(event["attempt"])
        result = event.get("result")
        attempt.end = t
        if event.get("started_at") is not None:  # when its processes ran (agents' clocks)
            attempt.start = event["started_at"]
        if event.get("ended_at") is not None:
            attempt.end = event["ended_at"]
        attempt.result = result
        if event.get("stop") is not None:
            attempt.stop_obeyed = event["stop"] == "obeyed"
        if event["event"] == "trial_failed":
            attempt.status = "failed"
            attempt.reason = event.get("reason")
            attempt.log_tail = event.get("log_tail")
            if event.get("will_retry"):  # journals before retry_size: the same size
                attempt.retry_size = event.get("retry_size") or attempt.size or 1
        else:
            attempt.status = (result or {}).get("status", "completed")
            attempt.reason = (result or {}).get("failure_reason")
        if attempt.status not in FINAL_STATUSES:
            raise JournalEventError(
                f"journal event #{self.num_events}: trial {event['trial_id']} has unknown status {attempt.status!r}")
        if attempt.attempt == max(record.attempts):  # the objective is the last attempt's
            record.objective = objective_value(result, self.objective_key)

    def _on_campaign_started(self, event: Mapping[str, Any], t: float | None) -> None:
        previous_end = self.segments[-1][1] if self.segments else None
        for record in self.trials.values():
            for attempt in record.attempts.values():
                if attempt.status == "running":
                    attempt.status = "interrupted"
                    attempt.end = previous_end if previous_end is not None else attempt.start
        self.campaign = event.get("campaign")
        self.objective_key = (self.campaign or {}).get("objective", "objective")
        self.finished_reason = None
        self.segments.append([t, t, _num_slots(event.get("slots"))])

    def _on_campaign_finished(self, event: Mapping[str, Any], t: float | None) -> None:
        self.finished_reason = event.get("reason")

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
        return [
            r for _, r in sorted(self.trials.items())
            if r.status in ("running", "interrupted", "retrying")
        ]

    @property
    def suggested_only(self) -> list[TrialRecord]:
        """Trials suggested (in the candidate pool) but never started."""
        return [r for _, r in sorted(self.trials.items()) if r.status == "suggested"]

    @property
    def next_trial_id(self) -> int:
        return max(self.trials) + 1 if self.trials else 0

    @property
    def counts(self) -> dict[str, int]:
        """Number of trials per status (final statuses, ``running``, ``interrupted``, ``retrying``,
        ``suggested``)."""
        out = {s: 0 for s in (*FINAL_STATUSES, *JOURNAL_STATES)}
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
    def param_keys(self) -> list[str]:
        """Search-space keys (from the campaign, else from the trials, in first-seen order)."""
        space = (self.campaign or {}).get("search_space")
        if space:
            return list(space)
        keys: dict[str, None] = {}
        for _, record in sorted(self.trials.items()):
            keys.update(dict.fromkeys(record.params))
        return list(keys)

    def history(self) -> list[tuple[dict[str, Any], float | None]]:
        """``(params, objective or None)`` of every finished trial: what ``tell_past`` replays."""
        return [(r.params, r.objective) for r in self.finished]


def _num_slots(slots: Any) -> int:
    if isinstance(slots, int):
        return slots
    if isinstance(slots, (list, tuple)):
        return len(slots)
    return 0


_HANDLERS: dict[str, Callable[[CampaignState, Mapping[str, Any], float | None], None]] = {
    "trial_suggested": CampaignState._on_suggested,
    "trial_started": CampaignState._on_started,
    "trial_progress": CampaignState._on_progress,
    "trial_stop_requested": CampaignState._on_stop_requested,
    "trial_finished": CampaignState._on_ended,
    "trial_failed": CampaignState._on_ended,
    "campaign_started": CampaignState._on_campaign_started,
    "campaign_finished": CampaignState._on_campaign_finished,
}
