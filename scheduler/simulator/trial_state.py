"""What a trial's training state costs and buys in the simulated world, from measurement.

The trainer writes its full training state after every epoch (:mod:`hydragnn_ensemble.train.
resume`): each epoch takes ``1 + checkpoint_share`` times its training and evaluation. An attempt
that starts from a state (a malleable trial's continuation after a move, and, with
``resume_retries``, a retry after a failure: the runtime's trainer resumes both) trains only the
epochs after it, and its start-up is the trial's own plus ``restart_extra_s`` (stopping after the
epoch, the exit, rank 0's round trip, the rendezvous of a wider process group, reading the state;
the runtime's placement charges a move the start-up the trial showed). Free (the default): no write
cost, retries from scratch, a continuation's start-up as the first, which is what the simulator
modelled before the training state existed.

``measured()`` reads ``bench/data/trial_state_costs.json``: the write share from
``python -m bench.checkpoint_resume`` and the restart's extra seconds from ``python -m
bench.malleable_campaign`` (both on the demo's trials, on CPU; the file says which runs). Error
model: one share and one extra start-up for every trial (the demo's spread: write share median
0.45%, max 3.4%; the moves measured are listed in the file). Measured on CPU with a fork server:
a GPU node's start-up (imports, CUDA/ROCm context) is longer, and so may a restart be.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

MEASURED = Path(__file__).resolve().parents[2] / "bench" / "data" / "trial_state_costs.json"


class TrialStateCostsError(ValueError):
    """A costs file that cannot be read (names the file and key)."""


@dataclass(frozen=True)
class TrialStateCosts:
    """The training state's costs in the simulated world (see the module docstring)."""

    checkpoint_share: float = 0.0  # each epoch's state write, as a share of the epoch
    restart_extra_s: float = 0.0  # seconds an attempt that resumes from a state adds to the trial's start-up
    resume_retries: bool = False  # a retry after a failure resumes after the failed attempt's last epoch

    @classmethod
    def read(cls, path: Path) -> "TrialStateCosts":
        """The costs a bench wrote to ``path``."""
        try:
            data = json.loads(Path(path).read_text())
            costs = cls(float(data["checkpoint_share"]), float(data["restart_extra_s"]), bool(data["resume_retries"]))
        except (OSError, ValueError, TypeError) as exc:
            raise TrialStateCostsError(f"{path}: not a trial-state costs file ({exc})") from None
        except KeyError as exc:
            raise TrialStateCostsError(f"{path}: no key {exc}") from None
        if not (0.0 <= costs.checkpoint_share < 1.0 and costs.restart_extra_s >= 0.0):
            raise TrialStateCostsError(f"{path}: checkpoint_share must be in [0, 1) and restart_extra_s >= 0")
        return costs

    @classmethod
    def measured(cls) -> "TrialStateCosts":
        """The measurement shipped with the project (:data:`MEASURED`)."""
        return cls.read(MEASURED)
