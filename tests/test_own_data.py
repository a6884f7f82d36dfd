"""A scientist's own data, end to end, as the README tells it: an extxyz of EMT-labelled cells with
energy, forces and stress -> build-graphs -> a 3-trial potential-mode campaign under mpiexec ->
select --calibrate -> predict -> 10 steps of molecular dynamics with the ensemble's ASE calculator,
its energies checked against EMT's on the same positions."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from ase import units
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import write
from ase.md.verlet import VelocityVerlet

from hydragnn_ensemble.cli import main

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
NUM_CELLS = 40


def emt_cells(n: int, seed: int) -> list:
    """Random Cu/Ni/Pd substitutions of a 32-atom FCC cell, strained and rattled, with EMT's energy
    (the cell's total, eV), forces and stress stored as a single-point result (what extxyz keeps)."""
    rng = np.random.default_rng(seed)
    frames = []
    for k in range(n):
        atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, 2))
        atoms.symbols = rng.choice(["Cu", "Ni", "Pd"], size=len(atoms))
        atoms.set_cell(atoms.cell * (1 + rng.normal(0, 0.01)), scale_atoms=True)
        atoms.rattle(0.05, seed=seed * 1000 + k)
        atoms.calc = EMT()
        energy, forces, stress = atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()
        atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces, stress=stress)
        frames.append(atoms)
    return frames


def potential_config() -> dict:
    """The alloy example's potential-mode config, predicting the file's own heads."""
    config = json.loads((REPO / "examples" / "alloy" / "potential.json").read_text())
    arch, voi, train = (config["NeuralNetwork"][k] for k in ("Architecture", "Variables_of_interest", "Training"))
    voi["output_names"] = ["energy", "stress", "forces"]
    arch.update(hidden_dim=32, num_conv_layers=2)
    train.update(num_epoch=15, batch_size=8, EarlyStopping=False)
    train["Optimizer"]["learning_rate"] = 0.005
    return config


