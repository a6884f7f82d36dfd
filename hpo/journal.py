"""The campaign journal: ``CAMPAIGN_DIR/journal.jsonl``, one JSON event per line, append-only.

Rank 0 is the single writer: every :meth:`Journal.append` writes one line, flushes and fsyncs, so
after a crash the journal holds every event whose ``append`` returned, plus at most one torn last
line. :func:`read_journal` drops such a torn last line (and says so), also when it is valid JSON
but not a complete event (a truncation that happened to end on a brace); a bad line or an
incomplete event anywhere else is corruption and an error naming the line. :meth:`CampaignState.replay` turns the events into the
campaign's state: finished trials (each exactly once, even if events were written twice), trials
that were running when the campaign stopped (to be re-run), the next trial id, counts and the best
objective. Events: see ``hpo._events.EVENT_FIELDS``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from hpo._events import EVENT_FIELDS, JournalEventError, check_event
from hpo.objective import objective_value

try:  # orjson is ~5x faster on the 100k-event replay; the stdlib is the fallback
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    _loads: Callable[[bytes], Any] = orjson.loads
    _DECODE_ERRORS: tuple[type[Exception], ...] = (orjson.JSONDecodeError,)
except ImportError:  # pragma: no cover - orjson is installed here

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()

    _loads = json.loads
    _DECODE_ERRORS = (json.JSONDecodeError, UnicodeDecodeError)

__all__ = [
    "AttemptRecord",
    "CampaignState",
    "Journal",
    "JournalContents",
    "JournalCorruptError",
    "JournalEventError",
    "TornJournalLineWarning",
    "TrialRecord",
    "read_events",
    "read_journal",
]

FINAL_STATUSES = ("completed", "diverged", "timeout", "failed")


class JournalCorruptError(ValueError):
    """A line other than the last one is not a JSON event: the journal cannot be trusted."""


class TornJournalLineWarning(UserWarning):
    """The journal's last line was an incomplete write (a crash mid-append) and was dropped."""


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a journal is parsed or folded.

    Replaying 100,000 events allocates millions of acyclic objects; the collector would rescan them
    again and again (2.1 s -> 0.9 s for that replay here, 1.06 s counting one full collection
    afterwards). Its previous state is restored, whatever happens."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _parse_line(line: bytes) -> dict | None:
    """The complete event on ``line``, else None (not JSON, or not an event with its fields)."""
    try:
        event = _loads(line)
    except _DECODE_ERRORS:
        return None
    return event if isinstance(event, dict) and _complete(event) else None


def _complete(event: Mapping[str, Any]) -> bool:
    try:
        check_event(event)
    except JournalEventError:
        return False
    return True


@dataclass
class JournalContents:
    """The events of a journal file, and the torn last line that was dropped (if any)."""

    events: list[dict]
    torn_line: bytes | None = None
    torn_line_number: int | None = None


def prepare_events(events: Iterable[Mapping[str, Any]]) -> list[dict]:
    """The records as they will be written: copies with ``time`` added when missing, each checked
    (raises ValueError naming the missing fields)."""
    records = []
    for event in events:
        record = dict(event)
        record.setdefault("time", time.time())
        check_event(record)
        records.append(record)
    return records


def read_journal(path: str | os.PathLike) -> JournalContents:
    """All events of ``path``; a torn last line is dropped and returned in ``torn_line``.

    Raises :class:`JournalCorruptError` naming the line for a bad line that is not the last."""
    path = Path(path)
    data = path.read_bytes()
    with _collector_paused():
        fast = _parse_all(data)
        if fast is not None:
            return JournalContents(fast)
        return _parse_line_by_line(path, data.split(b"\n"))


def _parse_all(data: bytes) -> list[dict] | None:
    """Fast path: the whole file parsed as one JSON array (newlines turned into commas); None if
    that fails (a torn or corrupt line, or blank lines), and the slow path finds out which."""
    data = data.strip()
    if not data:
        return []
    try:
        events = _loads(b"[" + data.replace(b"\n", b",") + b"]")
    except _DECODE_ERRORS:
        return None
    if len(events) == data.count(b"\n") + 1 and all(isinstance(e, dict) and _complete(e) for e in events):
        return events  # one complete event per line, nothing spanning lines
    return None


