"""The structured result of one trial: ``RUN_DIR/result.json``.

Written by the trainer (and by the campaign runtime when a trial process dies before it could write
one). Nothing downstream scrapes logs: the scheduler, the journal, selection and the ensemble read
this file only.

Schema (JSON object; every key always present, ``null`` where unknown):

- ``status``: ``"completed" | "diverged" | "timeout" | "failed"``
- ``objective``: task-weighted validation loss of the best epoch (minimised); ``null`` unless the
  run produced at least one finite validation loss
- ``heads``: ``{head: {"val_mae", "val_rmse", "test_mae", "test_rmse", "unit"}}`` in physical units
- ``num_parameters``, ``epochs`` (completed), ``best_epoch``, ``wall_time_s``, ``peak_memory_mb``
  (max RSS over the trial's processes, or peak GPU memory where a GPU was used), ``slots``
  (processes / GPUs used), ``device``
- ``failure_reason``: one line; ``traceback``: the full traceback where an exception was caught;
  ``log_tail``: last lines of the trial log (filled by the runtime for crashed processes)
- ``checkpoint``: file name of the best checkpoint relative to RUN_DIR, or ``null``
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

TrialStatus = Literal["completed", "diverged", "timeout", "failed"]
STATUSES: tuple[str, ...] = ("completed", "diverged", "timeout", "failed")


@dataclass
class HeadMetrics:
    """Validation and test errors of one head, in the head's physical unit."""

    val_mae: float | None = None
    val_rmse: float | None = None
    test_mae: float | None = None
    test_rmse: float | None = None
    unit: str = ""


@dataclass
class TrialResult:
    """Everything a finished (or dead) trial reports. See the module docstring for the schema."""

    status: TrialStatus
    objective: float | None = None
    heads: dict[str, HeadMetrics] = field(default_factory=dict)
    num_parameters: int | None = None
    epochs: int = 0
    best_epoch: int | None = None
    wall_time_s: float = 0.0
    peak_memory_mb: float | None = None
    slots: int = 1
    device: str = "cpu"
    failure_reason: str | None = None
    traceback: str | None = None
    log_tail: str | None = None
    checkpoint: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        """True for a completed trial with an objective (a ``timeout`` trial also has one, from its
        best epoch within the budget, and may join an ensemble when it saved a checkpoint)."""
        return self.status == "completed" and self.objective is not None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrialResult":
        d = dict(d)
        d["heads"] = {k: HeadMetrics(**v) for k, v in (d.get("heads") or {}).items()}
        known = set(cls.__dataclass_fields__)
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown result.json keys: {sorted(unknown)}")
        return cls(**d)

    def write(self, path: str | os.PathLike) -> None:
        """Write atomically (temporary file, fsync, rename): a crash never leaves a torn result.json."""
        path = Path(path)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2, allow_nan=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    @classmethod
    def read(cls, path: str | os.PathLike) -> "TrialResult":
        try:
            with open(path) as fh:
                return cls.from_dict(json.load(fh))
        except (OSError, json.JSONDecodeError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: not a valid result.json ({exc})") from exc
