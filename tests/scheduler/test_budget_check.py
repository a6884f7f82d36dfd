"""Budgets before trial 1 (scheduler.budget_check): which configurations cannot train their minimum
epochs inside the trial time limit, and the one re-check once epochs are measured."""

from __future__ import annotations

import numpy as np
import pytest

from hpo.space import SearchSpace, apply_params
from hpo.stoppers import make_stopper
from scheduler.budget_check import BudgetWatch, check_budgets
from scheduler.cost_model import EpochTimes, TrialFeatures
from scheduler.sizing import runtime_sizer

BASE = {"NeuralNetwork": {
    "Architecture": {"mpnn_type": "GIN", "hidden_dim": 32, "num_conv_layers": 2},
    "Training": {"num_epoch": 20, "batch_size": 32},
    "Variables_of_interest": {"output_names": ["energy"]},
}}
SPACE = SearchSpace.from_dict({
    "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["GIN", "PaiNN"]},
    "NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 16, "high": 256},
})


def _sizer(limit_s: float):
    return runtime_sizer("no-such-dataset.bp", [1], 1, limit_s, _config_of).sizer


def _config_of(params):
    return apply_params(BASE, params)


def _predicted(sizer, stopper_epochs: int | None) -> list[float]:
    """Each sampled configuration's start-up + minimum epochs, straight from the cost model (the
    same seeded draws as the check)."""
    rng = np.random.default_rng(0)
    model = sizer.cost_model
    out = []
    for _ in range(256):
        features = TrialFeatures.from_config(apply_params(BASE, SPACE.sample_random(rng)))
        epochs = features.num_epoch if stopper_epochs is None else stopper_epochs
        out.append(model.startup_s + epochs * model.epoch_seconds(features, 1))
    return out


def test_configurations_that_cannot_train_their_budget_are_counted_and_their_layer_named():
    seconds = _predicted(_sizer(100.0), None)
    limit = float(np.quantile(seconds, 0.6))  # 40% of the draws cannot fit
    found = check_budgets(_sizer(limit), _config_of, SPACE, None, limit)
    assert found is not None
    assert found.short == sum(s > limit for s in seconds) and found.sampled == 256
    assert found.worst_s == pytest.approx(max(seconds))
    assert any(c.startswith("NeuralNetwork.Architecture.mpnn_type='PaiNN'") for c in found.culprits)
    message = found.message()
    assert f"{found.short} of 256" in message and "20 epoch(s) of their whole budget" in message
    assert "cost anchors" in message
    assert check_budgets(_sizer(2 * max(seconds)), _config_of, SPACE, None, 2 * max(seconds)) is None


def test_a_stopper_needs_only_its_first_rung():
    stopper = make_stopper("asha", {"min_epochs": 2, "reduction_factor": 3})
    assert stopper.first_judged_epoch(20) == 2
    assert make_stopper("median", {"min_epochs": 4}).first_judged_epoch(20) == 4
    whole = _predicted(_sizer(100.0), None)
    rung = _predicted(_sizer(100.0), 2)
    limit = float(np.quantile(rung, 0.8))
    found = check_budgets(_sizer(limit), _config_of, SPACE, stopper, limit)
    assert found is not None and found.short == sum(s > limit for s in rung)
    assert found.short < sum(s > limit for s in whole)
    assert "2 epoch(s) before the stopper's first rung" in found.message()


def test_the_watch_warns_once_when_measured_epochs_say_more_fall_short():
    limit = float(np.quantile(_predicted(_sizer(100.0), None), 0.9))
    sizer = _sizer(limit)
    first = check_budgets(sizer, _config_of, SPACE, None, limit)
    watch = BudgetWatch(lambda: check_budgets(sizer, _config_of, SPACE, None, limit, measured=True), first, after_trials=2)
    features = TrialFeatures.from_config(BASE)
    slow = 10 * sizer.cost_model.epoch_seconds(features, 1)  # this machine is 10x slower than the anchors
    for trial in range(6):
        sizer.cost_model.learn_epoch((trial, 1), features, 1, EpochTimes(1.0, slow, 0.9 * slow))
    assert watch.epoch_reported(0, 1) is None  # one trial so far
    assert watch.epoch_reported(0, 2) is None  # not a first epoch
    warning = watch.epoch_reported(1, 1)
    assert warning is not None and "measured on this machine" in warning
    assert watch.epoch_reported(2, 1) is None  # once
