"""The single-trial trainer: the unit the HPO scheduler launches.

``train_trial(config, data, run_dir)`` trains one HydraGNN-style model on one dataset file and
writes ``RUN_DIR/result.json`` (:class:`~hydragnn_ensemble.result.TrialResult`), the best-epoch
checkpoint ``RUN_DIR/checkpoint.pt``, the per-epoch log ``RUN_DIR/train.log`` and, after every
epoch, the full training state ``RUN_DIR/training_state.pt`` a cut trial resumes from
(:mod:`hydragnn_ensemble.train.resume` says which runs resume; removed when the trial ends by itself).

Choices (all visible in the config, see :mod:`hydragnn_ensemble.config.schema`):

* optimizer ``Training.Optimizer`` (AdamW by default); learning-rate schedule
  ``Training.lr_schedule`` = ``plateau`` (default; HydraGNN's ReduceLROnPlateau: factor 0.5,
  patience 5, min 1e-5, stepped on the validation objective) or ``cosine`` or ``none``;
* objective = task-weighted validation loss (normalised units) of the best epoch; early stopping
  on it when ``Training.EarlyStopping`` (``patience`` epochs);
* a non-finite loss stops the run as ``diverged``; the time budget stops it as ``timeout``; both
  keep the best epoch so far (checkpoint, objective, test metrics of the best weights);
* any exception becomes a ``failed`` result with the traceback.

After each epoch, in this order: the best checkpoint (when the epoch improved), the LR schedule's
and the patience counter's step, the training state, then the epoch's line in train.log and
progress.jsonl. So every epoch the campaign hears of is in the state a re-run resumes from: a
resumed attempt's first reported epoch is the one after its state's (epochs keep counting).
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import time
import traceback
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from hydragnn_ensemble.config import HydraConfig, config_to_model_spec, load_config, selected_heads
from hydragnn_ensemble.dataset_check import config_problems, dataset_facts
from hydragnn_ensemble.infrastructure import infrastructure_cause
from hydragnn_ensemble.result import HeadMetrics, TrialResult, TrialStatus
from hydragnn_ensemble.train.budget import EarlyStopping, TimeBudget
from hydragnn_ensemble.train.progress import EpochChannel
from hydragnn_ensemble.run_dir import CHECKPOINT_NAME, RESULT_NAME, STATE_NAME, RunDir
from hydragnn_ensemble.train.checkpoint import save_checkpoint, spec_to_dict
from hydragnn_ensemble.train.batches import EvalBatches
from hydragnn_ensemble.train.data import (FieldSelection, GraphSource, PreparedData, epoch_batches, open_source,
                                          prepare_data)
from hydragnn_ensemble.train.distributed import DistributedContext, ProcessGroup
from hydragnn_ensemble.train.log import TrialLog
from hydragnn_ensemble.train.losses import MultiHeadLoss
from hydragnn_ensemble.train.inherit import adopt_inherited
from hydragnn_ensemble.train.resume import StateFile, Undo, apply_state, remove_state
from hydragnn_ensemble.train.training_state import StateIdentity, TrainingState, capture_rng

DIVERGENCE_CHECK_EVERY = 16  # batches between finiteness checks of the running loss (one process)
STOP_POLL_S = 0.05  # one process: seconds of training between looks for the campaign's stop request


@dataclass
class EpochRun:
    """What one training pass did: its mean batch loss, why it ended early (if it did) and how
    much of the epoch it trained (``fraction``: batches done / batches in the epoch)."""

    loss: float
    diverged: bool = False
    out_of_time: bool = False
    graphs: int = 0
    stop_reason: str | None = None  # the campaign asked to stop during the epoch
    fraction: float = 1.0


def resolve_device(device: str | torch.device, ctx: DistributedContext) -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; CUDA picks the GPU of ``ctx.local_rank``."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' requested but CUDA is not available")
        local = ctx.local_rank if ctx.local_rank is not None else ctx.rank % torch.cuda.device_count()
        return torch.device("cuda", local)
    if device != "cpu":
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    return torch.device("cpu")


def peak_memory_mb(device: torch.device) -> float:
    """Peak GPU memory on CUDA, else the process's max RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


@dataclass
class EpochStats:
    """One finished epoch."""

    epoch: int
    train_loss: float
    val_objective: float
    lr: float
    train_time_s: float
    epoch_time_s: float
    graphs: int


