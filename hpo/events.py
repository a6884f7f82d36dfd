"""The journal's events: one frozen dataclass per event, written as one JSON object per line.

Every event has its name (``"event"`` in JSON) and ``time`` (seconds since the epoch, rank 0's
clock). :meth:`JournalEvent.to_json` gives the line's object (optional fields left out when unset);
:func:`event_from_json` reads one back, checking the fields an event must have
(:class:`JournalEventError` names what is missing). Journals written before this module (format 1,
no ``format`` in ``campaign_started``) read the same: every field added since is optional.

=======================  ========================================================================
event                    fields (optional ones in brackets)
=======================  ========================================================================
campaign_started         campaign (the frozen campaign.yaml), resume, ranks, slots, [format]
trial_suggested          trial_id, params, attempt
trial_started            trial_id, attempt, slots, hosts, size, [predicted_slot_s, queued_after,
                         predicted_startup_s, predicted_epoch_s]
trial_progress           trial_id, attempt, epoch, objective, [heads, elapsed_s, epoch_s, train_s]
                         (an EpochReport)
trial_stop_requested     trial_id, attempt, reason
trial_finished           trial_id, attempt, result, [started_at, ended_at, stop]
trial_failed             trial_id, attempt, reason, log_tail, result, [will_retry, retry_size,
                         started_at, ended_at, stop]
trial_moved              trial_id, attempt, epochs_done, size (the attempt checkpointed after
                         epochs_done epochs and exited; attempt + 1 continues it on size slots)
trial_exploited          trial_id, attempt, epoch, donor_id, donor_epoch, params (PBT: the attempt
                         stopped after epoch; attempt + 1 continues from the donor's training state
                         after its epoch donor_epoch with params, the trial's parameters from now on)
node_drained             node, hostname, failures, reason (no more trials go to that node; a
                         resume in the same allocation keeps it out)
campaign_finished        reason
=======================  ========================================================================

``stop`` ("obeyed" or "ignored"): the trial was asked to stop and ended by itself, or was ended by
its agent after the grace period. ``started_at``/``ended_at``: when its processes ran (the agents'
clocks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Union

from hpo.campaign import FrozenCampaign
from hydragnn_ensemble.result import EpochReport, TrialResult

__all__ = ["EVENT_TYPES", "JOURNAL_FORMAT", "CampaignFinished", "CampaignStarted", "JournalEvent",
           "JournalEventError", "NodeDrained", "TrialEnded", "TrialExploited", "TrialFailed", "TrialFinished", "TrialMoved", "TrialProgress",
           "TrialStarted",
           "TrialStopRequested", "TrialSuggested", "event_from_json"]

#: the journal's format: 2 = typed events (``format`` in ``campaign_started``); 1 had no version field
JOURNAL_FORMAT = 2


class JournalEventError(ValueError):
    """An event that does not follow the journal's vocabulary."""


def _trial_key(d: Mapping[str, Any], name: str) -> tuple[int, int]:
    trial_id, attempt = d["trial_id"], d["attempt"]
    if type(trial_id) is not int or type(attempt) is not int or trial_id < 0 or attempt < 0:  # not bool either
        key, value = ("trial_id", trial_id) if type(trial_id) is not int or trial_id < 0 else ("attempt", attempt)
        raise JournalEventError(f"journal event {name!r}: {key} must be an integer >= 0, got {value!r}")
    return trial_id, attempt


def _optional(d: dict[str, Any], **values: Any) -> dict[str, Any]:
    """``d`` with the values that are set (not None)."""
    d.update({k: v for k, v in values.items() if v is not None})
    return d


