"""The full training state after every epoch, and a cut trial resuming where it stopped."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from test_trainer import _run_two_ranks, config_dict, log_val_losses, write_toy_dataset

from hydragnn_ensemble.config import config_from_dict
from hydragnn_ensemble.result import TrialResult
from hydragnn_ensemble.train import train_trial
from hydragnn_ensemble.train.progress import EpochChannel
from hydragnn_ensemble.train.tensor_pack import PACK_BELOW, pack, unpack
from hydragnn_ensemble.train.training_state import (StateIdentity, TrainingState, TrainingStateError, capture_rng,
                                                    read_training_state, restore_rng, write_training_state)

torch.set_num_threads(1)
STATE = "training_state.pt"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return write_toy_dataset(tmp_path_factory.mktemp("data") / "toy.bp", 7)


class Cut(BaseException):
    """What a kill -9 looks like to the code after it: nothing more runs (not an Exception, so the
    trainer does not turn it into a failed result)."""


class CutAfter(EpochChannel):
    """The trainer's channel, cut right after it reported epoch ``k`` (the state of epoch k is on disk)."""

    def __init__(self, run_dir: Path, k: int) -> None:
        super().__init__(run_dir, enabled=True)
        self.k = k

    def report(self, epoch: int, *args, **kwargs) -> None:
        super().report(epoch, *args, **kwargs)
        if epoch == self.k:
            raise Cut


def train(dataset: Path, run_dir: Path, cut_after: int | None = None, **training) -> TrialResult | None:
    config = config_from_dict(config_dict(**training))
    channel = CutAfter(run_dir, cut_after) if cut_after is not None else None
    try:
        return train_trial(config, dataset, run_dir, device="cpu", progress=False, channel=channel)
    except Cut:
        return None


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoint.pt", weights_only=True)["state_dict"]