@dataclass
class _Best:
    epoch: int | None = None
    objective: float = math.inf
    state: dict[str, torch.Tensor] | None = None
    val_errors: dict[str, tuple[float, float]] = field(default_factory=dict)
    val_per_atom: dict[str, float] = field(default_factory=dict)  # total-energy heads: MAE per atom

    def to_state(self, last_epoch: int) -> dict[str, Any]:
        """For the training state written after (0-based) ``last_epoch``: its weights are left out
        (None) when the best epoch is that one, whose weights the state holds anyway."""
        weights = None if self.state is None or self.epoch == last_epoch else self.state
        return {"epoch": self.epoch, "objective": self.objective, "state_dict": weights,
                "val_errors": {h: list(v) for h, v in self.val_errors.items()},
                "val_per_atom": dict(self.val_per_atom)}

    def restore(self, saved: dict[str, Any], weights: dict[str, torch.Tensor]) -> None:
        """From :meth:`to_state`'s dict; ``weights``: the state's own (for a None there)."""
        self.epoch, self.objective = saved["epoch"], float(saved["objective"])
        self.state = saved["state_dict"] if saved["state_dict"] is not None else weights
        self.val_errors = {h: (float(v[0]), float(v[1])) for h, v in saved["val_errors"].items()}
        self.val_per_atom = {h: float(v) for h, v in saved["val_per_atom"].items()}


