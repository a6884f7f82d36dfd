"""The structured result of one trial: ``RUN_DIR/result.json``.

Written by the trainer (and by the campaign runtime when a trial process dies before it could write
one). Nothing downstream scrapes logs: the scheduler, the journal, selection and the ensemble read
this file only.

Schema (JSON object; every key always present, ``null`` where unknown):

- ``status``: ``"completed" | "diverged" | "timeout" | "stopped" | "failed"`` (``stopped``: the
  campaign's early-discarding stopper ended it, after or during an epoch; it keeps its best epoch so far)
- ``objective``: task-weighted validation loss of the best epoch (minimised); ``null`` unless the
  run produced at least one finite validation loss
- ``heads``: ``{head: {"val_mae", "val_rmse", "test_mae", "test_rmse", "unit"}}`` in physical units;
  a structure's total energy (a graph head of dim 1 in ``eV``, ``Ha`` ...) also has
  ``val_mae_per_atom`` and ``test_mae_per_atom``: the mean over the split's structures of
  ``|error| / atoms``, in the head's unit per atom (optional: ``null`` or absent for other heads)
- ``num_parameters``, ``epochs`` (completed), ``best_epoch``, ``wall_time_s``, ``peak_memory_mb``
  (max RSS over the trial's processes, or peak GPU memory where a GPU was used), ``slots``
  (processes / GPUs used), ``device``
- ``failure_reason``: one line; ``traceback``: the full traceback where an exception was caught;
  ``log_tail``: last lines of the trial log (filled by the runtime for crashed processes)
- ``checkpoint``: file name of the best checkpoint relative to RUN_DIR, or ``null``
- ``partial_epoch``: the fraction of an epoch trained after the last completed one when the run
  ended during an epoch (a campaign's stop request looked for every few batches), else 0
- ``inference_ms_per_graph``: what the model costs to run: the median over its epochs of the
  validation pass's milliseconds x processes per validation graph (batched, the trainer's device;
  forces included for a potential), or ``null`` (no epoch evaluated)
- ``resumed_from``: the epochs this attempt did not train because it resumed from the trial's
  training state written after them (``RUN_DIR/training_state.pt``; ``epochs`` and ``best_epoch``
  count the trial's epochs over its attempts), or ``null`` when it started from scratch
- ``state_bytes``: the size of the training state file at its last write, ``checkpoint_s_median``
  and ``checkpoint_s_max``: the seconds per epoch this attempt spent writing checkpoints (the
  training state, and the best checkpoint when the epoch improved); ``null`` when none was written

The last four keys came later: a result.json without them reads as before (``null``).

Reading is strict, because a trial program may write anything: :meth:`TrialResult.read` refuses a
file over :data:`MAX_RESULT_BYTES`, a value of the wrong type or an unknown key (a ValueError naming
the file and the key, which the runtime turns into that trial's failure), and turns a non-finite
objective or head metric (NaN, Infinity) into a ``diverged`` result with that value ``null``, the
trainer's own rule for a loss that is not finite. Long texts are cut to their last
:data:`MAX_TEXT_CHARS` characters. Writing never leaves ``result.json.tmp`` behind.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from hydragnn_ensemble.untrusted_files import read_bytes, write_atomic


class TrialStatus(str, Enum):
    """How a trial attempt ended: the one definition every package uses (a ``str``: compares
    equal to its value, ``"completed"`` etc., as read from result.json and the journal). What a
    trial is before it ends (suggested, running, ...) is :class:`hpo.status.PendingStatus`."""

    COMPLETED = "completed"  # trained its whole budget (or early-stopped on its own patience)
    DIVERGED = "diverged"  # its loss became NaN/inf; the best epoch before is kept
    TIMEOUT = "timeout"  # reached its time limit; the best epoch so far is kept
    STOPPED = "stopped"  # the campaign's stopper ended it after an epoch; the best epoch is kept
    FAILED = "failed"  # no objective: an exception, a crash, a kill, a bad result.json

    def __str__(self) -> str:  # the word, as in result.json, everywhere it is printed
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def has_objective(self) -> bool:
        """A trial that ended so has an objective (its best epoch's) for the optimizer."""
        return self in _WITH_OBJECTIVE


_WITH_OBJECTIVE = frozenset({TrialStatus.COMPLETED, TrialStatus.TIMEOUT, TrialStatus.STOPPED})
#: Every final status, in the order reports list them.
STATUSES: tuple[TrialStatus, ...] = tuple(TrialStatus)
#: Statuses with an objective: completed, and timeout or stopped (the trainer keeps its best epoch
#: so far).
STATUSES_WITH_OBJECTIVE: tuple[TrialStatus, ...] = tuple(s for s in TrialStatus if s.has_objective)
#: The failure reason of a trial process killed by SIGKILL that it did not ask for (the kernel's
#: out-of-memory killer, most often); a campaign retries such a trial once on more slots.
OOM_REASON = "killed (SIGKILL, possibly out of memory)"
MAX_RESULT_BYTES = 4 * 1024 * 1024  # a result.json larger than this is refused (the trial's failure)
MAX_TEXT_CHARS = 20_000  # traceback / log_tail / failure_reason are cut to their last this many chars
MAX_INT = 2**53  # integers beyond this (in magnitude) are refused: JSON readers and the journal lose them
MAX_HEADS = 256  # heads a result may report, each name at most MAX_HEAD_NAME characters
MAX_HEAD_NAME = 100

_NUMBER = (int, float)
#: result.json keys -> accepted types (``None`` always allowed except for status, epochs, slots).
_TYPES: dict[str, tuple[type, ...]] = {
    "status": (str,), "objective": _NUMBER, "heads": (dict,), "num_parameters": (int,),
    "epochs": (int,), "best_epoch": (int,), "wall_time_s": _NUMBER, "peak_memory_mb": _NUMBER,
    "slots": (int,), "device": (str,), "failure_reason": (str,), "traceback": (str,),
    "log_tail": (str,), "checkpoint": (str,), "partial_epoch": _NUMBER, "inference_ms_per_graph": _NUMBER,
    "resumed_from": (int,), "state_bytes": (int,), "checkpoint_s_median": _NUMBER, "checkpoint_s_max": _NUMBER,
}
_REQUIRED = ("status",)
_METRIC_KEYS = ("val_mae", "val_rmse", "test_mae", "test_rmse", "val_mae_per_atom", "test_mae_per_atom")


@dataclass
class HeadMetrics:
    """Validation and test errors of one head, in the head's physical unit."""

    val_mae: float | None = None
    val_rmse: float | None = None
    test_mae: float | None = None
    test_rmse: float | None = None
    unit: str = ""
    val_mae_per_atom: float | None = None  # a total energy: mean over structures of |error| / atoms
    test_mae_per_atom: float | None = None


@dataclass
class TrialResult:
    """Everything a finished (or dead) trial reports. See the module docstring for the schema."""

    status: str  # a TrialStatus value
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
    partial_epoch: float = 0.0
    inference_ms_per_graph: float | None = None
    resumed_from: int | None = None  # epochs of its training state this attempt resumed after
    state_bytes: int | None = None  # the training state file's size (its last write)
    checkpoint_s_median: float | None = None  # seconds per epoch writing checkpoints, median and max
    checkpoint_s_max: float | None = None

    def __post_init__(self) -> None:
        try:
            self.status = TrialStatus(self.status)
        except ValueError:
            raise ValueError(f"status must be one of {[s.value for s in STATUSES]}, got {self.status!r}") from None

    @property
    def ok(self) -> bool:
        """True for a completed trial with an objective (a ``timeout`` trial also has one, from its
        best epoch within the budget, and may join an ensemble when it saved a checkpoint)."""
        return self.status == TrialStatus.COMPLETED and self.objective is not None

    def metric(self, head: str, name: str) -> float | None:
        """One error of one head (``val_mae``, ``val_rmse``, ``test_mae``, ``test_rmse``,
        ``val_mae_per_atom``, ``test_mae_per_atom``), or None."""
        metrics = self.heads.get(head)
        return None if metrics is None else getattr(metrics, name)

    def to_dict(self) -> dict:
        """The result.json object (plain JSON types)."""
        out = asdict(self)
        out["status"] = self.status.value
        return out

    @classmethod
    def from_journal(cls, d: dict) -> "TrialResult":
        """A result as this program wrote it into a campaign journal (trusted: no validation beyond
        the status; keys an older or newer version wrote are ignored)."""
        get = d.get
        heads = {name: HeadMetrics(m.get("val_mae"), m.get("val_rmse"), m.get("test_mae"), m.get("test_rmse"),
                                   m.get("unit", ""), m.get("val_mae_per_atom"), m.get("test_mae_per_atom"))
                 for name, m in (get("heads") or {}).items()}
        return cls(d["status"], get("objective"), heads, get("num_parameters"), get("epochs") or 0,
                   get("best_epoch"), get("wall_time_s") or 0.0, get("peak_memory_mb"), get("slots") or 1,
                   get("device") or "cpu", get("failure_reason"), get("traceback"), get("log_tail"),
                   get("checkpoint"), get("partial_epoch") or 0.0, get("inference_ms_per_graph"),
                   get("resumed_from"), get("state_bytes"), get("checkpoint_s_median"), get("checkpoint_s_max"))

    @classmethod
    def from_dict(cls, d: Any) -> "TrialResult":
        """Validate a result.json object (see the module docstring); ValueError naming the key."""
        if not isinstance(d, dict):
            raise ValueError(f"must be a JSON object, got {type(d).__name__}")
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown result.json keys: {unknown}")
        values = {key: _checked(key, value) for key, value in d.items()}
        for key in _REQUIRED:
            if values.get(key) is None:
                raise ValueError(f"{key!r} is missing")
        for key in ("epochs", "slots", "partial_epoch"):
            if key in values and values[key] is None:
                del values[key]  # the defaults
        heads = values.get("heads") or {}
        if len(heads) > MAX_HEADS or any(len(str(h)) > MAX_HEAD_NAME for h in heads):
            raise ValueError(f"'heads' may hold at most {MAX_HEADS} heads with names of at most {MAX_HEAD_NAME} characters")
        values["heads"] = {str(h): _head_metrics(h, m) for h, m in heads.items()}
        result = cls(**values)
        result._diverge_if_not_finite()
        return result

    def _diverge_if_not_finite(self) -> None:
        """A NaN/inf objective or head metric: diverged, that value null (see the module docstring)."""
        bad = [] if self.objective is None or math.isfinite(self.objective) else ["objective"]
        if bad:
            self.objective = None
        for head, metrics in self.heads.items():
            for key in _METRIC_KEYS:
                value = getattr(metrics, key)
                if value is not None and not math.isfinite(value):
                    setattr(metrics, key, None)
                    bad.append(f"heads.{head}.{key}")
        if bad and self.status in (TrialStatus.COMPLETED, TrialStatus.TIMEOUT):
            self.status = TrialStatus.DIVERGED
            self.failure_reason = f"not finite: {', '.join(bad)}"
        elif bad:  # stopped, diverged, failed: the status stands, the reason says what was dropped
            note = f"not finite (dropped): {', '.join(bad)}"
            self.failure_reason = f"{self.failure_reason}; {note}" if self.failure_reason else note

    def write(self, path: str | os.PathLike) -> None:
        """Write atomically (temporary file, fsync, rename): a crash never leaves a torn result.json,
        and a value that cannot be written (NaN) or a full disk leaves no temporary file."""
        write_atomic(Path(path), json.dumps(self.to_dict(), indent=2, allow_nan=False), fsync=True)

    @classmethod
    def read(cls, path: str | os.PathLike) -> "TrialResult":
        """Read and validate ``path`` (a regular file, never a pipe or link: see
        :mod:`hydragnn_ensemble.untrusted_files`); ValueError naming the file for anything else than a
        result."""
        try:
            data = read_bytes(path, MAX_RESULT_BYTES + 1)
            if len(data) > MAX_RESULT_BYTES:
                raise ValueError(f"more than the {MAX_RESULT_BYTES} a result may have (bytes)")
            return cls.from_dict(json.loads(data.decode("utf-8")))
        except (OSError, ValueError, TypeError, RecursionError) as exc:  # JSONDecodeError, UnicodeError too
            raise ValueError(f"{path}: not a valid result.json ({exc})") from exc


@dataclass(frozen=True)
class EpochPace:
    """How fast a trial's first epoch (of a process start) trains, before it ends: its
    ``progress.jsonl`` ``pace`` line, written once when the epoch has trained a while. ``epoch``:
    the epoch in progress (from 1); ``done``: the share of its training batches done (0 < done < 1);
    ``train_s``: seconds those took; ``elapsed_s``: seconds since the process started. A campaign
    re-estimates a long trial from it long before the epoch ends."""

    epoch: int
    done: float
    train_s: float
    elapsed_s: float

    def to_dict(self) -> dict:
        return {"epoch": self.epoch, "done": self.done, "train_s": self.train_s, "elapsed_s": self.elapsed_s}


@dataclass(frozen=True)
class EpochReport:
    """One finished epoch of a trial: its ``progress.jsonl`` line (the trainer's
    :class:`hydragnn_ensemble.train.progress.EpochChannel` writes it, the campaign's agent reads it
    with :func:`scheduler.runtime.progress_tail.parse_line`): epochs finished (from 1), that epoch's
    validation objective and per-head validation MAE/RMSE (None where not finite), seconds since the
    trial started, and the seconds this epoch took (``epoch_s``, of which ``train_s`` training; the
    rest evaluation): what the campaign's cost model learns from while the trial runs."""

    epoch: int
    objective: float | None
    heads: dict[str, HeadMetrics] = field(default_factory=dict)
    elapsed_s: float | None = None
    epoch_s: float | None = None
    train_s: float | None = None

    def metric(self, head: str, name: str) -> float | None:
        """``val_mae`` or ``val_rmse`` of one head in this epoch, or None."""
        metrics = self.heads.get(head)
        return None if metrics is None else getattr(metrics, name)

    def to_dict(self) -> dict:
        """The progress line's object (and the journal's ``trial_progress`` fields)."""
        return {"epoch": self.epoch, "objective": self.objective,
                "heads": {h: {"val_mae": m.val_mae, "val_rmse": m.val_rmse} for h, m in self.heads.items()},
                "elapsed_s": self.elapsed_s, "epoch_s": self.epoch_s, "train_s": self.train_s}

    @classmethod
    def from_journal(cls, d: dict) -> "EpochReport":
        """A report as the journal holds it (trusted; ``heads``/``elapsed_s`` absent in old journals)."""
        heads = {name: HeadMetrics(val_mae=m.get("val_mae"), val_rmse=m.get("val_rmse"))
                 for name, m in (d.get("heads") or {}).items()}
        return cls(int(d["epoch"]), d.get("objective"), heads, d.get("elapsed_s"), d.get("epoch_s"), d.get("train_s"))


def _checked(key: str, value: Any) -> Any:
    """``value`` of result.json ``key`` if its type is right (texts cut), else ValueError."""
    if value is None:
        return None
    allowed = _TYPES[key]
    if isinstance(value, bool) or not isinstance(value, allowed):
        names = " or ".join(t.__name__ for t in allowed)
        raise ValueError(f"{key!r} must be {names} or null, got {type(value).__name__}")
    if isinstance(value, int) and abs(value) > MAX_INT:
        raise ValueError(f"{key!r} must be within +-2**53, got an integer of {value.bit_length()} bits")
    if key == "status" and value not in STATUSES:
        raise ValueError(f"'status' must be one of {[s.value for s in STATUSES]}, got {value!r}")
    if isinstance(value, float) and key != "objective" and not math.isfinite(value):
        raise ValueError(f"{key!r} must be finite, got {value}")
    if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        return value[-MAX_TEXT_CHARS:]
    return value


def _head_metrics(head: Any, metrics: Any) -> HeadMetrics:
    """One head's metrics (numbers or null, ``unit`` a text); ValueError naming the head."""
    if not isinstance(metrics, dict):
        raise ValueError(f"heads.{head} must be an object, got {type(metrics).__name__}")
    unknown = sorted(set(metrics) - {*_METRIC_KEYS, "unit"})
    if unknown:
        raise ValueError(f"heads.{head}: unknown keys {unknown}")
    for key in _METRIC_KEYS:
        value = metrics.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, _NUMBER)):
            raise ValueError(f"heads.{head}.{key} must be a number or null, got {type(value).__name__}")
        if isinstance(value, int) and abs(value) > MAX_INT:
            raise ValueError(f"heads.{head}.{key} must be within +-2**53")
    unit = metrics.get("unit", "")
    if not isinstance(unit, str):
        raise ValueError(f"heads.{head}.unit must be a text, got {type(unit).__name__}")
    return HeadMetrics(**{**{k: metrics.get(k) for k in _METRIC_KEYS}, "unit": unit[:100]})