@dataclass(frozen=True, kw_only=True, slots=True)
class JournalEvent:
    """What every event carries: when rank 0 recorded it."""

    name: ClassVar[str] = ""
    required: ClassVar[tuple[str, ...]] = ()
    time: float | None  # None only in hand-written records without one

    def to_json(self) -> dict[str, Any]:
        """The line's JSON object."""
        raise NotImplementedError

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "JournalEvent":
        """The event of a checked line's object (see :func:`event_from_json`)."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True, slots=True)
class CampaignStarted(JournalEvent):
    """A run of the campaign began (the first run, or a resume)."""

    name: ClassVar[str] = "campaign_started"
    required: ClassVar[tuple[str, ...]] = ("campaign", "resume", "ranks", "slots")
    campaign: FrozenCampaign
    resume: bool
    ranks: int
    slots: int
    format: int = JOURNAL_FORMAT

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "time": self.time, "campaign": self.campaign.to_dict(), "resume": self.resume,
                "ranks": self.ranks, "slots": self.slots, "format": self.format}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CampaignStarted":
        slots = d["slots"]
        return cls(time=d.get("time"), campaign=FrozenCampaign.from_dict(d["campaign"]), resume=bool(d["resume"]),
                   ranks=d["ranks"], slots=len(slots) if isinstance(slots, (list, tuple)) else int(slots or 0),
                   format=int(d.get("format", 1)))


@dataclass(frozen=True, kw_only=True, slots=True)
class TrialSuggested(JournalEvent):
    """The optimizer proposed a new trial."""

    name: ClassVar[str] = "trial_suggested"
    required: ClassVar[tuple[str, ...]] = ("trial_id", "params", "attempt")
    trial_id: int
    params: dict[str, Any]
    attempt: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "time": self.time, "trial_id": self.trial_id, "params": self.params,
                "attempt": self.attempt}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrialSuggested":
        trial_id, attempt = _trial_key(d, cls.name)
        return cls(time=d.get("time"), trial_id=trial_id, params=dict(d["params"]), attempt=attempt)


@dataclass(frozen=True, kw_only=True, slots=True)
class TrialStarted(JournalEvent):
    """An attempt holds its slots (its processes were sent off); the cost model's prediction."""

    name: ClassVar[str] = "trial_started"
    required: ClassVar[tuple[str, ...]] = ("trial_id", "attempt", "slots", "hosts", "size")
    trial_id: int
    attempt: int
    slots: tuple[int, ...]
    hosts: tuple[str, ...]
    size: int
    predicted_slot_s: float | None = None
    queued_after: int | None = None  # sent ahead behind that trial on its slot
    predicted_startup_s: float | None = None  # the cost model's start-up and per-epoch seconds there
    predicted_epoch_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return _optional({"event": self.name, "time": self.time, "trial_id": self.trial_id, "attempt": self.attempt,
                          "slots": list(self.slots), "hosts": list(self.hosts), "size": self.size},
                         predicted_slot_s=self.predicted_slot_s, queued_after=self.queued_after,
                         predicted_startup_s=self.predicted_startup_s, predicted_epoch_s=self.predicted_epoch_s)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrialStarted":
        trial_id, attempt = _trial_key(d, cls.name)
        slots = tuple(d["slots"] or ())
        return cls(time=d.get("time"), trial_id=trial_id, attempt=attempt, slots=slots,
                   hosts=tuple(d["hosts"] or ()), size=d["size"] or len(slots),
                   predicted_slot_s=d.get("predicted_slot_s"), queued_after=d.get("queued_after"),
                   predicted_startup_s=d.get("predicted_startup_s"), predicted_epoch_s=d.get("predicted_epoch_s"))


@dataclass(frozen=True, kw_only=True, slots=True)
class TrialProgress(JournalEvent):
    """A running attempt finished an epoch."""

    name: ClassVar[str] = "trial_progress"
    required: ClassVar[tuple[str, ...]] = ("trial_id", "attempt", "epoch", "objective")
    trial_id: int
    attempt: int
    report: EpochReport

    def to_json(self) -> dict[str, Any]:
        report = self.report.to_dict()
        return _optional({"event": self.name, "time": self.time, "trial_id": self.trial_id, "attempt": self.attempt,
                          "epoch": report["epoch"], "objective": report["objective"]},
                         heads=report["heads"] or None, elapsed_s=report["elapsed_s"], epoch_s=report["epoch_s"],
                         train_s=report["train_s"])

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrialProgress":
        trial_id, attempt = _trial_key(d, cls.name)
        return cls(time=d.get("time"), trial_id=trial_id, attempt=attempt, report=EpochReport.from_journal(d))