def run_campaign(folder: Path, config: dict, dataset: Path) -> subprocess.CompletedProcess:
    (folder / "config.json").write_text(json.dumps(config))
    campaign = {
        "dataset": str(dataset), "base_config": "config.json", "max_trials": 3, "trial_time_limit_s": 120,
        "optimizer": {"name": "random"}, "seed": 0,
        "search_space": {"NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 24, "high": 32},
                         "NeuralNetwork.Training.Optimizer.learning_rate":
                             {"type": "float", "low": 3e-3, "high": 6e-3, "log": True}},
    }
    (folder / "campaign.yaml").write_text(yaml.safe_dump(campaign))
    argv = [str(VENV_BIN / "mpiexec"), "-n", "2", str(VENV_BIN / "hydragnn-ensemble"), "hpo",
            str(folder / "campaign.yaml"), "-o", str(folder / "campaign"), "--no-progress"]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_own_extxyz_to_molecular_dynamics_with_energies_that_match_emt(tmp_path, capsys) -> None:
    frames = emt_cells(NUM_CELLS, seed=1)
    emt_energies = np.array([a.get_potential_energy() for a in frames])
    structures = tmp_path / "mine.extxyz"
    write(structures, frames)
    dataset = tmp_path / "mine.bp"

    # every label of the file is kept, with its unit: the energy is the cell's total
    assert main(["build-graphs", "--scale", "atomic", str(structures), "-o", str(dataset),
                 "--fractions", "0.6,0.2,0.2", "--no-progress"]) == 0
    from graph_builders.store import GraphStore

    with GraphStore(dataset) as store:
        assert [(h.name, h.level, h.dim, h.unit) for h in store.heads] == [
            ("energy", "graph", 1, "eV"), ("forces", "node", 3, "eV/Å"), ("stress", "graph", 6, "eV/Å^3")]

    # a config naming a head the file does not have is refused before any trial, with the trial's message
    wrong = potential_config()
    wrong["NeuralNetwork"]["Variables_of_interest"]["output_names"] = ["formation_energy", "stress", "forces"]
    (tmp_path / "wrong").mkdir()
    refused = run_campaign(tmp_path / "wrong", wrong, dataset)
    assert refused.returncode == 2
    assert "head 'formation_energy' is not in the dataset" in refused.stderr
    assert "energy (graph, dim 1)" in refused.stderr and not (tmp_path / "wrong" / "campaign").exists()

    (tmp_path / "run").mkdir()
    proc = run_campaign(tmp_path / "run", potential_config(), dataset)
    assert proc.returncode == 0, proc.stderr
    assert "trials finished: 3 (3 completed)" in proc.stdout

    ensemble = tmp_path / "ensemble"
    assert main(["select", str(tmp_path / "run" / "campaign"), "--top-k", "3", "-o", str(ensemble),
                 "--calibrate", "--no-plots", "--no-progress"]) == 0
    # 8 validation and 8 test structures: too few to calibrate on, and select says so
    selected = capsys.readouterr()
    assert "the valset has 8 structure(s), too few" in selected.err
    # the test errors beside the baselines: a total energy also per atom, in meV/atom
    assert "accuracy on the testset (8 structures); baselines fitted on the trainset:" in selected.out
    per_atom = next(line.split() for line in selected.out.splitlines() if line.strip().startswith("energy per atom"))
    assert per_atom[3] == "meV/atom" and float(per_atom[4]) > 0 and float(per_atom[5]) > 0
    with capsys.disabled():
        print(f"\nenergy per atom on the testset: ensemble {per_atom[4]} meV/atom, composition-linear {per_atom[5]}")

    # predict: the file carries labels, so the table has reference and error columns
    table = tmp_path / "pred.csv"
    assert main(["predict", str(ensemble), str(structures), "-o", str(table), "--no-progress"]) == 0
    with open(table, newline="") as fh:
        rows = list(csv.DictReader(fh))
    predicted = np.array([float(r["energy_mean"]) for r in rows])
    assert np.allclose([float(r["energy_ref"]) for r in rows], emt_energies, rtol=1e-5)
    assert np.allclose([float(r["energy_error"]) for r in rows], predicted - emt_energies, atol=1e-4)
    assert rows[0]["forces_mae"] and rows[0]["stress_0_ref"]
    # predict prints the energy's MAE per atom beside the total's: mean(|error| / atoms), meV/atom
    printed = next(line.split() for line in capsys.readouterr().out.splitlines()
                   if line.strip().startswith("energy: MAE"))
    errors = np.array([float(r["energy_error"]) for r in rows])
    assert float(printed[2]) == pytest.approx(np.mean(np.abs(errors)), rel=1e-3) and printed[3] == "eV"
    assert float(printed[4].lstrip("(")) == pytest.approx(1000 * np.mean(np.abs(errors) / 32), rel=1e-3)
    assert printed[5] == "meV/atom)"

    # tolerance of this test: the ensemble explains most of the spread of the EMT energies (32-atom
    # cells, spread about 1.5 eV): its MAE is below half their standard deviation
    tolerance = 0.5 * float(np.std(emt_energies))
    print(f"MAE {np.mean(np.abs(predicted - emt_energies)):.3f} eV, tolerance {tolerance:.3f} eV")
    assert np.mean(np.abs(predicted - emt_energies)) < tolerance

    from ensemble import EnsembleCalculator

    atoms = frames[0].copy()
    calc = EnsembleCalculator(ensemble)
    atoms.calc = calc
    # the calculator's energy is predict's energy: a head in eV is the cell's total, not per atom
    assert atoms.get_potential_energy() == pytest.approx(predicted[0], rel=1e-5)
    forces = atoms.get_forces()
    h = 1e-3
    for i, c in ((0, 0), (5, 1), (17, 2)):
        probe = atoms.copy()
        probe.calc = calc
        probe.positions[i, c] += h
        e_plus = probe.get_potential_energy()
        probe.positions[i, c] -= 2 * h
        e_minus = probe.get_potential_energy()
        assert -(e_plus - e_minus) / (2 * h) == pytest.approx(forces[i, c], rel=0.02, abs=2e-3)

    rng = np.random.default_rng(0)
    atoms.set_momenta(rng.normal(scale=np.sqrt(300 * units.kB * atoms.get_masses())[:, None], size=(32, 3)))
    dynamics = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    model, reference = [], []

    def record() -> None:
        model.append(atoms.get_potential_energy())
        probe = atoms.copy()
        probe.calc = EMT()
        reference.append(probe.get_potential_energy())

    dynamics.attach(record, interval=1)
    dynamics.run(10)
    assert len(model) == 11
    print(f"MD MAE {np.mean(np.abs(np.array(model) - np.array(reference))):.3f} eV")
    assert np.mean(np.abs(np.array(model) - np.array(reference))) < tolerance
