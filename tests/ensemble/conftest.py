"""Session fixtures: one tiny alloy dataset, a direct-heads campaign and a potential-mode campaign
(real trainer), and ensembles built from them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ensemble_testkit import TrialPlan, build_campaign, make_alloy_store, small_base_config

from hydragnn_ensemble.result import TrialResult

SPACE = {
    "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["GIN", "SchNet", "CGCNN"]},
    "NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 8, "high": 32},
    "NeuralNetwork.Training.Optimizer.learning_rate": {"type": "float", "low": 1e-3, "high": 1e-2, "log": True},
    "NeuralNetwork.Training.loss_function_type": {"type": "categorical", "choices": ["mse", "GaussianNLLLoss"]},
}


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def alloy_store(tmp_path_factory) -> Path:
    return make_alloy_store(tmp_path_factory.mktemp("data") / "alloy.bp")


@pytest.fixture(scope="session")
def direct_campaign(tmp_path_factory, alloy_store):
    """Trials 0-4 trained for real; 5 failed, 6 diverged (with a checkpoint and the best objective),
    7 unfinished (journal: started only; a stale completed result.json), 8 timed out without a
    checkpoint."""
    lr = "NeuralNetwork.Training.Optimizer.learning_rate"
    mt, hd = "NeuralNetwork.Architecture.mpnn_type", "NeuralNetwork.Architecture.hidden_dim"
    loss = "NeuralNetwork.Training.loss_function_type"
    plans = [
        TrialPlan(0, {mt: "GIN", hd: 16, lr: 0.005, loss: "mse"}),
        TrialPlan(1, {mt: "SchNet", hd: 16, lr: 0.005, loss: "mse"}),
        TrialPlan(2, {mt: "CGCNN", hd: 16, lr: 0.003, loss: "mse"}),
        TrialPlan(3, {mt: "GIN", hd: 24, lr: 0.002, loss: "mse"}),
        TrialPlan(4, {mt: "GIN", hd: 16, lr: 0.005, loss: "GaussianNLLLoss"}),
        TrialPlan(5, {mt: "GIN", hd: 8, lr: 0.001, loss: "mse"},
                  fake=TrialResult(status="failed", failure_reason="RuntimeError: CUDA out of memory"),
                  journal="failed"),
        TrialPlan(6, {mt: "GIN", hd: 8, lr: 0.009, loss: "mse"},
                  fake=TrialResult(status="diverged", objective=1e-6, checkpoint="checkpoint.pt",
                                   failure_reason="non-finite training loss in epoch 3"),
                  copy_checkpoint_from=0),
        TrialPlan(7, {mt: "GIN", hd: 12, lr: 0.004, loss: "mse"},
                  fake=TrialResult(status="completed", objective=1e-7, checkpoint="checkpoint.pt"),
                  copy_checkpoint_from=0, journal="started"),
        TrialPlan(8, {mt: "SchNet", hd: 8, lr: 0.004, loss: "mse"},
                  fake=TrialResult(status="timeout", failure_reason="time budget reached in epoch 0")),
    ]
    root = tmp_path_factory.mktemp("campaigns") / "direct"
    return build_campaign(root, alloy_store, small_base_config(), plans, SPACE)


@pytest.fixture(scope="session")
def potential_campaign(tmp_path_factory, alloy_store):
    """Three SchNet interatomic-potential trials (energy per atom, forces = -dE/dpos, stress)."""
    lr = "NeuralNetwork.Training.Optimizer.learning_rate"
    hd = "NeuralNetwork.Architecture.hidden_dim"
    plans = [TrialPlan(i, {hd: h, lr: r}) for i, (h, r) in enumerate([(16, 0.005), (12, 0.004), (16, 0.002)])]
    root = tmp_path_factory.mktemp("campaigns") / "potential"
    space = {k: SPACE[k] for k in (hd, lr)}
    return build_campaign(root, alloy_store, small_base_config(epochs=3, potential=True), plans, space)


@pytest.fixture(scope="session")
def direct_ensemble(tmp_path_factory, direct_campaign) -> Path:
    from ensemble import BuildOptions, build_ensemble

    out = tmp_path_factory.mktemp("ens") / "direct_top3"
    build_ensemble(direct_campaign.root, out, BuildOptions(top_k=3, method="topk"))
    return out


@pytest.fixture(scope="session")
def potential_ensemble(tmp_path_factory, potential_campaign) -> Path:
    from ensemble import BuildOptions, build_ensemble

    out = tmp_path_factory.mktemp("ens") / "potential"
    build_ensemble(potential_campaign.root, out, BuildOptions(top_k=3, method="topk"))
    return out


@pytest.fixture(scope="session")
def calibrated_potential_ensemble(tmp_path_factory, potential_ensemble) -> Path:
    """The potential-mode ensemble with its uncertainty model and applicability domain."""
    import shutil

    from ensemble import calibrate

    out = tmp_path_factory.mktemp("ens") / "potential_calibrated"
    shutil.copytree(potential_ensemble, out)
    calibrate(out, plots=False)
    return out
