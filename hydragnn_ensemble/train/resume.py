"""Where a trial resumes from: its training state file, kept up to date by rank 0 after every
epoch and read by every rank at the start (:mod:`hydragnn_ensemble.train.training_state`).

Which runs resume: any start of the trainer whose run directory holds a complete training state of
the same trial (directory name), config, model spec and data continues after that state's epoch,
with the weights, optimizer, LR schedule, random generators, best epoch and patience counter
restored. In a campaign that is every re-run of a trial in its directory: after a kill -9 of the
campaign (``--resume`` re-runs the trials that were running as their next attempt), a retry after
a failure (node, device, out-of-memory kill: the retry on more slots resumes too), and a trial
process killed outside the campaign. A state of another trial, config, model or dataset, or a torn
or unreadable file, is ignored with one line in train.log, and training starts from epoch 1.

A trial that ends by itself (completed, early-stopped, stopped by the campaign, timeout, diverged)
removes its state once its result.json is written: a finished trial's directory keeps its best
checkpoint only, and training it again into the same directory starts afresh. A trial that fails
with an exception keeps it (a retry resumes). Each attempt gets the trial's whole time budget.

What is bit-identical: on the same device, world size and thread count, a resumed run ends with the
same weights, objective and metrics as an uncut one (``tests/core/test_training_resume.py``): the training
batches of an epoch are a function of (seed, epoch) alone (:func:`hydragnn_ensemble.train.batches.
epoch_plan`), so there is no loader state to restore, and the optimizer, the LR schedule, the
patience counter and every random generator are restored exactly. A resume on another world size
(an out-of-memory retry on more slots) or another kind of device continues the same training but
sums the gradients in another order (not bit-identical, equal to rounding); so do GPU kernels that
are not deterministic. The part of the epoch in progress at the cut is trained again. An epoch whose
state was written but whose report the campaign had not journaled yet is not: the re-run's first
report is the epoch after the state's, so the journal's curve skips that one epoch, and no epoch is
ever reported twice. The train.log and progress.jsonl of the cut attempt are its own (the campaign
moves them aside); ``elapsed_s`` in progress.jsonl goes on from the state's.
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hydragnn_ensemble.run_dir import RunDir
from hydragnn_ensemble.train.training_state import (StateIdentity, TrainingState, TrainingStateError,
                                                    capture_rng, read_training_state, restore_rng,
                                                    write_training_state)


class StateFile:
    """One trial's training state file: loads the state that belongs to ``identity`` and writes
    new ones (``writes``: this process writes, rank 0 of the trial), timing each write."""

    def __init__(self, path: Path, identity: StateIdentity, writes: bool) -> None:
        self.path, self.identity, self.writes = path, identity, writes
        self.write_s: list[float] = []  # seconds of each write of this attempt
        self.bytes: int | None = None  # the size of the last write

    def load(self) -> tuple[TrainingState | None, str | None]:
        """The state to resume from, or None and why it is ignored (None too when there is none)."""
        try:
            state = read_training_state(self.path)
        except FileNotFoundError:
            return None, None
        except (TrainingStateError, OSError) as exc:
            return None, str(exc)
        why = self.identity.mismatch(state.identity)
        return (None, why) if why is not None else (state, None)

    def write(self, state: TrainingState) -> float:
        """Write ``state`` (on the writing process); the seconds it took."""
        if not self.writes:
            return 0.0
        start = time.perf_counter()
        self.bytes = write_training_state(self.path, state)
        seconds = time.perf_counter() - start
        self.write_s.append(seconds)
        return seconds


def remove_state(run_dir: Path) -> None:
    """Remove a trial's training state (and a temporary file a cut write left): it ended by itself."""
    path = RunDir(run_dir).training_state
    for name in (path, path.with_name(path.name + ".tmp")):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


class Undo:
    """What a failed resume gives back: the weights, optimizer, LR schedule and random generators
    as they were before it began."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                 device: torch.device) -> None:
        self.model, self.optimizer, self.scheduler, self.device = model, optimizer, scheduler, device
        self.weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.optim = copy.deepcopy(optimizer.state_dict())
        self.sched = copy.deepcopy(scheduler.state_dict()) if scheduler is not None else None
        self.rng = capture_rng(device)

    def __call__(self) -> None:
        self.model.load_state_dict(self.weights)
        self.optimizer.load_state_dict(self.optim)
        if self.scheduler is not None:
            self.scheduler.load_state_dict(self.sched)
        restore_rng(self.rng, self.device)


def apply_state(state: TrainingState, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                device: torch.device) -> str | None:
    """Load ``state``'s weights, optimizer, LR schedule and random generators (a note when the CUDA
    generator could not be restored). Raises when they do not fit; the caller undoes then."""
    if (scheduler is None) != (state.scheduler is None):
        raise TrainingStateError("its LR schedule does not match the config's")
    model.load_state_dict(state.model)
    optimizer.load_state_dict(state.optimizer)
    if scheduler is not None:
        scheduler.load_state_dict(state.scheduler)
    return restore_rng(state.rng, device)