def _parse_line_by_line(path: Path, lines: list[bytes]) -> JournalContents:
    """Slow path that finds the bad line: a torn last line or corruption in the middle."""
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    events: list[dict] = []
    for number, line in enumerate(lines[: last + 1], start=1):
        event = _parse_line(line)
        if event is not None:
            events.append(event)
        elif not line.strip():
            continue
        elif number - 1 == last:
            return JournalContents(events, torn_line=line, torn_line_number=number)
        else:
            raise JournalCorruptError(
                f"{path}: line {number} is not a complete JSON event ({_what_is_wrong(line)}; "
                f"corruption inside the journal, not a torn last line): {line[:80]!r}"
            )
    return JournalContents(events)


def _what_is_wrong(line: bytes) -> str:
    try:
        event = _loads(line)
    except _DECODE_ERRORS:
        return "not JSON"
    if not isinstance(event, dict):
        return f"a JSON {type(event).__name__}, not an object"
    try:
        check_event(event)
    except JournalEventError as exc:
        return str(exc)
    return "unknown problem"


def read_events(path: str | os.PathLike) -> list[dict]:
    """The events of a journal; a torn last line is dropped with a :class:`TornJournalLineWarning`."""
    contents = read_journal(path)
    if contents.torn_line is not None:
        warnings.warn(
            f"{path}: dropped torn last line {contents.torn_line_number} "
            f"({len(contents.torn_line)} bytes, an append interrupted by a crash)",
            TornJournalLineWarning,
            stacklevel=2,
        )
    return contents.events


