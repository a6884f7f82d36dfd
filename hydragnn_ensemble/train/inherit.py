"""Starting a trial from another trial's training state (population-based training's exploit).

A PBT campaign places ``RUN_DIR/inherit_state.pt`` (a snapshot of a donor trial's
``training_state.pt``) in the directory of the trial that takes the donor over. Before the trainer
looks for its own state, :func:`adopt_inherited` (rank 0) turns the snapshot into this trial's own
training state: it checks that the donor trained the same model spec on the same data (its trial
directory and config may differ), applies this trial's optimizer hyperparameters
(:func:`retune`: the learning rate and its schedule scaled by new/donor learning rate, the weight
decay replaced) and writes the result as ``training_state.pt`` atomically under this trial's
identity, then removes the snapshot. The usual resume (:mod:`hydragnn_ensemble.train.resume`)
continues from there, so a crash-resume of the continuation resumes from its own copy, exactly.

The snapshot is untrusted input: anything but a complete state of the same model and data (missing,
torn, another model) is ignored with one line in train.log, and the trial starts from scratch.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable

from hydragnn_ensemble.config.schema import OptimizerSection
from hydragnn_ensemble.run_dir import RunDir
from hydragnn_ensemble.train.training_state import (StateIdentity, TrainingState, TrainingStateError,
                                                    read_training_state, write_training_state)
from hydragnn_ensemble.untrusted_files import remove_any

__all__ = ["adopt_inherited", "retune"]


def adopt_inherited(run_dir: RunDir, identity: StateIdentity, optimizer: OptimizerSection,
                    log: Callable[[str], None]) -> bool:
    """Make the snapshot in ``run_dir`` (if any) this trial's training state; True when adopted.
    The trial's own earlier state goes either way (it belongs to the attempt that was replaced)."""
    path = run_dir.inherit_state
    if not path.exists() and not path.is_symlink():
        return False
    remove_any(run_dir.training_state)
    try:
        donor = read_training_state(path)
        why = _foreign(identity, donor.identity)
        if why is None:
            write_training_state(run_dir.training_state, retune(donor, identity, optimizer))
    except FileNotFoundError:
        why = "it is gone"
    except (TrainingStateError, OSError, KeyError, TypeError, ValueError) as exc:
        why = str(exc)
    remove_any(path)
    if why is not None:
        log(f"{path.name} ignored: {why}; training starts from epoch 0")
        return False
    log(f"inherited the training state of trial directory {donor.identity.trial!r} after {donor.epoch} epoch(s) "
        f"(population-based training): learning rate {optimizer.learning_rate:g}, weight decay "
        f"{optimizer.weight_decay:g} from this trial's config")
    return True


def _foreign(own: StateIdentity, donor: StateIdentity) -> str | None:
    """Why a donor's state cannot start this trial (None: same model spec and data)."""
    if donor.model != own.model:
        return f"the donor {donor.trial!r} trained another model spec"
    if donor.data != own.data:
        return f"the donor {donor.trial!r} trained on another dataset (splits or normalisation)"
    return None


def retune(state: TrainingState, identity: StateIdentity, optimizer: OptimizerSection) -> TrainingState:
    """``state`` under ``identity`` with ``optimizer``'s hyperparameters: every learning rate of the
    optimizer and of its schedule scaled by (this learning rate / the donor config's), so the
    schedule's position is kept and an unscheduled rate becomes exactly this config's; the weight
    decay replaced."""
    donor_lr = float(json.loads(state.identity.config)["NeuralNetwork"]["Training"]["Optimizer"]["learning_rate"])
    ratio = optimizer.learning_rate / donor_lr
    groups = [dict(g, lr=g["lr"] * ratio, weight_decay=optimizer.weight_decay,
                   **({"initial_lr": g["initial_lr"] * ratio} if "initial_lr" in g else {}))
              for g in state.optimizer["param_groups"]]
    scheduler = _scaled_schedule(state.scheduler, ratio) if state.scheduler is not None else None
    return replace(state, identity=identity, optimizer=dict(state.optimizer, param_groups=groups), scheduler=scheduler)


def _scaled_schedule(sched: dict[str, Any], ratio: float) -> dict[str, Any]:
    """An LR schedule's state with its learning rates (lists or one number) times ``ratio``."""
    out = dict(sched)
    for key in ("base_lrs", "_last_lr", "min_lrs"):
        if isinstance(out.get(key), list):
            out[key] = [v * ratio for v in out[key]]
    if isinstance(out.get("eta_min"), (int, float)) and not isinstance(out["eta_min"], bool):
        out["eta_min"] = out["eta_min"] * ratio
    return out