@dataclass(frozen=True, kw_only=True, slots=True)
class TrialStopRequested(JournalEvent):
    """The campaign's stopper asked a running attempt to stop after its epoch."""

    name: ClassVar[str] = "trial_stop_requested"
    required: ClassVar[tuple[str, ...]] = ("trial_id", "attempt", "reason")
    trial_id: int
    attempt: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "time": self.time, "trial_id": self.trial_id, "attempt": self.attempt,
                "reason": self.reason}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrialStopRequested":
        trial_id, attempt = _trial_key(d, cls.name)
        return cls(time=d.get("time"), trial_id=trial_id, attempt=attempt, reason=str(d["reason"]))


@dataclass(frozen=True, kw_only=True, slots=True)
class TrialEnded(JournalEvent):
    """An attempt ended with its result (the base of :class:`TrialFinished` and :class:`TrialFailed`)."""

    trial_id: int
    attempt: int
    result: TrialResult | None
    started_at: float | None = None
    ended_at: float | None = None
    stop: str | None = None  # asked to stop: "obeyed" or "ignored"

    def _fields(self, **between: Any) -> dict[str, Any]:
        """The JSON object: the key of the attempt, ``between``, its result, then the optional times."""
        d = {"event": self.name, "time": self.time, "trial_id": self.trial_id, "attempt": self.attempt, **between,
             "result": None if self.result is None else self.result.to_dict()}
        return _optional(d, started_at=self.started_at, ended_at=self.ended_at, stop=self.stop)

    @staticmethod
    def _common(d: Mapping[str, Any], name: str) -> dict[str, Any]:
        trial_id, attempt = _trial_key(d, name)
        result = d.get("result")
        return {"time": d.get("time"), "trial_id": trial_id, "attempt": attempt,
                "result": TrialResult.from_journal(result) if isinstance(result, dict) else None,
                "started_at": d.get("started_at"), "ended_at": d.get("ended_at"), "stop": d.get("stop")}


@dataclass(frozen=True, kw_only=True, slots=True)
class TrialFinished(TrialEnded):
    """An attempt ended with a result of its own (completed, diverged, timeout, stopped)."""

    name: ClassVar[str] = "trial_finished"
    required: ClassVar[tuple[str, ...]] = ("trial_id", "attempt", "result")

    def to_json(self) -> dict[str, Any]:
        return self._fields()

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrialFinished":
        return cls(**cls._common(d, cls.name))


@dataclass(frozen=True, kw_only=True, slots=True)
class TrialFailed(TrialEnded):
    """An attempt failed; ``will_retry``: the campaign re-runs it (on ``retry_size`` slots)."""

    name: ClassVar[str] = "trial_failed"
    required: ClassVar[tuple[str, ...]] = ("trial_id", "attempt", "reason", "log_tail", "result")
    reason: str | None = None
    log_tail: str = ""
    will_retry: bool = False
    retry_size: int | None = None

    def to_json(self) -> dict[str, Any]:
        d = self._fields(reason=self.reason, log_tail=self.log_tail)
        d.update(will_retry=self.will_retry, retry_size=self.retry_size)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrialFailed":
        return cls(**cls._common(d, cls.name), reason=d["reason"], log_tail=d["log_tail"] or "",
                   will_retry=bool(d.get("will_retry")), retry_size=d.get("retry_size"))


@dataclass(frozen=True, kw_only=True, slots=True)
class TrialMoved(JournalEvent):
    """A running attempt checkpointed after ``epochs_done`` epochs and left its slots: attempt + 1
    continues it from there on ``size`` slots (a malleable campaign grew it)."""

    name: ClassVar[str] = "trial_moved"
    required: ClassVar[tuple[str, ...]] = ("trial_id", "attempt", "epochs_done", "size")
    trial_id: int
    attempt: int
    epochs_done: int
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "time": self.time, "trial_id": self.trial_id, "attempt": self.attempt,
                "epochs_done": self.epochs_done, "size": self.size}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrialMoved":
        trial_id, attempt = _trial_key(d, cls.name)
        return cls(time=d.get("time"), trial_id=trial_id, attempt=attempt, epochs_done=int(d["epochs_done"]),
                   size=int(d["size"]))