class Trainer:
    """Trains one config on prepared data. Use :func:`train_trial` unless you need the parts."""

    def __init__(self, inputs: TrialInputs, run_dir: Path, *, device: torch.device, pg: ProcessGroup,
                 log: TrialLog, budget: TimeBudget, progress: bool = True,
                 channel: EpochChannel | None = None, balance: str = "cost") -> None:
        from hydragnn_ensemble.model import build_model

        config, data = inputs.config, inputs.data
        self.config, self.data, self.run_dir = config, data, run_dir
        self.device, self.pg, self.log, self.budget = device, pg, log, budget
        self.ctx = pg.ctx
        self.channel = channel if channel is not None else EpochChannel(run_dir, enabled=self.ctx.is_main)
        self.progress = progress and self.ctx.is_main
        self.dataset_heads = inputs.dataset_heads
        self.spec = inputs.spec
        tr = config.training
        torch.manual_seed(tr.seed)
        self.model: nn.Module = build_model(self.spec).to(device)
        if self.spec.energy_head is not None:  # the model's energy scale is per atom either way
            s = (data.normaliser[self.spec.energy_head] if self.spec.energy_per_atom
                 else data.per_node_stats[self.spec.energy_head])
            self.model.set_energy_normalisation(float(s.mean[0]), float(s.std[0]))
        pg.broadcast_parameters(self.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = self._make_optimizer()
        self.scheduler = self._make_scheduler()
        self.loss = MultiHeadLoss(self.spec.heads, data.normaliser, list(config.architecture.task_weights),
                                  tr.loss_function_type, tuple(getattr(self.model, "physical_heads", ())),
                                  device)
        # one process and N processes train on the same global batches, each process's share of
        # equal work (hydragnn_ensemble.train.batches); streamed splits read a batch in a few runs
        # of one window; one process reads and keeps whole windows, N processes their shares
        self.train_loader = epoch_batches(data, tr.batch_size, self.ctx.rank, self.ctx.world_size, tr.seed, balance)
        self.eval_loaders = {split: EvalBatches(data.splits[split], tr.batch_size, self.ctx.rank, self.ctx.world_size)
                             for split in ("valset", "testset")}
        self.autocast = (torch.autocast("cuda", dtype=torch.bfloat16)
                         if tr.mixed_precision and device.type == "cuda" else nullcontext())
        self.history: list[EpochStats] = []
        self.inference_ms: list[float] = []  # each validation pass: ms x processes per graph
        self.state_file = StateFile(RunDir(run_dir).training_state, self._identity(), writes=self.ctx.is_main)
        self.start_epoch = 0  # > 0: resumed from a training state after this many epochs
        self.elapsed_before = 0.0  # seconds the trial had trained before this attempt (its state's)
        self.checkpoint_s: list[float] = []  # each epoch: seconds writing the state and best checkpoint

    # construction helpers ----------------------------------------------------------------------
    def _make_optimizer(self) -> torch.optim.Optimizer:
        o = self.config.training.Optimizer
        if o.type == "AdamW":
            return torch.optim.AdamW(self.params, lr=o.learning_rate, weight_decay=o.weight_decay)
        if o.type == "Adam":
            return torch.optim.Adam(self.params, lr=o.learning_rate, weight_decay=o.weight_decay)
        if o.type == "SGD":
            return torch.optim.SGD(self.params, lr=o.learning_rate, momentum=0.9,
                                   weight_decay=o.weight_decay)
        return torch.optim.RMSprop(self.params, lr=o.learning_rate, weight_decay=o.weight_decay)

    def _make_scheduler(self):
        tr = self.config.training
        if tr.lr_schedule == "plateau":
            return torch.optim.lr_scheduler.ReduceLROnPlateau(
                self.optimizer, mode="min", factor=0.5, patience=5,
                min_lr=min(1e-5, tr.Optimizer.learning_rate))
        if tr.lr_schedule == "cosine":
            return torch.optim.lr_scheduler.CosineAnnealingLR(
                self.optimizer, T_max=tr.num_epoch, eta_min=tr.Optimizer.learning_rate * 0.01)
        return None

    def _identity(self) -> StateIdentity:
        """What this trial's training state must match to be resumed (:class:`StateIdentity`)."""
        data = {"splits": {s: self.data.num_graphs(s) for s in ("trainset", "valset", "testset")},
                "normalisation": self.data.normaliser.to_dict(), "x_stats": self.data.x_stats.to_dict()}
        return StateIdentity.of(Path(self.run_dir).resolve().name, self.config.to_dict(), spec_to_dict(self.spec), data)

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.params)

    # one pass over the training split ----------------------------------------------------------
    def train_epoch(self, epoch: int) -> EpochRun:
        """One training pass; it ends early on a non-finite loss, the time budget, or a stop the
        campaign asked for (looked for every :data:`STOP_POLL_S` seconds, or at each joint decision
        of a data-parallel trial), so a stop lands within a fraction of an epoch of the request.
        Epoch 0 is not interrupted for a stop: a stopper decides on reported epochs, and a request
        that is there before any is honoured after epoch 0, with a checkpoint to keep."""
        self.model.train()
        self.train_loader.set_epoch(epoch)
        device, loss_fn, dist_on = self.device, self.loss, self.ctx.is_distributed
        running = torch.zeros((), dtype=torch.float64, device=device)
        n_batches = graphs = 0
        diverged = out_of_time = False
        stop: str | None = None
        look_for_stop = epoch > 0
        next_poll = self.budget.now() + STOP_POLL_S
        loader = self.train_loader
        total_batches = max(len(loader), 1)
        if self.progress:
            from tqdm import tqdm

            loader = tqdm(loader, desc=f"epoch {epoch}", leave=False, unit="batch")
        for batch in loader:
            if epoch == self.start_epoch and n_batches == 0:  # what the trial's start cost: process, data, first read
                self.log.write(f"first training batch after {self.budget.elapsed:.3f} s")
            batch = batch.to(device, non_blocking=True)
            counts = loss_fn.local_counts(batch)
            graphs += batch.num_graphs
            if dist_on:
                # global element counts per head (a device tensor: no host sync here) ...
                counts = self.pg.all_reduce_sum(torch.tensor(counts, dtype=torch.float32, device=device))
                # ... and every few batches a joint decision to stop (time, non-finite loss, campaign)
                if n_batches % DIVERGENCE_CHECK_EVERY == 0:
                    out_of_time, diverged, stop = self._joint_decision(running, look_for_stop)
                    if out_of_time or diverged or stop:
                        break
            with self.autocast:
                out = self.model(batch)
            loss = loss_fn.train_loss(out, batch, counts)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.pg.sum_gradients(self.params)
            self.optimizer.step()
            running += loss.detach()
            n_batches += 1
            if not dist_on:
                if n_batches % DIVERGENCE_CHECK_EVERY == 0 and not bool(torch.isfinite(running)):
                    diverged = True
                    break
                if self.budget.expired():
                    out_of_time = True
                    break
                if look_for_stop and self.budget.now() >= next_poll:
                    next_poll = self.budget.now() + STOP_POLL_S
                    stop = self.channel.stop_reason()
                    if stop is not None:
                        break
        total = self.pg.all_reduce_sum(running.reshape(1).clone())
        mean = float(total[0]) / max(n_batches, 1)
        if not math.isfinite(mean):
            diverged = True
        return EpochRun(mean, diverged, out_of_time, graphs, stop, min(n_batches / total_batches, 1.0))

    def _joint_decision(self, running: torch.Tensor, look_for_stop: bool) -> tuple[bool, bool, str | None]:
        """(out of time, diverged, the campaign's stop reason) agreed by every rank of a
        data-parallel trial: one all-reduce of three flags (rank 0 alone reads the stop file)."""
        asked = self.channel.stop_reason() if look_for_stop else None
        flags = torch.stack([torch.tensor(float(self.budget.expired()), dtype=torch.float64, device=self.device),
                             (~torch.isfinite(running)).to(torch.float64),
                             torch.tensor(float(asked is not None), dtype=torch.float64, device=self.device)])
        out_of_time, diverged, stop = (v > 0 for v in self.pg.all_reduce_sum(flags).tolist())
        return out_of_time, diverged, (asked or "stop requested by the campaign") if stop else None

    # evaluation ---------------------------------------------------------------------------------
    def evaluate(self, split: str) -> torch.Tensor:
        """All-reduced error accumulator of ``split`` (see :class:`MultiHeadLoss`)."""
        self.model.eval()
        acc = self.loss.new_accumulator(self.device)
        grad = torch.enable_grad() if self.spec.energy_head is not None else torch.no_grad()
        with grad:
            for batch in self.eval_loaders[split]:
                batch = batch.to(self.device, non_blocking=True)
                with self.autocast:
                    out = self.model(batch)
                self.loss.accumulate(acc, out, batch)
        return self.pg.all_reduce_sum(acc)

    def _save(self, best: _Best) -> float:
        """Write the best checkpoint (rank 0); the seconds it took."""
        if not self.ctx.is_main:
            return 0.0
        start = time.perf_counter()
        info: dict[str, Any] = {
            "node_feature_dim": self.data.node_feature_dim,
            "edge_dim": self.data.edge_dim,
            "has_atomic_numbers": self.data.has_atomic_numbers,
            "degree_histogram": self.data.degree_histogram,
            "radius": self.spec.radius,
            "x_columns": list(self.config.variables.input_node_features),
            "x_stats": self.data.x_stats.to_dict(),
        }
        save_checkpoint(self.run_dir / CHECKPOINT_NAME, model=self.model, config=self.config,
                        spec=self.spec, dataset_heads=self.dataset_heads,
                        normaliser=self.data.normaliser, data_info=info, epoch=best.epoch,
                        objective=best.objective, state_dict=best.state)
        return time.perf_counter() - start

    def _save_state(self, epochs_done: int, best: _Best, stopper: EarlyStopping | None) -> float:
        """Write the training state after ``epochs_done`` epochs (rank 0); the seconds it took."""
        if not self.state_file.writes:
            return 0.0
        state = TrainingState(
            self.state_file.identity, epochs_done, self.model.state_dict(), self.optimizer.state_dict(),
            self.scheduler.state_dict() if self.scheduler is not None else None, capture_rng(self.device),
            best.to_state(epochs_done - 1),
            {"best": stopper.best, "bad_epochs": stopper.bad_epochs} if stopper is not None else None,
            self.elapsed_before + self.budget.elapsed, self.budget.reserve_s, list(self.inference_ms))
        return self.state_file.write(state)

    def _resume(self, best: _Best, stopper: EarlyStopping | None) -> int:
        """Continue from the run directory's training state where it is this trial's (every rank
        of a data-parallel trial reads it; they resume only if all read the same epoch); the epoch
        to start at (0: from scratch, with one line in train.log saying why a state was ignored)."""
        if self.ctx.is_main:  # PBT: a donor's snapshot becomes this trial's own state first
            adopt_inherited(RunDir(self.run_dir), self.state_file.identity, self.config.training.Optimizer,
                            self.log.write)
        if self.ctx.is_distributed:  # the others read the state once rank 0 has written it
            self.pg.all_reduce_sum(torch.zeros(1, dtype=torch.float64, device=self.device))
        state, why = self.state_file.load()
        undo, note, restored = None, None, _Best()
        if state is not None:
            undo = Undo(self.model, self.optimizer, self.scheduler, self.device)
            try:
                note = apply_state(state, self.model, self.optimizer, self.scheduler, self.device)
                restored.restore(state.best, state.model)
                patience = state.early_stopping if stopper is not None else None
                patience = (float(patience["best"]), int(patience["bad_epochs"])) if patience is not None else None
                inference_ms = [float(v) for v in state.inference_ms]
            except Exception as exc:  # a state that passed the identity check but does not load
                undo()
                state, why = None, f"it does not fit this trial's model or optimizer ({_one_line(exc)})"
        if self.ctx.is_distributed:
            mine = float(state.epoch) if state is not None else 0.0
            hi, neg_lo = self.pg.all_reduce_max(torch.tensor([mine, -mine], dtype=torch.float64,
                                                             device=self.device)).tolist()
            if hi != -neg_lo and state is not None:
                undo()
            if hi != -neg_lo:
                state, why = None, "the trial's processes did not all read the same state"
        if state is None:
            if why is not None:
                self.log.write(f"{STATE_NAME} ignored: {why}; training starts from epoch 0")
            return 0
        best.__dict__.update(restored.__dict__)
        if patience is not None:
            stopper.best, stopper.bad_epochs = patience
        self.elapsed_before, self.budget.reserve_s = float(state.elapsed_s), float(state.reserve_s)
        self.inference_ms = inference_ms
        self._save(best)  # the best checkpoint agrees with the state (a cut may come between the two writes)
        self.log.write(f"resumed from {STATE_NAME} after {state.epoch} epoch(s): weights, optimizer, LR schedule, "
                       f"random generators and best epoch {best.epoch} restored; training continues at epoch "
                       f"{state.epoch}" + (f" ({note})" if note else ""))
        return state.epoch

    # the loop -----------------------------------------------------------------------------------
    def fit(self) -> TrialResult:
        tr = self.config.training
        stopper = EarlyStopping(tr.patience) if tr.EarlyStopping else None
        best = _Best()
        n_val, n_test = self.data.num_graphs("valset"), self.data.num_graphs("testset")
        self.log.write(f"model {self.spec.mpnn_type}: {self.num_parameters} parameters; heads "
                       f"{self.spec.heads.names}; {self.data.num_graphs('trainset')}/{n_val}/{n_test} "
                       f"train/val/test graphs; {self.ctx.world_size} process(es) on {self.device}")
        start = self.start_epoch = self._resume(best, stopper)
        status, reason, epochs_done, partial = TrialStatus.COMPLETED, None, start, 0.0
        if start > 0 and stopper is not None and stopper.bad_epochs >= tr.patience:  # written as it stopped
            self.log.write(f"early stopping after epoch {start - 1}: no improvement in {tr.patience} epochs")
            start = tr.num_epoch
        for epoch in range(start, tr.num_epoch):
            t0 = self.budget.now()
            run = self.train_epoch(epoch)
            train_loss, graphs = run.loss, run.graphs
            t_train = self.budget.now() - t0
            if run.diverged or run.out_of_time:
                status, reason = ((TrialStatus.DIVERGED, f"non-finite training loss in epoch {epoch}") if run.diverged else
                                  (TrialStatus.TIMEOUT, f"time budget of {self.budget.budget_s:g} s reached in epoch {epoch}"))
                self.log.write(f"epoch {epoch}: {reason}; stopping")
                break
            if run.stop_reason is not None:  # asked during the epoch: its partial training is not evaluated
                partial = run.fraction
                status, reason = TrialStatus.STOPPED, f"{run.stop_reason} (during epoch {epoch}, {100 * partial:.0f}% trained)"
                self.log.write(f"stopped by the campaign during epoch {epoch} ({100 * partial:.0f}% of it trained): "
                               f"{run.stop_reason}")
                break
            t1 = self.budget.now()
            acc = self.evaluate("valset")
            t_val = self.budget.now() - t1
            self.inference_ms.append(1000.0 * t_val * self.ctx.world_size / max(n_val, 1))
            # keep enough time to evaluate the test split with the best weights at the end
            self.budget.reserve_s = t_val * (1.0 + n_test / max(n_val, 1)) + 1.0
            objective = self.loss.objective(acc)
            epochs_done = epoch + 1
            if not math.isfinite(objective):
                status, reason = TrialStatus.DIVERGED, f"non-finite validation loss in epoch {epoch}"
                self.log.write(f"epoch {epoch}: {reason}; stopping")
                break
            if self._record_epoch(epoch, best, acc, objective, train_loss, t_train, t0, graphs, stopper):
                self.log.write(f"early stopping after epoch {epoch}: no improvement in {tr.patience} epochs")
                break
            # a stop that arrives after the last epoch changes nothing: the trial completed its budget
            asked = self._campaign_stop(epoch + 1) if epoch + 1 < tr.num_epoch else None
            if asked is not None:
                status, reason = TrialStatus.STOPPED, f"{asked} (after epoch {epoch})"
                self.log.write(f"stopped by the campaign after epoch {epoch}: {asked}")
                break
            if self.budget.expired() and epoch + 1 < tr.num_epoch:
                status, reason = TrialStatus.TIMEOUT, f"time budget of {self.budget.budget_s:g} s reached after epoch {epoch}"
                self.log.write(reason)
                break
        return self._finish(best, status, reason, epochs_done, partial)

    def _record_epoch(self, epoch: int, best: _Best, acc: torch.Tensor, objective: float, train_loss: float,
                      t_train: float, t0: float, graphs: int, stopper: EarlyStopping | None) -> bool:
        """Keep the best weights, step the LR schedule and the patience counter, write the training
        state, then log the epoch and report it to the campaign; True when patience ran out."""
        lr = self.optimizer.param_groups[0]["lr"]
        improved = objective < best.objective
        errors = self.loss.head_errors(acc)
        written = 0.0
        if improved:
            best.epoch, best.objective = epoch, objective
            best.state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            best.val_errors = errors
            best.val_per_atom = self.loss.per_atom_errors(acc)
            written += self._save(best)
        if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            self.scheduler.step(objective)
        elif self.scheduler is not None:
            self.scheduler.step()
        patience_out = stopper is not None and stopper.step(objective)
        state_s = self._save_state(epoch + 1, best, stopper)
        written += state_s
        self.checkpoint_s.append(written)
        stats = EpochStats(epoch, train_loss, objective, lr, t_train, self.budget.now() - t0, graphs)
        self.history.append(stats)
        self.log.write(
            f"epoch {epoch} train_loss {train_loss:.6g} val_loss {objective:.6g} lr {lr:.3g} "
            f"train_time {t_train:.3f}s epoch_time {stats.epoch_time_s:.3f}s checkpoint_time {written:.4f}s "
            f"(state {state_s:.4f}s) "
            f"best {best.objective:.6g} (epoch {best.epoch}){' *' if improved else ''}")
        self.channel.report(epoch + 1, objective, errors, self.elapsed_before + self.budget.elapsed,
                            stats.epoch_time_s, t_train)
        return patience_out

    def _campaign_stop(self, epochs_done: int) -> str | None:
        """The campaign's reason to stop now (``RUN_DIR/stop``, or ``RUN_DIR/move``: to go on
        from the training state on other slots), agreed by every rank; None to go on.
        Where the campaign's stopper decides after ``epochs_done``, its verdict is waited for first
        (a bounded moment, :meth:`EpochChannel.await_verdict`)."""
        waited = self.channel.await_verdict(epochs_done)
        if waited is not None:
            self.log.write(f"waited {waited:.3f} s for the campaign's verdict after epoch {epochs_done - 1}")
        reason = self.channel.stop_reason() or self.channel.move_reason()  # a move: after the epoch only
        if self.ctx.world_size > 1:
            flag = torch.tensor([1.0 if reason is not None else 0.0], dtype=torch.float64, device=self.device)
            if float(self.pg.all_reduce_sum(flag)[0]) > 0 and reason is None:
                reason = "stop requested by the campaign"
        return reason

    def _finish(self, best: _Best, status: str, reason: str | None, epochs: int, partial: float = 0.0) -> TrialResult:
        heads: dict[str, HeadMetrics] = {}
        if best.state is not None:
            self.model.load_state_dict(best.state)
            test_acc = self.evaluate("testset")
            test, test_per_atom = self.loss.head_errors(test_acc), self.loss.per_atom_errors(test_acc)
            for h in self.spec.heads:
                vm, vr = best.val_errors[h.name]
                tm, trm = test[h.name]
                heads[h.name] = HeadMetrics(val_mae=vm, val_rmse=vr, test_mae=tm, test_rmse=trm, unit=h.unit,
                                            val_mae_per_atom=best.val_per_atom.get(h.name),
                                            test_mae_per_atom=test_per_atom.get(h.name))
            self.log.write("best epoch {}: objective {:.6g}; ".format(best.epoch, best.objective) + "; ".join(
                f"{n} val MAE {m.val_mae:.4g} test MAE {m.test_mae:.4g} {m.unit}".rstrip() for n, m in heads.items()))
        else:
            heads = {h.name: HeadMetrics(unit=h.unit) for h in self.spec.heads}
        mem = self.pg.all_reduce_max(torch.tensor([peak_memory_mb(self.device)], dtype=torch.float64,
                                                  device=self.device))
        return TrialResult(
            status=status,
            objective=best.objective if best.state is not None else None,
            heads=heads,
            num_parameters=self.num_parameters,
            epochs=epochs,
            best_epoch=best.epoch,
            peak_memory_mb=float(mem[0]),
            slots=self.ctx.world_size,
            device=self.device.type,
            failure_reason=reason if status != TrialStatus.COMPLETED else None,
            checkpoint=CHECKPOINT_NAME if best.state is not None else None,
            partial_epoch=round(partial, 4),
            inference_ms_per_graph=float(statistics.median(self.inference_ms)) if self.inference_ms else None,
            resumed_from=self.start_epoch or None,
            state_bytes=self.state_file.bytes,
            checkpoint_s_median=float(statistics.median(self.checkpoint_s)) if self.checkpoint_s else None,
            checkpoint_s_max=max(self.checkpoint_s, default=None),
        )


