"""The agent's reader of a running trial's ``progress.jsonl``: new complete lines since the last
read, each checked (a trial program may write anything: a line that is not an epoch report is
skipped and counted, never forwarded)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

MAX_READ_BYTES = 1 << 20  # per read: a runaway writer cannot make the agent read gigabytes at once


def _number(value: Any) -> float | None:
    """A finite float, None for null or a non-finite number; raises ValueError for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(value)
    return float(value) if math.isfinite(value) else None


def parse_line(line: str) -> dict[str, Any] | None:
    """An epoch report ``{"epoch": int >= 1, "objective": float | None, "heads": {name: {"val_mae":
    float | None, "val_rmse": float | None}}}`` from one line, or None when the line is not one."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    epoch, heads = data.get("epoch"), data.get("heads", {})
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1 or not isinstance(heads, dict):
        return None
    try:
        objective = _number(data.get("objective"))
        clean = {str(name): {key: _number(m.get(key)) for key in ("val_mae", "val_rmse")}
                 for name, m in heads.items() if isinstance(m, dict)}
    except ValueError:
        return None
    if len(clean) != len(heads):
        return None
    return {"epoch": epoch, "objective": objective, "heads": clean}


class ProgressTail:
    """New epoch reports of one file, from where the last read stopped (a partial last line waits
    for its newline)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.offset = 0
        self.skipped = 0  # lines that were not epoch reports

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read(MAX_READ_BYTES)
        except FileNotFoundError:
            return []
        except OSError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        reports = []
        for raw in chunk[:end].split(b"\n"):
            report = parse_line(raw.decode("utf-8", errors="replace"))
            if report is None:
                self.skipped += 1
            else:
                reports.append(report)
        return reports
