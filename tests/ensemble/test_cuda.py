"""The stack on a CUDA device, against the CPU (issue #26). Every test here needs a GPU and is
skipped with the reason on machines without one (CI has none): run ``pytest tests/ensemble/test_cuda.py``
on a GPU host. Tolerances: the same seed and data on both devices, 3 epochs; fp32 loss curves
within 2% (CUDA's scatter sums add in another order), bf16 autocast within 10%."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.ensemble.ensemble_testkit import make_alloy_store, small_base_config

DEVICE = "cuda"  # the device every test compares with the CPU
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device here (CI has none); run on a GPU host")
ALL_TYPES = ("GIN", "PNA", "GAT", "CGCNN", "SchNet", "EGNN", "PAINN")
REPO = Path(__file__).resolve().parents[2]


def loss_curve(config: dict, store: Path, run_dir: Path, device: str) -> tuple[list[float], str]:
    """Validation objective per epoch of one real training on ``device``, and the device it reports."""
    from hydragnn_ensemble.train import train_trial

    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.json"
    path.write_text(json.dumps(config))
    result = train_trial(path, store, run_dir / "run", progress=False, device=device, raise_errors=True)
    lines = (run_dir / "run" / "progress.jsonl").read_text().splitlines()
    return [json.loads(line)["objective"] for line in lines if line.strip()], result.device


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return make_alloy_store(tmp_path_factory.mktemp("cuda") / "alloy.bp", num=40)


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("mpnn_type", ALL_TYPES)
def test_every_layer_type_trains_on_cuda_with_the_cpu_loss_curve(store, tmp_path, mpnn_type, bf16):
    config = small_base_config(epochs=3)
    config["NeuralNetwork"]["Architecture"]["mpnn_type"] = mpnn_type
    config["NeuralNetwork"]["Training"]["mixed_precision"] = bf16
    cpu, _ = loss_curve(config, store, tmp_path / "cpu", "cpu")
    gpu, device = loss_curve(config, store, tmp_path / "gpu", DEVICE)
    assert device == DEVICE and len(gpu) == len(cpu) == 3
    np.testing.assert_allclose(gpu, cpu, rtol=0.10 if bf16 else 0.02)


@pytest.mark.parametrize("mpnn_type", ["SchNet", "EGNN", "PAINN"])
def test_potential_mode_on_cuda_matches_the_cpu_and_is_twice_differentiable(store, tmp_path, mpnn_type):
    """Forces by autograd on CUDA equal the CPU's for the same weights, their own gradient with
    respect to the weights (the force loss's backward) is finite, and training follows the CPU."""
    from torch_geometric.data import Batch

    from graph_builders.store import GraphStore
    from hydragnn_ensemble.inference import load_checkpoint

    config = small_base_config(epochs=3, potential=True)
    config["NeuralNetwork"]["Architecture"]["mpnn_type"] = mpnn_type
    cpu, _ = loss_curve(config, store, tmp_path / "cpu", "cpu")
    gpu, _ = loss_curve(config, store, tmp_path / "gpu", DEVICE)
    np.testing.assert_allclose(gpu, cpu, rtol=0.02)
    with GraphStore(store) as s:
        batch = Batch.from_data_list([s.get("testset", i) for i in range(4)])
    checkpoint = tmp_path / "cpu" / "run" / "checkpoint.pt"
    on_cpu, on_gpu = load_checkpoint(checkpoint, device="cpu"), load_checkpoint(checkpoint, device=DEVICE)
    forces = on_gpu.spec.forces_head
    expected = on_cpu.predict(batch)[forces]
    torch.testing.assert_close(on_gpu.predict(batch.to(DEVICE))[forces].cpu(), expected, atol=1e-4, rtol=1e-3)
    on_gpu.model.train()
    raw = on_gpu.model(on_gpu.prepare(batch.to(DEVICE)))  # the force loss's graph, as in training
    params = [p for p in on_gpu.model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(raw[forces].square().sum(), params, allow_unused=True)
    used = [g for g in grads if g is not None]
    assert used and all(bool(torch.isfinite(g).all()) for g in used)


def test_ensemble_and_calculator_on_cuda_match_the_cpu(direct_ensemble, potential_ensemble):
    """An ensemble predicts the same means and standard deviations on CUDA as on the CPU, and the
    ASE calculator gives the same energy and forces."""
    from ase.build import bulk

    from ensemble import EnsembleCalculator, EnsemblePredictor

    direct, potential = direct_ensemble, potential_ensemble
    cells = [bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, 2)) for _ in range(3)]
    for atoms, scale in zip(cells, (0.98, 1.0, 1.03)):
        atoms.set_cell(atoms.cell * scale, scale_atoms=True)
    on_cpu = EnsemblePredictor(direct).predict_atoms(cells)
    on_gpu = EnsemblePredictor(direct, devices=[DEVICE]).predict_atoms(cells)
    for name, head in on_cpu.heads.items():
        np.testing.assert_allclose(on_gpu.heads[name].mean, head.mean, rtol=1e-3, atol=1e-5)
        np.testing.assert_allclose(on_gpu.heads[name].std, head.std, rtol=1e-3, atol=1e-5)
    results = []
    for devices in (None, [DEVICE]):
        atoms = cells[1].copy()
        atoms.rattle(0.05, seed=1)
        atoms.calc = EnsembleCalculator(potential, devices=devices)
        results.append((atoms.get_potential_energy(), atoms.get_forces()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-4)
    np.testing.assert_allclose(results[1][1], results[0][1], atol=1e-4)


def test_a_campaign_under_mpiexec_trains_its_trials_on_cuda(store, tmp_path):
    """The demo's campaign shrunk to 4 trials of 2 epochs, ``device: gpu``, 2 slots, the default
    (fork-server) launcher: every trial trains on CUDA after the fork and completes."""
    example = yaml.safe_load((REPO / "examples/alloy/campaign.yaml").read_text())
    base = small_base_config(epochs=2)
    (tmp_path / "base.json").write_text(json.dumps(base))
    example.update(dataset=str(store), base_config="base.json", max_trials=4, early_stopping={"method": "none"},
                   optimizer={"name": "random"}, max_time_s=600, trial_time_limit_s=120)
    example["resources"].update(slots_per_node=2, device="gpu" if DEVICE == "cuda" else "cpu")
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(example))
    mpiexec, cli = Path(sys.executable).parent / "mpiexec", Path(sys.executable).parent / "hydragnn-ensemble"
    done = subprocess.run([str(mpiexec), "-n", "3", str(cli), "hpo", str(campaign), "-o", str(tmp_path / "out"),
                           "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "out" / "trials").glob("*/result.json"))]
    assert len(results) == 4
    assert all(r["status"] == "completed" and r["device"] == DEVICE for r in results), results
