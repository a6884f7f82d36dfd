"""A trial's learning curve out, a campaign's stop request in: two files in the run directory.

After every epoch, rank 0 of a trial appends one JSON line to ``RUN_DIR/progress.jsonl``::

    {"epoch": 3, "objective": 0.0123, "heads": {"energy": {"val_mae": 0.041, "val_rmse": 0.06}},
     "elapsed_s": 12.5, "epoch_s": 3.1, "train_s": 2.6}

(``epoch``: epochs finished, from 1; ``objective``: that epoch's validation objective; ``heads``:
each head's validation MAE and RMSE in its unit, as in result.json, so that any campaign objective
key reads the same number from a line as from the result; ``elapsed_s``: since the trial started;
``epoch_s``: this epoch's seconds, ``train_s`` of them training, the rest evaluation;
non-finite numbers are null). The campaign's agent reads new lines while the trial runs and forwards them to rank
0. To stop the trial, the agent writes ``RUN_DIR/stop`` (its text: the reason); the trainer looks for
it after each epoch and, during an epoch, every ``STOP_POLL_S`` seconds (a data-parallel trial at
each joint decision every few batches; all ranks agree through one all-reduce), finishes with
status ``stopped`` and keeps its best checkpoint; ``partial_epoch`` in result.json says how much of
the interrupted epoch it trained. Outside a campaign nobody writes the file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hydragnn_ensemble.run_dir import RunDir

PACE_AFTER_S = 30.0  # the first epoch of a process start tells its pace after this much training


class EpochChannel:
    """The trainer's side of the two files (``enabled``: this process writes the curve)."""

    def __init__(self, run_dir: str | Path, enabled: bool) -> None:
        self.paths = RunDir(Path(run_dir))
        self.enabled = enabled
        if enabled:
            self.paths.progress.unlink(missing_ok=True)  # a re-run's curve starts afresh

    def report(self, epoch: int, objective: float, heads: dict[str, tuple[float, float]], elapsed_s: float,
               epoch_s: float | None = None, train_s: float | None = None) -> None:
        """Append the line of a finished epoch (``epoch`` counted from 1; ``heads``: head -> (MAE, RMSE);
        ``epoch_s``: this epoch's seconds, ``train_s`` of them training)."""
        if not self.enabled:
            return
        line = {"epoch": int(epoch), "objective": _finite_or_none(objective),
                "heads": {k: {"val_mae": _finite_or_none(mae), "val_rmse": _finite_or_none(rmse)}
                          for k, (mae, rmse) in heads.items()},
                "elapsed_s": round(float(elapsed_s), 4)}
        if epoch_s is not None:
            line["epoch_s"] = round(float(epoch_s), 4)
        if train_s is not None:
            line["train_s"] = round(float(train_s), 4)
        with open(self.paths.progress, "a") as fh:
            fh.write(json.dumps(line) + "\n")

    def stop_reason(self) -> str | None:
        """The campaign's reason to stop, when it asked (read by the process that writes the curve)."""
        if not self.enabled:
            return None
        try:
            text = self.paths.stop.read_text(errors="replace").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"stop requested (reason unreadable: {exc})"
        return text[:500] or "stop requested by the campaign"


def _finite_or_none(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
