"""A trial's learning curve out, a campaign's stop request in: two files in the run directory.

After every epoch, rank 0 of a trial appends one JSON line to ``RUN_DIR/progress.jsonl``::

    {"epoch": 3, "objective": 0.0123, "heads": {"energy": {"val_mae": 0.041, "val_rmse": 0.06}},
     "elapsed_s": 12.5, "epoch_s": 3.1, "train_s": 2.6}

(``epoch``: epochs finished, from 1; ``objective``: that epoch's validation objective; ``heads``:
each head's validation MAE and RMSE in its unit, as in result.json, so that any campaign objective
key reads the same number from a line as from the result; ``elapsed_s``: since the trial started,
over its attempts (an attempt that resumed from the training state adds the seconds the state had
trained; its first line is the epoch after the state's: epochs keep counting);
``epoch_s``: this epoch's seconds, ``train_s`` of them training, the rest evaluation;
non-finite numbers are null). The campaign's agent reads new lines while the trial runs and forwards them to rank
0. To stop the trial, the agent writes ``RUN_DIR/stop`` (its text: the reason); the trainer looks for
it after each epoch and, during an epoch, every ``STOP_POLL_S`` seconds (a data-parallel trial at
each joint decision every few batches; all ranks agree through one all-reduce), finishes with
status ``stopped`` and keeps its best checkpoint; ``partial_epoch`` in result.json says how much of
the interrupted epoch it trained. Outside a campaign nobody writes the file.

At the stopper's rungs the stop would land part-way through the next epoch (the verdict travels
from the trainer's line to rank 0 and back). So a campaign writes ``RUN_DIR/verdicts.json``
before the start (``{"epochs": [3, 9], "wait_s": 2.0}``) and, when its stopper lets the trial go
on after such an epoch, ``RUN_DIR/go_on`` (its text: that epoch). After an epoch listed there the
trainer waits, at most ``wait_s``, for ``stop`` or for ``go_on`` naming that epoch or a later one.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hydragnn_ensemble.run_dir import RunDir, VerdictWait

PACE_AFTER_S = 30.0  # the first epoch of a process start tells its pace after this much training


class EpochChannel:
    """The trainer's side of the two files (``enabled``: this process writes the curve)."""

    def __init__(self, run_dir: str | Path, enabled: bool) -> None:
        self.paths = RunDir(Path(run_dir))
        self.enabled = enabled
        if enabled:
            self.paths.progress.unlink(missing_ok=True)  # a re-run's curve starts afresh
        self.verdicts = VerdictWait.read(self.paths.verdicts) if enabled else None

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

    def await_verdict(self, epoch: int) -> float | None:
        """After ``epoch`` (counted from 1), if the campaign decides there, wait (at most its
        ``wait_s``) for its stop or its go-on; the seconds waited, or None where it does not decide
        (:meth:`VerdictWait.wait_after`)."""
        return None if self.verdicts is None else self.verdicts.wait_after(self.paths, epoch)

    def stop_reason(self) -> str | None:
        """The campaign's reason to stop, when it asked (read by the process that writes the curve)."""
        return self._request(self.paths.stop, "stop")

    def move_reason(self) -> str | None:
        """The campaign's reason to move the trial to other slots after this epoch, when it asked
        (``RUN_DIR/move``: stop after the epoch, keeping the training state)."""
        return self._request(self.paths.move, "move")

    def _request(self, path: Path, what: str) -> str | None:
        """The text of one of the campaign's request files, or None when there is none."""
        if not self.enabled:
            return None
        try:
            text = path.read_text(errors="replace").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"{what} requested (reason unreadable: {exc})"
        return text[:500] or f"{what} requested by the campaign"


def _finite_or_none(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