def fields_for(config: HydraConfig, heads) -> FieldSelection:
    """The graph fields the config's model and loss read."""
    from hydragnn_ensemble.model.layers import layer_class

    from hydragnn_ensemble.config.to_spec import builder_layer_name

    geometry = config.potential_mode or layer_class(builder_layer_name(config.architecture.mpnn_type)).needs_geometry
    return FieldSelection(
        target_keys=tuple(h.key for h in heads),
        x_columns=tuple(config.variables.input_node_features),
        edge_attr=bool(config.architecture.edge_features),
        geometry=geometry,
    )


@dataclass(frozen=True)
class TrialInputs:
    """What a trial trains on, checked once: its own copy of the config (output names filled in),
    the prepared splits, the dataset's head registry, the model spec (computed once, here) and the
    warnings for the trial's log."""

    config: HydraConfig
    data: PreparedData
    dataset_heads: Any
    spec: Any  # hydragnn_ensemble.model.spec.ModelSpec
    warnings: tuple[str, ...] = ()


def prepare_trial(config: HydraConfig, source: GraphSource, where: str) -> TrialInputs:
    """Check ``config`` against the dataset (the check a campaign's rank 0 runs before its first
    trial, :mod:`hpo.preflight`), prepare the splits and derive the model spec. The caller's config
    is not changed."""
    from hydragnn_ensemble.config.schema import PNA_MPNN_TYPES

    facts = dataset_facts(source, where)
    check = config_problems(config, facts)
    check.raise_errors(where)
    config = config.model_copy(deep=True)
    heads = selected_heads(config, source.heads)
    if config.variables.output_names is None:  # named by output_index (HydraGNN): write the names down
        config.variables.output_names = [h.name for h in heads]
    tr, arch = config.training, config.architecture
    prepared = prepare_data(
        source, heads, fields_for(config, heads), where=where,
        skip_nan_targets=tr.skip_nan_targets, preload=tr.preload,
        degree_histogram=arch.mpnn_type in PNA_MPNN_TYPES and arch.pna_deg is None,
    )
    spec = config_to_model_spec(
        config, source.heads, prepared.node_feature_dim, prepared.edge_dim, prepared.degree_histogram,
        use_atomic_numbers=prepared.has_atomic_numbers, radius=facts.cutoff)
    return TrialInputs(config, prepared, source.heads, spec, tuple(check.warnings))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n"))
    return f"{type(exc).__name__}: {text}"[:2000]


