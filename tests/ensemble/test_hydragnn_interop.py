"""Our exports trained by HydraGNN itself, on its default data path (``AdiosDataset`` with the
config's ``Variables_of_interest`` as ``var_config``): every config ``export --format hydragnn``
writes for a direct-heads campaign and for a potential-mode campaign trains one epoch there with a
finite, falling validation loss. Needs a HydraGNN venv: ``pytest --hydragnn-python PATH``."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from ensemble_testkit import TrialPlan, build_campaign, small_base_config

from ensemble.export import DATASET_NAME, export_top_k

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hydragnn_python(request) -> Path:
    path = request.config.getoption("--hydragnn-python")
    if path is None:
        pytest.skip("no HydraGNN environment: pytest --hydragnn-python PATH (interop/setup_hydragnn.sh makes one)")
    return Path(path)


def _train_in_hydragnn(python: Path, export_dir: Path, data_path: str = "var_config") -> list[dict]:
    configs = sorted(str(p) for p in export_dir.glob("trial_*.json"))
    out = export_dir / f"hydragnn_{data_path}.json"
    proc = subprocess.run([str(python), str(ROOT / "interop" / "hydragnn_side.py"), str(export_dir / DATASET_NAME),
                           str(out), *configs, "--train", str(len(configs)), "--epochs", "1",
                           "--data-path", data_path], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    return json.loads(out.read_text())["configs"]


def _assert_trains(entries: list[dict]) -> None:
    """Every config trained; the loss fell, except HydraGNN's Gaussian NLL (its variance is the head's
    output squared; after one epoch on 36 structures its validation NLL rose, 5.1 -> 651 measured)."""
    assert entries
    for entry in entries:
        assert "error" not in entry, (entry["config"], entry.get("error"), entry.get("traceback", "")[-1500:])
        before, after = entry["val_loss_before"], entry["val_loss_after"]
        nll = entry["rewritten"]["NeuralNetwork"]["Training"].get("loss_function_type") == "GaussianNLLLoss"
        assert math.isfinite(after) and (nll or after < before), (entry["config"], before, after)


def test_direct_campaign_exports_train_in_hydragnn(hydragnn_python, direct_campaign, tmp_path):
    result = export_top_k(direct_campaign.root, 5, "hydragnn", tmp_path / "out", with_dataset=True)
    assert len([p for p in result.files if p.suffix == ".json"]) >= 3
    _assert_trains(_train_in_hydragnn(hydragnn_python, tmp_path / "out"))


@pytest.mark.parametrize("shaped", [False, True])
def test_potential_campaign_exports_train_in_hydragnn(hydragnn_python, alloy_store, tmp_path, shaped):
    """Potential mode (forces by autograd): EGNN and PaiNN exports train in HydraGNN; SchNet is
    named as not expressible. HydraGNN-shaped (PaiNN: HydraGNN's EGNN, without a radial filter,
    is refused as a potential), HydraGNN's rebuild has each member's parameter count."""
    from ensemble.campaign import read_campaign

    mt, hd, lr = ("NeuralNetwork.Architecture.mpnn_type", "NeuralNetwork.Architecture.hidden_dim",
                  "NeuralNetwork.Training.Optimizer.learning_rate")
    types = ("PAINN", "SchNet") if shaped else ("EGNN", "PAINN", "SchNet")
    plans = [TrialPlan(i, {mt: m, hd: 16, lr: 0.002}) for i, m in enumerate(types)]
    space = {mt: {"type": "categorical", "choices": list(types)},
             hd: {"type": "int", "low": 8, "high": 32}, lr: {"type": "float", "low": 1e-3, "high": 1e-2, "log": True}}
    base = small_base_config(epochs=2, potential=True)
    base["NeuralNetwork"]["Architecture"]["hydragnn_shaped"] = shaped
    campaign = build_campaign(tmp_path / "campaign", alloy_store, base, plans, space)
    result = export_top_k(campaign.root, len(types), "hydragnn", tmp_path / "out", with_dataset=True)
    assert [why.startswith("potential mode with SchNet") for _, why in result.not_expressible] == [True]
    entries = _train_in_hydragnn(hydragnn_python, tmp_path / "out")
    _assert_trains(entries)
    if shaped:
        ours = {t.params[mt]: t.result.num_parameters for t in read_campaign(campaign.root).ranked()}
        theirs = {e["rewritten"]["NeuralNetwork"]["Architecture"]["mpnn_type"]: e["num_parameters"] for e in entries}
        assert theirs == {m: ours[m] for m in types if m != "SchNet"}


def test_the_other_direct_layer_types_export_and_train_in_hydragnn(hydragnn_python, alloy_store, tmp_path):
    """The layer types the direct-heads campaign above does not export (PNA, EGNN, PaiNN) train on
    HydraGNN's default path too, with the example's graph and node heads."""
    mt, hd, lr = ("NeuralNetwork.Architecture.mpnn_type", "NeuralNetwork.Architecture.hidden_dim",
                  "NeuralNetwork.Training.Optimizer.learning_rate")
    types = ("PNA", "EGNN", "PAINN")
    plans = [TrialPlan(i, {mt: m, hd: 16, lr: 0.003}) for i, m in enumerate(types)]
    space = {mt: {"type": "categorical", "choices": list(types)}, hd: {"type": "int", "low": 8, "high": 32},
             lr: {"type": "float", "low": 1e-3, "high": 1e-2, "log": True}}
    campaign = build_campaign(tmp_path / "campaign", alloy_store, small_base_config(epochs=2), plans, space)
    result = export_top_k(campaign.root, 3, "hydragnn", tmp_path / "out", with_dataset=True)
    assert not result.not_expressible
    entries = _train_in_hydragnn(hydragnn_python, tmp_path / "out")
    assert sorted(e["rewritten"]["NeuralNetwork"]["Architecture"]["mpnn_type"] for e in entries) == sorted(types)
    _assert_trains(entries)


@pytest.mark.parametrize("types, edge_features", [
    (("GIN", "EGNN"), None), (("PNA", "GIN"), None), (("SchNet", "PAINN"), None),
    (("SchNet", "EGNN"), ["length"]), (("PNA", "PAINN"), ["length"]),
])
def test_hydragnn_shaped_members_have_hydragnn_s_parameter_count(hydragnn_python, alloy_store, tmp_path, types,
                                                                 edge_features):
    """Every layer type built with ``hydragnn_shaped`` (GIN, PNA, SchNet, EGNN, PaiNN; with and
    without the edge length as an edge feature; a SchNet without it is exported with it):
    HydraGNN's rebuild of each exported config has exactly the member's parameter count, and
    trains on its default path."""
    from ensemble.campaign import read_campaign

    mt, hd, lr = ("NeuralNetwork.Architecture.mpnn_type", "NeuralNetwork.Architecture.hidden_dim",
                  "NeuralNetwork.Training.Optimizer.learning_rate")
    plans = [TrialPlan(i, {mt: m, hd: 24, lr: 0.003}) for i, m in enumerate(types)]
    space = {mt: {"type": "categorical", "choices": list(types)}, hd: {"type": "int", "low": 8, "high": 32},
             lr: {"type": "float", "low": 1e-3, "high": 1e-2, "log": True}}
    base = small_base_config(epochs=2)
    base["NeuralNetwork"]["Architecture"]["hydragnn_shaped"] = True
    if edge_features:
        base["NeuralNetwork"]["Architecture"]["edge_features"] = edge_features
    campaign = build_campaign(tmp_path / "campaign", alloy_store, base, plans, space)
    ours = {t.params[mt]: t.result.num_parameters for t in read_campaign(campaign.root).ranked()}
    export_top_k(campaign.root, 2, "hydragnn", tmp_path / "out", with_dataset=True)
    entries = _train_in_hydragnn(hydragnn_python, tmp_path / "out")
    theirs = {e["rewritten"]["NeuralNetwork"]["Architecture"]["mpnn_type"]: e["num_parameters"] for e in entries}
    assert ours == theirs and len(ours) == 2
    _assert_trains(entries)
