"""The agent's reader of a running trial's ``progress.jsonl``: new complete lines since the last
read, each checked. A trial program may write anything there; nothing it writes can block, blind or
crash the agent or rank 0:

* the file is opened without blocking and only when it is a regular file
  (:mod:`hydragnn_ensemble.untrusted_files`): a named pipe or a device is the trial's problem
  (:attr:`ProgressTail.problems`) and the file is not read again;
* a line is an epoch report only when it is typed as one and within bounds (:func:`parse_line`:
  ``epoch`` an integer in 1..:data:`MAX_EPOCH`, at most :data:`MAX_HEADS` heads with short names,
  numbers finite or null); anything else is skipped, counted and named;
* a line longer than :data:`MAX_LINE_BYTES` is skipped up to its newline, and the lines after it
  are read as usual.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hydragnn_ensemble.result import EpochReport, HeadMetrics
from hydragnn_ensemble.untrusted_files import NotRegularFileError, read_bytes

MAX_READ_BYTES = 1 << 20  # per read: a runaway writer cannot make the agent read gigabytes at once
MAX_LINE_BYTES = MAX_READ_BYTES  # a longer line is skipped
MAX_EPOCH = 10**9
MAX_HEADS = 256
MAX_HEAD_NAME = 100
MAX_PROBLEMS = 5  # problems kept (and noted in the trial's log) per trial; the rest are counted


def _number(value: Any) -> float | None:
    """A finite float, None for null or a non-finite number; raises ValueError for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(value)
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        return None
    return number if math.isfinite(number) else None


def _seconds(value: Any, max_seconds: float) -> float | None:
    """A time the cost model can use: finite, >= 0 and at most ``max_seconds`` (how long the trial's
    process has existed: no epoch outlasts its process); anything else (a negative, non-finite or
    impossible time, a text) is no time (None): the report still counts, the model does not learn
    from it."""
    try:
        number = _number(value)
    except ValueError:
        return None
    return number if number is not None and 0 <= number <= max_seconds else None


def parse_line(line: str, problems: list[str] | None = None, max_seconds: float = math.inf) -> EpochReport | None:
    """The :class:`EpochReport` of one line (``epoch`` an int in 1..MAX_EPOCH, ``objective`` and
    each head's ``val_mae``/``val_rmse`` a number or null; ``elapsed_s``, ``epoch_s``, ``train_s``
    seconds in ``[0, max_seconds]``, or None where absent or unusable), or None when the line is not
    one (see the module docstring). A time given but unusable is named in ``problems``: the cost
    model does not learn from it."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    epoch, heads = data.get("epoch"), data.get("heads", {})
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 1 <= epoch <= MAX_EPOCH:
        return None
    if not isinstance(heads, dict) or len(heads) > MAX_HEADS or any(len(str(n)) > MAX_HEAD_NAME for n in heads):
        return None
    try:
        objective = _number(data.get("objective"))
        elapsed = _seconds(data.get("elapsed_s"), max_seconds)
        epoch_s = _seconds(data.get("epoch_s"), max_seconds)
        train_s = _seconds(data.get("train_s"), max_seconds)
        clean = {str(name): HeadMetrics(val_mae=_number(m.get("val_mae")), val_rmse=_number(m.get("val_rmse")))
                 for name, m in heads.items() if isinstance(m, dict)}
    except ValueError:
        return None
    if len(clean) != len(heads):
        return None
    if problems is not None:
        for key, kept in (("elapsed_s", elapsed), ("epoch_s", epoch_s), ("train_s", train_s)):
            if kept is None and data.get(key) is not None:
                bound = f", at most the {max_seconds:.4g} s the trial has run" if math.isfinite(max_seconds) else ""
                problems.append(f"epoch {epoch}: {key} {str(data[key])[:40]!r} is not a time in seconds "
                                f"(finite, >= 0{bound}): not learnt from")
    return EpochReport(epoch, objective, clean, elapsed, epoch_s, train_s)


class ProgressTail:
    """New epoch reports of one file, from where the last read stopped (a partial last line waits
    for its newline); :attr:`problems` names what was wrong with the file or its lines."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.offset = 0
        self.skipped = 0  # lines that were not epoch reports
        self.problems: list[str] = []  # the first MAX_PROBLEMS, one line each
        self.unreadable = False  # not a regular file: never read again
        self._in_long_line = False  # skipping the rest of a line over MAX_LINE_BYTES

    def _problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{self.path.name}: {text}")

    def read(self, max_seconds: float = math.inf) -> list[EpochReport]:
        """The epoch reports of the complete lines written since the last read; a time above
        ``max_seconds`` (how long the trial has run) is dropped and named."""
        if self.unreadable:
            return []
        try:
            chunk = read_bytes(self.path, MAX_READ_BYTES, self.offset)
        except FileNotFoundError:
            return []
        except NotRegularFileError as exc:
            self.unreadable = True
            self._problem(f"not read: {exc}")
            return []
        except OSError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            if len(chunk) >= MAX_READ_BYTES:  # no newline in a whole read: one over-long line
                self.offset += len(chunk)
                if not self._in_long_line:
                    self.skipped += 1
                    self._problem(f"a line longer than {MAX_LINE_BYTES} bytes was skipped")
                self._in_long_line = True
            return []
        self.offset += end + 1
        lines = chunk[:end].split(b"\n")
        if self._in_long_line:  # the end of the over-long line
            lines = lines[1:]
            self._in_long_line = False
        reports = []
        for raw in lines:
            unusable: list[str] = []
            report = parse_line(raw.decode("utf-8", errors="replace"), unusable, max_seconds)
            for text in unusable:
                self._problem(text)
            if report is None:
                self.skipped += 1
                self._problem(f"a line that is no epoch report was skipped: {raw[:120].decode('utf-8', 'replace')!r}")
            else:
                reports.append(report)
        return reports