def progress_epochs(run_dir: Path) -> list[int]:
    return [json.loads(line)["epoch"] for line in (run_dir / "progress.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def uncut(tmp_path_factory, dataset) -> tuple[Path, TrialResult]:
    run_dir = tmp_path_factory.mktemp("runs") / "uncut"
    return run_dir, train(dataset, run_dir)


def test_the_state_round_trips(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1)
    model(torch.randn(5, 4)).sum().backward()
    optimizer.step()
    scheduler.step(0.5)
    rng = capture_rng(torch.device("cpu"))
    expected = (torch.rand(3), np.random.rand(3), random.random())
    identity = StateIdentity.of("7", {"a": [1, 2]}, {"hidden": 8}, {"splits": {"trainset": 10}})
    state = TrainingState(identity, 3, model.state_dict(), optimizer.state_dict(), scheduler.state_dict(), rng,
                          {"epoch": 1, "objective": 0.25, "state_dict": None, "val_errors": {"e": [0.1, 0.2]},
                           "val_per_atom": {}}, {"best": 0.25, "bad_epochs": 1}, 12.5, 1.5, [0.3, 0.4])
    size = write_training_state(tmp_path / STATE, state)
    assert size == (tmp_path / STATE).stat().st_size and not (tmp_path / f"{STATE}.tmp").exists()
    back = read_training_state(tmp_path / STATE)  # torch.load(..., weights_only=True)
    assert back.identity == identity and identity.mismatch(back.identity) is None
    assert (back.epoch, back.best, back.early_stopping, back.elapsed_s, back.reserve_s, back.inference_ms) == (
        3, state.best, state.early_stopping, 12.5, 1.5, [0.3, 0.4])
    assert all(torch.equal(back.model[k], v) for k, v in model.state_dict().items())
    other = torch.optim.AdamW(model.parameters(), lr=0.01)
    other.load_state_dict(back.optimizer)
    for p in model.parameters():
        assert torch.equal(other.state[p]["exp_avg"], optimizer.state[p]["exp_avg"])
    assert back.scheduler == scheduler.state_dict()
    torch.rand(7), np.random.rand(7), random.random()  # move every generator on, then restore
    assert restore_rng(back.rng, torch.device("cpu")) is None
    again = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(again[0], expected[0]) and np.array_equal(again[1], expected[1]) and again[2] == expected[2]
    assert StateIdentity.of("8", {"a": [1, 2]}, {"hidden": 8}, {"splits": {"trainset": 10}}).mismatch(identity) == (
        "it belongs to trial directory '7', not '8'")
    assert StateIdentity.of("7", {"a": [1, 3]}, {"hidden": 8}, {"splits": {"trainset": 10}}).mismatch(identity) == (
        "it was written for another config")


def test_small_tensors_are_packed_into_one_per_dtype_and_come_back(tmp_path):
    big = torch.arange(PACK_BELOW, dtype=torch.float32)
    obj = {"w": torch.randn(3, 4), "step": torch.tensor(7.0), "ids": torch.arange(5), "big": big,
           "groups": [{"betas": (0.9, 0.999), "params": [0, 1]}], "rng": torch.zeros(4, dtype=torch.uint8),
           "none": None, "nested": (torch.ones(2, dtype=torch.float64), "text")}
    skeleton, packed = pack(obj)
    assert sorted(packed["data"]) == ["float32@cpu", "float64@cpu", "int64@cpu", "uint8@cpu"]
    torch.save({"s": skeleton, "p": packed}, tmp_path / "x.pt")
    loaded = torch.load(tmp_path / "x.pt", weights_only=True)
    back = unpack(loaded["s"], loaded["p"])
    assert back["groups"] == obj["groups"] and back["none"] is None and back["nested"][1] == "text"
    for key in ("w", "step", "ids", "big", "rng"):
        assert back[key].dtype == obj[key].dtype and torch.equal(back[key], obj[key])
    assert torch.equal(back["nested"][0], obj["nested"][0])
    back["w"].add_(1.0)  # independent tensors, not views of one buffer
    assert torch.equal(back["step"], obj["step"])
    packed["metas"][0][1] = 10**6
    with pytest.raises(ValueError, match="outside its group"):
        unpack(skeleton, packed)


def test_a_cut_trial_resumes_after_its_last_epoch_and_ends_bit_identical(tmp_path, dataset, uncut):
    uncut_dir, full = uncut
    run_dir = tmp_path / "cut"
    assert train(dataset, run_dir, cut_after=3) is None
    assert (run_dir / STATE).is_file() and not (run_dir / "result.json").exists()
    assert read_training_state(run_dir / STATE).epoch == 3
    resumed = train(dataset, run_dir)
    assert resumed.status == "completed" and resumed.resumed_from == 3
    assert (resumed.epochs, resumed.best_epoch, resumed.objective) == (full.epochs, full.best_epoch, full.objective)
    assert resumed.heads == full.heads
    a, b = weights(uncut_dir), weights(run_dir)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert progress_epochs(run_dir) == [4, 5, 6]  # the curve goes on counting
    assert log_val_losses(run_dir) == log_val_losses(uncut_dir)  # epochs 0-2 of the cut run, 3-5 resumed
    log = (run_dir / "train.log").read_text()
    assert "resumed from training_state.pt after 3 epoch(s)" in log and "training continues at epoch 3" in log
    # the trial ended by itself: its state is gone (its best checkpoint stays), the result says what it wrote
    assert not (run_dir / STATE).exists() and not (uncut_dir / STATE).exists()
    assert full.resumed_from is None and full.state_bytes > 0
    assert 0 < full.checkpoint_s_median <= full.checkpoint_s_max
    assert TrialResult.read(run_dir / "result.json") == resumed


def test_a_state_of_another_config_or_trial_is_ignored(tmp_path, dataset):
    run_dir = tmp_path / "a"
    assert train(dataset, run_dir, cut_after=2) is None
    other = tmp_path / "b"
    other.mkdir()
    shutil.copy(run_dir / STATE, other / STATE)
    result = train(dataset, run_dir, Optimizer={"learning_rate": 0.004})  # another config, same directory
    assert result.status == "completed" and result.resumed_from is None and progress_epochs(run_dir)[0] == 1
    assert ("training_state.pt ignored: it was written for another config; training starts from epoch 0"
            in (run_dir / "train.log").read_text())
    result = train(dataset, other)  # the same config, another trial's directory
    assert result.resumed_from is None and result.epochs == 6
    assert "training_state.pt ignored: it belongs to trial directory 'a', not 'b'" in (other / "train.log").read_text()


def test_a_torn_state_is_ignored_with_a_line_in_the_log(tmp_path, dataset, uncut):
    run_dir = tmp_path / "torn"
    assert train(dataset, run_dir, cut_after=2) is None
    data = (run_dir / STATE).read_bytes()
    (run_dir / STATE).write_bytes(data[: len(data) // 2])  # what a machine crash may leave
    with pytest.raises(TrainingStateError, match="not a readable training state"):
        read_training_state(run_dir / STATE)
    result = train(dataset, run_dir)
    assert result.status == "completed" and result.resumed_from is None
    assert result.objective == uncut[1].objective
    assert "training_state.pt ignored: not a readable training state" in (run_dir / "train.log").read_text()


def test_a_state_that_does_not_load_is_undone_and_ignored(tmp_path, dataset, uncut):
    run_dir = tmp_path / "unfit"
    assert train(dataset, run_dir, cut_after=2) is None
    state = read_training_state(run_dir / STATE)
    state.best = {"val_errors": {}}  # readable, its own identity, but not a state the trainer wrote
    write_training_state(run_dir / STATE, state)
    result = train(dataset, run_dir)
    assert result.resumed_from is None and result.objective == uncut[1].objective  # as if never cut
    assert "training_state.pt ignored: it does not fit this trial's model or optimizer (KeyError" in (
        run_dir / "train.log").read_text()


def test_a_failed_trial_keeps_its_state_for_the_retry(tmp_path, dataset):
    run_dir = tmp_path / "failed"
    assert train(dataset, run_dir, cut_after=2) is None
    result = train_trial(config_from_dict(config_dict()), tmp_path / "missing.bp", run_dir, device="cpu",
                         progress=False)
    assert result.status == "failed" and (run_dir / STATE).is_file()


def test_a_state_written_as_patience_ran_out_ends_at_once(tmp_path, dataset):
    settings = {"EarlyStopping": True, "patience": 1, "num_epoch": 10, "Optimizer": {"learning_rate": 0.02}}
    full = train(dataset, tmp_path / "uncut", **settings)
    assert full.status == "completed" and full.epochs < 10  # patience ran out
    run_dir = tmp_path / "patience"
    assert train(dataset, run_dir, cut_after=full.epochs, **settings) is None  # cut after its last epoch
    result = train(dataset, run_dir, **settings)
    assert (result.status, result.epochs, result.resumed_from) == ("completed", full.epochs, full.epochs)
    assert (result.best_epoch, result.objective) == (full.best_epoch, full.objective)
    after = (run_dir / "train.log").read_text().split("resumed from")[1]
    assert f"early stopping after epoch {full.epochs - 1}" in after and " val_loss " not in after


def train_on_two_ranks(config: Path, dataset: Path, run_dir: Path) -> None:
    """The real CLI on two processes into ``run_dir`` (a rendezvous file beside the config)."""
    _run_two_ranks(["train", str(config), "--dataset", str(dataset), "-o", str(run_dir), "--device", "cpu",
                    "--no-progress", "--world-size", "2", "--init-method", f"file://{config.parent / 'rendezvous'}"])


def test_every_rank_of_a_data_parallel_trial_resumes(tmp_path, dataset, uncut):
    """A state written by one process resumes on two (an out-of-memory retry on more slots): both
    ranks load it, and the run ends where the uncut one did, to the reduction order's rounding."""
    cfg = config_dict()
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    run_dir = tmp_path / "wider"
    assert train(dataset, run_dir, cut_after=3) is None
    train_on_two_ranks(tmp_path / "cfg.json", dataset, run_dir)
    result = TrialResult.read(run_dir / "result.json")
    assert (result.status, result.slots, result.resumed_from, result.epochs) == ("completed", 2, 3, 6)
    assert result.objective == pytest.approx(uncut[1].objective, rel=1e-3)
    assert progress_epochs(run_dir) == [4, 5, 6]


def test_an_old_result_json_still_reads(tmp_path):
    old = {"status": "completed", "objective": 0.5, "heads": {}, "num_parameters": 10, "epochs": 3,
           "best_epoch": 2, "wall_time_s": 1.0, "peak_memory_mb": 1.0, "slots": 1, "device": "cpu",
           "failure_reason": None, "traceback": None, "log_tail": None, "checkpoint": "checkpoint.pt",
           "partial_epoch": 0.0, "inference_ms_per_graph": None}
    (tmp_path / "result.json").write_text(json.dumps(old))
    result = TrialResult.read(tmp_path / "result.json")
    assert (result.resumed_from, result.state_bytes, result.checkpoint_s_median, result.checkpoint_s_max) == (
        None, None, None, None)
    assert TrialResult.from_journal(old) == result
    new = TrialResult("completed", objective=0.5, resumed_from=4, state_bytes=1000, checkpoint_s_median=0.01,
                      checkpoint_s_max=0.02)
    new.write(tmp_path / "new.json")
    assert TrialResult.read(tmp_path / "new.json") == new == TrialResult.from_journal(new.to_dict())


class MoveAfter(EpochChannel):
    """The trainer's channel; the campaign asks for a move (``RUN_DIR/move``) as epoch ``k`` is
    reported, and also a stop with ``and_stop`` (the stopper's verdict after the move was asked)."""

    def __init__(self, run_dir: Path, k: int, and_stop: bool = False) -> None:
        super().__init__(run_dir, enabled=True)
        self.k, self.and_stop = k, and_stop

    def report(self, epoch: int, *args, **kwargs) -> None:
        super().report(epoch, *args, **kwargs)
        if epoch == self.k:
            (self.paths.root / "move").write_text("moving from 1 to 2 slots\n")
            if self.and_stop:
                (self.paths.root / "stop").write_text("asha: below the rung's cut\n")


def test_a_moved_trial_stops_after_its_epoch_keeping_its_state_and_goes_on_wider(tmp_path, dataset, uncut):
    """A move request: the trial stops after the epoch it is in (never inside one) as ``stopped``,
    keeps its training state, and its continuation on two processes resumes from it and ends where
    the uncut run did, to the reduction order's rounding."""
    cfg = config_dict()
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    run_dir = tmp_path / "moving"
    moved = train_trial(config_from_dict(cfg), dataset, run_dir, device="cpu", progress=False,
                        channel=MoveAfter(run_dir, 2))
    assert (moved.status, moved.epochs, moved.partial_epoch) == ("stopped", 2, 0.0)
    assert "moving from 1 to 2 slots (after epoch 1)" == moved.failure_reason
    assert read_training_state(run_dir / STATE).epoch == 2  # kept for the continuation
    (run_dir / "move").unlink()  # the campaign clears its requests before the continuation starts
    train_on_two_ranks(tmp_path / "cfg.json", dataset, run_dir)
    result = TrialResult.read(run_dir / "result.json")
    assert (result.status, result.slots, result.resumed_from, result.epochs) == ("completed", 2, 2, 6)
    assert result.objective == pytest.approx(uncut[1].objective, rel=1e-3)
    assert progress_epochs(run_dir) == [3, 4, 5, 6]
    assert not (run_dir / STATE).exists()  # ended by itself


def test_a_stop_that_comes_with_a_move_wins_and_the_state_goes(tmp_path, dataset):
    run_dir = tmp_path / "stopped"
    result = train_trial(config_from_dict(config_dict()), dataset, run_dir, device="cpu", progress=False,
                         channel=MoveAfter(run_dir, 2, and_stop=True))
    assert (result.status, result.epochs) == ("stopped", 2) and result.failure_reason.startswith("asha:")
    assert not (run_dir / STATE).exists()
