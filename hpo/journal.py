"""The campaign journal: ``CAMPAIGN_DIR/journal.jsonl``, one JSON event per line, append-only.

Rank 0 is the single writer: every :meth:`Journal.append` writes one line, flushes and fsyncs, so
after a crash the journal holds every event whose ``append`` returned, plus at most one torn last
line. :func:`read_journal` drops such a torn last line (and says so), also when it is valid JSON
but not a complete event (a truncation that happened to end on a brace); a bad line or an
incomplete event anywhere else is corruption and an error naming the line. What the events mean (the campaign's state) is
:mod:`hpo.state`'s job; the events are :mod:`hpo.events`' typed classes, written as their
``to_json()`` object (a plain mapping is checked against the same vocabulary and written as it is).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from hpo.events import JournalEvent, JournalEventError, check_record

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
    "Journal",
    "JournalContents",
    "JournalCorruptError",
    "JournalEventError",
    "TornJournalLineWarning",
    "collector_paused",
    "read_events",
    "read_journal",
]



class JournalCorruptError(ValueError):
    """A line other than the last one is not a JSON event: the journal cannot be trusted."""


class TornJournalLineWarning(UserWarning):
    """The journal's last line was an incomplete write (a crash mid-append) and was dropped."""


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
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
        check_record(event)
    except JournalEventError:
        return False
    return True


@dataclass
class JournalContents:
    """The events of a journal file, and the torn last line that was dropped (if any)."""

    events: list[dict]
    torn_line: bytes | None = None
    torn_line_number: int | None = None
    line_numbers: list[int] | None = None  # each event's line (None: event i is on line i + 1)

    def where(self, path: str | os.PathLike) -> Callable[[int], str]:
        """``index -> "PATH: line N"`` for :meth:`hpo.state.CampaignState.replay`'s errors."""
        return lambda i: f"{path}: line {self.line_numbers[i] if self.line_numbers is not None else i + 1}"


def prepare_events(events: Iterable[JournalEvent | Mapping[str, Any]]) -> list[dict]:
    """The records as they will be written: each event's ``to_json()`` (a mapping: a copy), with
    ``time`` added when missing, each checked (raises ValueError naming the missing fields)."""
    records = []
    for event in events:
        record = event.to_json() if isinstance(event, JournalEvent) else dict(event)
        if record.get("time") is None:
            record["time"] = time.time()
        check_record(record)
        records.append(record)
    return records


def read_journal(path: str | os.PathLike) -> JournalContents:
    """All events of ``path``; a torn last line is dropped and returned in ``torn_line``.

    Raises :class:`JournalCorruptError` naming the line for a bad line that is not the last."""
    path = Path(path)
    data = path.read_bytes()
    with collector_paused():
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
    numbers: list[int] = []
    for number, line in enumerate(lines[: last + 1], start=1):
        event = _parse_line(line)
        if event is not None:
            events.append(event)
            numbers.append(number)
        elif not line.strip():
            continue
        elif number - 1 == last:
            return JournalContents(events, torn_line=line, torn_line_number=number, line_numbers=numbers)
        else:
            raise JournalCorruptError(
                f"{path}: line {number} is not a complete JSON event ({_what_is_wrong(line)}; "
                f"corruption inside the journal, not a torn last line): {line[:80]!r}"
            )
    return JournalContents(events, line_numbers=numbers)


def _what_is_wrong(line: bytes) -> str:
    try:
        event = _loads(line)
    except _DECODE_ERRORS:
        return "not JSON"
    if not isinstance(event, dict):
        return f"a JSON {type(event).__name__}, not an object"
    try:
        check_record(event)
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

    def append(self, event: JournalEvent | Mapping[str, Any]) -> dict:
        """Write one event (``time`` added when missing), flush and fsync. Returns what was written."""
        return self.append_many([event])[0]

    def append_many(self, events: Iterable[JournalEvent | Mapping[str, Any]]) -> list[dict]:
        """Write ``events`` in order (``time`` added when missing), then flush and fsync once
        (group commit: whole lines, in order; a crash loses at most this batch)."""
        records = self.write_many(events)
        if records:
            self.fsync()
        return records

    def write_many(self, events: Iterable[JournalEvent | Mapping[str, Any]]) -> list[dict]:
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