def _last_line_start(fh: Any, size: int) -> int:
    """Offset where the file's last line starts (ignoring one final newline)."""
    end = size - 1  # skip the final byte: it may be the last line's own newline
    block = 1 << 16
    while end > 0:
        start = max(0, end - block)
        fh.seek(start)
        chunk = fh.read(end - start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


class Journal:
    """Append-only writer of ``journal.jsonl`` (one writer per campaign: rank 0).

    Opening an existing journal repairs its tail first: a torn last line is cut off (kept in
    :attr:`dropped_tail`), a complete last line missing its newline gets one, so new events never
    end up glued to a torn line."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.dropped_tail: bytes | None = None
        if self.path.exists() and self.path.stat().st_size > 0:
            self._repair_tail()
        self._fh = open(self.path, "ab")

    def _repair_tail(self) -> None:
        size = self.path.stat().st_size
        with open(self.path, "r+b") as fh:
            start = _last_line_start(fh, size)
            fh.seek(start)
            tail = fh.read()
            line = tail.rstrip(b"\n")
            if line.strip() and _parse_line(line) is None:
                self.dropped_tail = tail
                fh.truncate(start)
            elif not tail.endswith(b"\n"):
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")
            else:
                return
            fh.flush()
            os.fsync(fh.fileno())
        if self.dropped_tail is not None:
            warnings.warn(
                f"{self.path}: cut off a torn last line ({len(self.dropped_tail)} bytes) before "
                "appending",
                TornJournalLineWarning,
                stacklevel=3,
            )

    def append(self, event: Mapping[str, Any]) -> dict:
        """Write one event (``time`` added when missing), flush and fsync. Returns what was written."""
        return self.append_many([event])[0]

    def append_many(self, events: Iterable[Mapping[str, Any]]) -> list[dict]:
        """Write ``events`` in order (``time`` added when missing), then flush and fsync once
        (group commit: whole lines, in order; a crash loses at most this batch)."""
        records = self.write_many(events)
        if records:
            self.fsync()
        return records

    def write_many(self, events: Iterable[Mapping[str, Any]]) -> list[dict]:
        """Write ``events`` in order into the operating system's cache, without fsync: they survive
        the death of this process, not of the machine, until :meth:`fsync`."""
        records = prepare_events(events)
        if records:
            self._fh.write(b"".join(_dumps(r) + b"\n" for r in records))
            self._fh.flush()
        return records

    def fsync(self) -> None:
        """Make everything written so far durable (safe to call from another thread than
        :meth:`write_many`'s: it touches only the file descriptor)."""
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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

    @property
    def num_interrupted(self) -> int:
        """Attempts cut short by a campaign stop (the last one included when it was running)."""
        return sum(a.status in ("interrupted", "running") for a in self.attempts.values())


@dataclass
class CampaignState:
    """The state of a campaign rebuilt from its journal (see :meth:`replay`)."""

    trials: dict[int, TrialRecord] = field(default_factory=dict)
    campaign: dict[str, Any] | None = None
    objective_key: str = "objective"
    start_time: float | None = None
    last_time: float | None = None
    segments: list[tuple[float, float, int]] = field(default_factory=list)
    finished_reason: str | None = None
    num_events: int = 0
    num_duplicates: int = 0

    # -- replay -----------------------------------------------------------------------------------
    @classmethod
    def replay(cls, events: Iterable[Mapping[str, Any]]) -> "CampaignState":
        """Fold the events in order (see :meth:`_replay`), with the garbage collector paused."""
        with _collector_paused():
            return cls._replay(events)

    @classmethod
    def _replay(cls, events: Iterable[Mapping[str, Any]]) -> "CampaignState":
        """Fold the events in order. Duplicated events (same event, trial id and attempt) are kept
        once; an attempt left running when a later ``campaign_started`` comes becomes
        ``interrupted``."""
        state = cls()
        trials = state.trials
        segment: list[Any] | None = None  # [start, end, slots]
        seen_terminal: set[tuple[int, int]] = set()
        for index, event in enumerate(events):
            name = event.get("event")
            t = event.get("time")
            if t is not None:
                if state.start_time is None:
                    state.start_time = t
                state.last_time = t
                if segment is not None and name != "campaign_started":
                    segment[1] = t  # the segment lasts until its last event before a restart
            state.num_events += 1
            if name == "trial_started":
                record = _trial(trials, event)
                attempt = event["attempt"]
                if attempt in record.attempts:
                    state.num_duplicates += 1
                    continue
                for earlier in record.attempts.values():
                    if earlier.status == "running":  # re-run without an end event: cut short
                        earlier.status = "interrupted"
                        earlier.end = t
                slots = event.get("slots") or []
                record.attempts[attempt] = AttemptRecord(
                    attempt, start=t, slots=slots, hosts=event.get("hosts") or [],
                    size=event.get("size") or len(slots),
                    predicted_slot_s=event.get("predicted_slot_s"),
                )
            elif name in ("trial_finished", "trial_failed"):
                key = (event["trial_id"], event["attempt"])
                if key in seen_terminal:
                    state.num_duplicates += 1
                    continue
                seen_terminal.add(key)
                record = _trial(trials, event)
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
                if name == "trial_failed":
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
                        f"journal event #{index + 1}: trial {event['trial_id']} has unknown status "
                        f"{attempt.status!r}"
                    )
            elif name == "trial_suggested":
                if event["trial_id"] in trials and trials[event["trial_id"]].params:
                    state.num_duplicates += 1
                    continue
                record = _trial(trials, event)
                record.params = event["params"]
                record.suggested_time = t
            elif name == "campaign_started":
                for record in trials.values():
                    for attempt in record.attempts.values():
                        if attempt.status == "running":
                            attempt.status = "interrupted"
                            attempt.end = segment[1] if segment is not None else attempt.start
                state.campaign = event.get("campaign")
                state.objective_key = (state.campaign or {}).get("objective", "objective")
                state.finished_reason = None
                segment = [t, t, _num_slots(event.get("slots"))]
                state.segments.append(segment)  # type: ignore[arg-type]
            elif name == "campaign_finished":
                state.finished_reason = event.get("reason")
            else:
                raise JournalEventError(
                    f"journal event #{index + 1}: unknown event {name!r}; known: {sorted(EVENT_FIELDS)}"
                )
        state.segments = [tuple(s) for s in state.segments]  # type: ignore[misc]
        for record in trials.values():
            last = record.last_attempt
            record.objective = (
                objective_value(last.result, state.objective_key) if last and last.ended else None
            )
        return state

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
        out = {s: 0 for s in (*FINAL_STATUSES, "running", "interrupted", "retrying", "suggested")}
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


def _trial(trials: dict[int, TrialRecord], event: Mapping[str, Any]) -> TrialRecord:
    trial_id = event["trial_id"]
    record = trials.get(trial_id)
    if record is None:
        record = trials[trial_id] = TrialRecord(trial_id)
    return record


def _num_slots(slots: Any) -> int:
    if isinstance(slots, int):
        return slots
    if isinstance(slots, (list, tuple)):
        return len(slots)
    return 0
