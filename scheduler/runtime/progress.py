"""The live progress line of rank 0 and the final summary.

On a terminal one line is rewritten in place (``\\r``) at most every ``tty_interval_s``; otherwise (a
batch job's log) a full line is printed every ``log_interval_s`` so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO


@dataclass
class ProgressSnapshot:
    """What the line shows."""

    finished: int
    max_trials: int
    running: int
    failed: int
    best: float | None
    busy_slots: int
    total_slots: int
    utilisation: float  # busy slot-seconds / (elapsed x slots) since this run started
    elapsed_s: float

    def line(self) -> str:
        best = "-" if self.best is None else f"{self.best:.6g}"
        return (f"[hpo {self.elapsed_s:7.1f}s] done {self.finished}/{self.max_trials}  "
                f"running {self.running}  failed {self.failed}  best {best}  "
                f"slots {self.busy_slots}/{self.total_slots} busy, utilisation {100 * self.utilisation:.0f}%")


class ProgressLine:
    """Prints :class:`ProgressSnapshot` lines; ``enabled=False`` prints nothing."""

    def __init__(self, stream: TextIO = sys.stderr, enabled: bool = True,
                 tty_interval_s: float = 0.5, log_interval_s: float = 10.0) -> None:
        self.stream = stream
        self.enabled = enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.interval = tty_interval_s if self.tty else log_interval_s
        self._last = -float("inf")
        self._width = 0

    def due(self, now: float) -> bool:
        return self.enabled and now - self._last >= self.interval

    def show(self, snap: ProgressSnapshot, now: float | None = None) -> None:
        if not self.enabled:
            return
        self._last = time.monotonic() if now is None else now
        text = snap.line()
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        """One line that must be seen (printed even when the progress line is off)."""
        if self.tty and self._width:
            self.stream.write("\n")
            self._width = 0
        self.stream.write(f"hpo: {text}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
