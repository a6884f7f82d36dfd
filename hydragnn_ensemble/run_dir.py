"""What one trial's run directory holds: the names every writer and reader of a trial uses.

    RUN_DIR/config.json        the trial's HydraGNN config (written by whoever launches the trial)
    RUN_DIR/result.json        :class:`hydragnn_ensemble.result.TrialResult` (the trainer, or the
                               campaign runtime for a process that died before writing one)
    RUN_DIR/checkpoint.pt      the best-epoch checkpoint (``result.json`` names it)
    RUN_DIR/training_state.pt  the full training state after the last finished epoch, what a cut
                               trial resumes from (:mod:`hydragnn_ensemble.train.resume`); a re-run
                               in the same directory keeps it
    RUN_DIR/train.log          rank 0's log; ``train.rank<R>.log`` for the other ranks
    RUN_DIR/progress.jsonl     one JSON line per finished epoch (:mod:`hydragnn_ensemble.train.progress`)
    RUN_DIR/stop               written by a campaign to stop the trial after its current epoch
    RUN_DIR/move               written by a campaign to move the trial to other slots: it stops
                               after its current epoch (never inside one) and keeps its training
                               state, which the continuation on the new slots resumes from
    RUN_DIR/inherit_state.pt   placed by a PBT campaign (a hard link to a donor trial's training
                               state): the trainer starts from it instead of its own state
                               (:mod:`hydragnn_ensemble.train.inherit`)
    RUN_DIR/verdicts.json      written by a campaign before the start: the epochs after which the
                               trainer waits for the campaign's verdict, and how long at most
    RUN_DIR/go_on              written by a campaign: the last epoch its stopper let the trial go on after
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

CONFIG_NAME = "config.json"
RESULT_NAME = "result.json"
CHECKPOINT_NAME = "checkpoint.pt"
STATE_NAME = "training_state.pt"
LOG_NAME = "train.log"
PROGRESS_NAME = "progress.jsonl"
STOP_NAME = "stop"
MOVE_NAME = "move"
INHERIT_NAME = "inherit_state.pt"
VERDICTS_NAME = "verdicts.json"
GO_ON_NAME = "go_on"
VERDICT_POLL_S = 0.01  # how often a trainer waiting for the campaign's verdict looks for it


@dataclass(frozen=True)
class RunDir:
    """Paths of one trial's run directory."""

    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike) -> "RunDir":
        return cls(Path(path))

    @property
    def config(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def result(self) -> Path:
        return self.root / RESULT_NAME

    @property
    def checkpoint(self) -> Path:
        return self.root / CHECKPOINT_NAME

    @property
    def training_state(self) -> Path:
        return self.root / STATE_NAME

    @property
    def progress(self) -> Path:
        return self.root / PROGRESS_NAME

    @property
    def stop(self) -> Path:
        return self.root / STOP_NAME

    @property
    def move(self) -> Path:
        return self.root / MOVE_NAME

    def moved_away(self) -> bool:
        """The campaign asked this trial to move (and not to stop): its training state is kept."""
        return self.move.exists() and not self.stop.exists()

    @property
    def inherit_state(self) -> Path:
        return self.root / INHERIT_NAME

    @property
    def verdicts(self) -> Path:
        return self.root / VERDICTS_NAME

    @property
    def go_on(self) -> Path:
        return self.root / GO_ON_NAME

    def log(self, rank: int = 0) -> Path:
        """Rank 0's ``train.log``, ``train.rank<R>.log`` for the others."""
        return self.root / (LOG_NAME if rank == 0 else f"train.rank{rank}.log")

    def logs(self) -> list[Path]:
        """Every rank's log that exists (whatever a trial made of it: a link, a directory...)."""
        return [p for p in (self.log(0), *sorted(self.root.glob("train.rank*.log"))) if os.path.lexists(p)]


@dataclass(frozen=True)
class VerdictWait:
    """``RUN_DIR/verdicts.json``: after these epochs, wait at most ``wait_s`` for the verdict."""

    epochs: frozenset[int]
    wait_s: float

    def to_json(self) -> str:
        return json.dumps({"epochs": sorted(self.epochs), "wait_s": self.wait_s})

    @classmethod
    def read(cls, path: Path) -> "VerdictWait | None":
        """The file's wait, or None when there is none (or it cannot be read: then no wait)."""
        try:
            data = json.loads(path.read_text())
            return cls(frozenset(int(e) for e in data["epochs"]), float(data["wait_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def wait_after(self, run_dir: RunDir, epoch: int) -> float | None:
        """After ``epoch`` (counted from 1), if it is one where the campaign decides, wait (at most
        ``wait_s``) for its ``stop`` or a ``go_on`` naming this epoch or a later one; the seconds
        waited, or None where the campaign does not decide."""
        if epoch not in self.epochs:
            return None
        start = time.monotonic()
        while time.monotonic() - start < self.wait_s:
            if run_dir.stop.exists() or _go_on_epoch(run_dir.go_on) >= epoch:
                break
            time.sleep(VERDICT_POLL_S)
        return time.monotonic() - start


def _go_on_epoch(path: Path) -> int:
    """The epoch a ``go_on`` file names (0 when there is none or it does not read)."""
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0