@dataclass(frozen=True, kw_only=True, slots=True)
class TrialExploited(JournalEvent):
    """PBT (:mod:`hpo.pbt`): a running attempt in the population's bottom stopped after ``epoch``;
    attempt + 1 continues from trial ``donor_id``'s training state (after its latest reported epoch
    ``donor_epoch`` at the decision) with ``params``, the trial's parameters from now on."""

    name: ClassVar[str] = "trial_exploited"
    required: ClassVar[tuple[str, ...]] = ("trial_id", "attempt", "epoch", "donor_id", "donor_epoch", "params")
    trial_id: int
    attempt: int
    epoch: int
    donor_id: int
    donor_epoch: int
    params: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "time": self.time, "trial_id": self.trial_id, "attempt": self.attempt,
                "epoch": self.epoch, "donor_id": self.donor_id, "donor_epoch": self.donor_epoch,
                "params": self.params}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrialExploited":
        trial_id, attempt = _trial_key(d, cls.name)
        if not isinstance(d["params"], dict):
            raise JournalEventError(f"journal event {cls.name!r}: params must be an object, got {d['params']!r}")
        return cls(time=d.get("time"), trial_id=trial_id, attempt=attempt, epoch=int(d["epoch"]),
                   donor_id=int(d["donor_id"]), donor_epoch=int(d["donor_epoch"]), params=dict(d["params"]))


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeDrained(JournalEvent):
    """A node taken out of service after ``failures`` node-level trial failures in a row."""

    name: ClassVar[str] = "node_drained"
    required: ClassVar[tuple[str, ...]] = ("node", "hostname", "failures", "reason")
    node: int
    hostname: str
    failures: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "time": self.time, "node": self.node, "hostname": self.hostname,
                "failures": self.failures, "reason": self.reason}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "NodeDrained":
        return cls(time=d.get("time"), node=int(d["node"]), hostname=str(d["hostname"]),
                   failures=int(d["failures"]), reason=str(d["reason"]))


@dataclass(frozen=True, kw_only=True, slots=True)
class CampaignFinished(JournalEvent):
    """A run of the campaign ended (budget, max_trials, failures, an infrastructure fault)."""

    name: ClassVar[str] = "campaign_finished"
    required: ClassVar[tuple[str, ...]] = ("reason",)
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "time": self.time, "reason": self.reason}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CampaignFinished":
        return cls(time=d.get("time"), reason=str(d["reason"]))


Event = Union[CampaignStarted, TrialSuggested, TrialStarted, TrialProgress, TrialStopRequested, TrialFinished,
              TrialFailed, TrialMoved, TrialExploited, NodeDrained, CampaignFinished]
#: event name -> its class: the journal's whole vocabulary
EVENT_TYPES: dict[str, type[JournalEvent]] = {cls.name: cls for cls in (
    CampaignStarted, TrialSuggested, TrialStarted, TrialProgress, TrialStopRequested, TrialFinished, TrialFailed,
    TrialMoved, TrialExploited, NodeDrained, CampaignFinished)}
_REQUIRED: dict[str, frozenset[str]] = {name: frozenset(cls.required) for name, cls in EVENT_TYPES.items()}


def _class_of(record: Mapping[str, Any]) -> type[JournalEvent]:
    """The class of a line's object with its required fields present."""
    name = record.get("event")
    cls = EVENT_TYPES.get(name)  # type: ignore[arg-type]
    if cls is None:
        raise JournalEventError(f"unknown journal event {name!r}; known: {sorted(EVENT_TYPES)}")
    if not _REQUIRED[name] <= record.keys():
        missing = [f for f in cls.required if f not in record]
        raise JournalEventError(f"journal event {name!r} is missing fields {missing}")
    return cls


def check_record(record: Mapping[str, Any]) -> type[JournalEvent]:
    """The class of a line's object; :class:`JournalEventError` for an unknown name, a missing
    field or a trial id / attempt that is not an integer >= 0."""
    cls = _class_of(record)
    if cls.name.startswith("trial_"):
        _trial_key(record, cls.name)
    return cls


def event_from_json(record: Mapping[str, Any]) -> JournalEvent:
    """The typed event of one journal line's object (checked as :func:`check_record` does: the trial
    events check their key while they are read)."""
    return _class_of(record).from_json(record)