def _fit(config: HydraConfig, data: str | os.PathLike | GraphSource, run_dir: Path, dev: torch.device,
         pg: ProcessGroup, log: TrialLog, budget: TimeBudget, progress: bool,
         channel: EpochChannel | None) -> TrialResult:
    """Prepare the data (a file is closed as soon as everything is in memory) and train."""
    where = str(data) if isinstance(data, (str, os.PathLike)) else type(data).__name__
    source = open_source(data)
    owned = source is not data
    try:
        inputs = prepare_trial(config, source, where)
        if owned and not inputs.data.streamed:
            source.close()  # everything is in memory now
            owned = False
        for warning in inputs.warnings:
            log.write(f"warning: {warning}")
        for split, idx in inputs.data.skipped.items():
            log.write(f"skipped {len(idx)} {split} sample(s) with NaN/inf targets: {idx[:20]}")
        trainer = Trainer(inputs, run_dir, device=dev, pg=pg, log=log, budget=budget, progress=progress,
                          channel=channel)
        return trainer.fit()
    finally:
        if owned:
            source.close()


def train_trial(
    config: HydraConfig | str | os.PathLike,
    data: str | os.PathLike | GraphSource,
    run_dir: str | os.PathLike,
    *,
    time_budget_s: float | None = None,
    device: str | torch.device = "auto",
    progress: bool = True,
    distributed: DistributedContext | None = None,
    raise_errors: bool = False,
    started_at: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    channel: EpochChannel | None = None,
) -> TrialResult:
    """Train one trial and write ``RUN_DIR/result.json`` (see the module docstring).

    ``data`` is a dataset file (``.bp``) or any :class:`GraphSource`. ``time_budget_s`` overrides
    ``Training.time_budget_s``. ``distributed`` says this process's rank in a data-parallel trial
    (default: one process). Exceptions become a ``failed`` result (with traceback) unless
    ``raise_errors``. ``started_at`` (``time.monotonic()``) is when the time budget started, if
    earlier than this call (the CLI passes its own start, so that start-up counts). ``clock``
    replaces ``time.monotonic`` for the budget and the epoch timings (a test's virtual clock).
    ``channel`` receives every epoch and says when to stop (default: the run directory's
    progress.jsonl and stop file, :class:`EpochChannel`; an in-process driver passes its own).
    An ``OSError`` that is the machine's fault (full disk, I/O error:
    :mod:`hydragnn_ensemble.infrastructure`) is raised, not turned into a failed result.
    """
    budget = TimeBudget(None, start=started_at, clock=clock)
    ctx = distributed or DistributedContext()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = TrialLog(run_dir, enabled=ctx.is_main, echo=progress)
    dev = torch.device("cpu")
    try:
        if not isinstance(config, HydraConfig):
            config = load_config(config)
        budget.budget_s = time_budget_s if time_budget_s is not None else config.training.time_budget_s
        dev = resolve_device(device, ctx)
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        with ProcessGroup(ctx, dev) as pg:
            result = _fit(config, data, run_dir, dev, pg, log, budget, progress, channel)
    except Exception as exc:  # every failure must end as a result.json, never a silent crash
        if raise_errors or infrastructure_cause(exc) is not None:
            raise  # a full disk is the machine's fault, not this trial's: ``train`` exits 75
        tb = traceback.format_exc()
        log.write(f"failed: {_one_line(exc)}\n{tb}")
        result = TrialResult(status=TrialStatus.FAILED, failure_reason=_one_line(exc), traceback=tb,
                             slots=ctx.world_size, device=dev.type,
                             peak_memory_mb=peak_memory_mb(dev))
    result.wall_time_s = budget.elapsed
    if ctx.is_main:
        result.log_tail = result.log_tail or (log.tail_text() if result.status == TrialStatus.FAILED else None)
        result.write(run_dir / RESULT_NAME)
        # ended by itself: nothing to resume (a failure keeps it, and so does a move: its
        # continuation on other slots resumes from it)
        moved = result.status == TrialStatus.STOPPED and RunDir(run_dir).moved_away()
        if result.status != TrialStatus.FAILED and not moved:
            remove_state(run_dir)
    return result
