"""The trial's log file ``RUN_DIR/train.log`` (written by rank 0 only)."""

from __future__ import annotations

import os
import time
from collections import deque
from pathlib import Path

from hydragnn_ensemble.run_dir import LOG_NAME


class TrialLog:
    """Appends time-stamped lines to ``RUN_DIR/train.log`` and keeps the last ones in memory;
    with ``echo`` (the ``train`` command run by hand) each line is also printed on the terminal."""

    def __init__(self, run_dir: str | os.PathLike, enabled: bool = True, keep: int = 40, echo: bool = False) -> None:
        self.path = Path(run_dir) / LOG_NAME
        self.enabled = enabled
        self.echo = echo and enabled
        self.tail: deque[str] = deque(maxlen=keep)
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, message: str) -> None:
        """Write one (or several) line(s)."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        lines = [f"{stamp} {line}" for line in message.splitlines() or [""]]
        self.tail.extend(lines)
        if self.enabled:
            with open(self.path, "a") as fh:
                fh.write("\n".join(lines) + "\n")
        if self.echo:
            from tqdm import tqdm

            for line in message.splitlines():
                tqdm.write(line)  # above a progress bar, if one is shown

    def tail_text(self) -> str:
        return "\n".join(self.tail)
