"""A trial starting from a donor trial's training state (population-based training's exploit):
the donor's weights, this config's learning rate and weight decay, its own identity afterwards (a
crash-resume of the continuation ends exactly as an uncut one), and untrusted snapshots refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from test_trainer import config_dict, write_toy_dataset
from test_training_resume import STATE, Cut, CutAfter, progress_epochs

from hydragnn_ensemble.config import config_from_dict
from hydragnn_ensemble.result import TrialResult
from hydragnn_ensemble.train import train_trial
from hydragnn_ensemble.train.training_state import read_training_state

torch.set_num_threads(1)
INHERIT = "inherit_state.pt"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return write_toy_dataset(tmp_path_factory.mktemp("data") / "toy.bp", 11)


def run(dataset: Path, run_dir: Path, cut_after: int | None = None, hidden: int = 16, **training) -> TrialResult | None:
    cfg = config_dict(**training)
    cfg["NeuralNetwork"]["Architecture"]["hidden_dim"] = hidden
    channel = CutAfter(run_dir, cut_after) if cut_after is not None else None
    try:
        return train_trial(config_from_dict(cfg), dataset, run_dir, device="cpu", progress=False, channel=channel)
    except Cut:
        return None


@pytest.fixture(scope="module")
def donor(tmp_path_factory, dataset) -> Path:
    """A donor trial cut after its 3rd epoch: its training state is that epoch's."""
    run_dir = tmp_path_factory.mktemp("runs") / "donor"
    run(dataset, run_dir, cut_after=3)
    assert read_training_state(run_dir / STATE).epoch == 3
    return run_dir


def give(donor: Path, taker: Path) -> None:
    taker.mkdir(parents=True, exist_ok=True)
    os.link(donor / STATE, taker / INHERIT)  # what the campaign does (scheduler.runtime.state_link)


def test_the_continuation_starts_from_the_donors_weights_with_its_own_learning_rate(tmp_path, dataset, donor):
    taker = tmp_path / "taker"
    give(donor, taker)
    # a learning rate of ~0: one epoch later the weights are still the donor's (and not a fresh init's)
    run(dataset, taker, cut_after=4, Optimizer={"learning_rate": 1e-12, "weight_decay": 0.0})
    donor_state, own = read_training_state(donor / STATE), read_training_state(taker / STATE)
    assert own.epoch == 4 and own.identity.trial == "taker"
    for key, value in donor_state.model.items():
        assert torch.allclose(own.model[key].float(), value.float(), atol=1e-8), key
    fresh = tmp_path / "fresh"
    run(dataset, fresh, cut_after=1, Optimizer={"learning_rate": 1e-12, "weight_decay": 0.0})
    scratch = read_training_state(fresh / STATE).model
    assert any(not torch.allclose(scratch[k].float(), v.float(), atol=1e-4) for k, v in donor_state.model.items())
    groups = own.optimizer["param_groups"]
    assert groups[0]["lr"] == pytest.approx(1e-12) and groups[0]["weight_decay"] == 0.0
    assert donor_state.optimizer["param_groups"][0]["lr"] == pytest.approx(0.005)
    log = (taker / "train.log").read_text()
    assert "inherited the training state of trial directory 'donor' after 3 epoch(s)" in log
    assert "epoch 3 train_loss" in log and " lr 1e-12 " in log
    assert progress_epochs(taker) == [4]
    assert not (taker / INHERIT).exists()
    assert (donor / STATE).exists()  # the donor's own file is untouched


def test_a_cut_continuation_resumes_from_its_own_copy_and_ends_as_an_uncut_one(tmp_path, dataset, donor):
    uncut, cut = tmp_path / "a" / "taker", tmp_path / "b" / "taker"  # same directory name: same identity
    for run_dir in (uncut, cut):
        give(donor, run_dir)
    whole = run(dataset, uncut, Optimizer={"learning_rate": 0.002, "weight_decay": 0.02})
    assert run(dataset, cut, cut_after=5, Optimizer={"learning_rate": 0.002, "weight_decay": 0.02}) is None
    resumed = run(dataset, cut, Optimizer={"learning_rate": 0.002, "weight_decay": 0.02})
    assert (whole.status, whole.resumed_from, whole.epochs) == ("completed", 3, 6)
    assert (resumed.status, resumed.resumed_from, resumed.epochs) == ("completed", 5, 6)
    assert resumed.objective == whole.objective  # bit-identical: the copy is the trial's own state


@pytest.mark.parametrize("bad", ["another_model", "torn", "link_note"])
def test_an_unusable_snapshot_is_ignored_with_one_line_and_the_trial_starts_from_scratch(tmp_path, dataset, donor, bad):
    taker = tmp_path / "taker"
    taker.mkdir()
    if bad == "another_model":
        other = tmp_path / "wide"
        run(dataset, other, cut_after=2, hidden=24)
        shutil.copy(other / STATE, taker / INHERIT)
        why = "the donor 'wide' trained another model spec"
    elif bad == "torn":
        (taker / INHERIT).write_bytes((donor / STATE).read_bytes()[:2000])
        why = "not a readable training state"
    else:
        (taker / INHERIT).write_text("the donor's training state x is not there\n")
        why = "not a readable training state"
    result = run(dataset, taker, num_epoch=2)
    assert (result.status, result.resumed_from, result.epochs) == ("completed", None, 2)
    lines = [line for line in (taker / "train.log").read_text().splitlines() if INHERIT in line]
    assert len(lines) == 1 and why in lines[0] and lines[0].endswith("training starts from epoch 0")
    assert not (taker / INHERIT).exists()
