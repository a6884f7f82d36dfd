"""What one trial's run directory holds: the names every writer and reader of a trial uses.

    RUN_DIR/config.json        the trial's HydraGNN config (written by whoever launches the trial)
    RUN_DIR/result.json        :class:`hydragnn_ensemble.result.TrialResult` (the trainer, or the
                               campaign runtime for a process that died before writing one)
    RUN_DIR/checkpoint.pt      the best-epoch checkpoint (``result.json`` names it)
    RUN_DIR/train.log          rank 0's log; ``train.rank<R>.log`` for the other ranks
    RUN_DIR/progress.jsonl     one JSON line per finished epoch (:mod:`hydragnn_ensemble.train.progress`)
    RUN_DIR/stop               written by a campaign to stop the trial after its current epoch
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CONFIG_NAME = "config.json"
RESULT_NAME = "result.json"
CHECKPOINT_NAME = "checkpoint.pt"
LOG_NAME = "train.log"
PROGRESS_NAME = "progress.jsonl"
STOP_NAME = "stop"


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
    def progress(self) -> Path:
        return self.root / PROGRESS_NAME

    @property
    def stop(self) -> Path:
        return self.root / STOP_NAME

    def log(self, rank: int = 0) -> Path:
        """Rank 0's ``train.log``, ``train.rank<R>.log`` for the others."""
        return self.root / (LOG_NAME if rank == 0 else f"train.rank{rank}.log")

    def logs(self) -> list[Path]:
        """Every rank's log that exists."""
        return [p for p in (self.log(0), *sorted(self.root.glob("train.rank*.log"))) if p.exists()]
