"""The ensemble's errors beside the baselines: select's accuracy table, the campaign report's
baselines, predict's per-atom MAE and the parity plot's printed figures, each against numbers
computed here by hand."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from ensemble.accuracy import error_stats
from graph_builders.schema import HeadSpec
from hydragnn_ensemble.baseline import fit_baselines
from hydragnn_ensemble.cli import main

ENERGY = HeadSpec("energy", "graph", 1, "eV")
PER_ATOM = HeadSpec("formation_energy", "graph", 1, "eV/atom")
FORCES = HeadSpec("forces", "node", 3, "eV/Å")


def test_error_figures_of_a_small_case_by_hand():
    stats = error_stats(ENERGY, np.array([[1.0], [2.0], [3.0]]), np.array([[1.0], [2.0], [4.0]]), np.array([1, 2, 4]))
    assert stats.count == 3 and stats.mae == pytest.approx(1 / 3) and stats.rmse == pytest.approx(np.sqrt(1 / 3))
    assert stats.r2 == pytest.approx(1 - 1 / 2)  # residual sum of squares 1, total 2
    assert stats.mae_per_atom == pytest.approx((0 + 0 + 1 / 4) / 3)
    per_atom = error_stats(PER_ATOM, np.array([[0.1], [0.2]]), np.array([[0.13], [0.2]]), np.array([8, 32]))
    assert per_atom.mae_per_atom == per_atom.mae == pytest.approx(0.015)
    assert error_stats(FORCES, np.ones((2, 3)), np.zeros((2, 3))).r2 is None  # constant targets
    assert error_stats(FORCES, np.ones((2, 3)), np.zeros((2, 3))).mae_per_atom is None


def _line(text: str, start: str) -> list[str]:
    found = [line.split() for line in text.splitlines() if line.strip().startswith(start)]
    assert found, f"no line starting {start!r} in:\n{text}"
    return found[0]


def test_select_prints_the_test_errors_beside_the_baselines(direct_campaign, tmp_path, capsys):
    from ensemble.predictor import EnsemblePredictor, read_split, split_targets

    out = tmp_path / "ens"
    assert main(["select", str(direct_campaign.root), "--top-k", "3", "-o", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "accuracy on the testset (12 structures); baselines fitted on the trainset:" in text
    graphs = read_split(direct_campaign.dataset, "testset")
    targets = split_targets(graphs, EnsemblePredictor(out).heads)
    prediction = EnsemblePredictor(out).predict_graphs(graphs)
    baselines = fit_baselines(direct_campaign.dataset, "testset")
    for head in ("formation_energy", "stress", "forces"):
        mae = float(np.mean(np.abs(prediction.heads[head].mean - targets[head])))
        row = _line(text, head + " ")
        assert float(row[2]) == pytest.approx(mae, rel=1e-3)
        assert float(row[5]) == pytest.approx(baselines.heads[head].mae, rel=1e-3)
        assert float(row[6]) == pytest.approx(mae / baselines.heads[head].mae, abs=6e-3)  # 3 digits
    per_atom = _line(text, "formation_energy per atom")
    mae = float(np.mean(np.abs(prediction.heads["formation_energy"].mean - targets["formation_energy"])))
    assert per_atom[3] == "meV/atom" and float(per_atom[4]) == pytest.approx(1000 * mae, rel=1e-3)
    assert float(per_atom[5]) == pytest.approx(1000 * baselines.heads["formation_energy"].mae, rel=1e-3)
    assert " ".join(_line(text, "formation_energy ")[7:]) == "composition-linear (4 reference energies)"
    assert _line(text, "forces ")[-2:] == ["zero", "forces"]


def test_the_report_shows_the_baselines_in_the_tables_units(direct_campaign):
    from hpo.report import write_report

    files = write_report(direct_campaign.root, top=5)
    assert "baselines on the valset (fitted on the trainset), beside the lowest MAE of the trials above:" in files.text
    baselines = fit_baselines(direct_campaign.dataset, "valset")
    ranked = [r for r in direct_campaign.results.values() if r.objective is not None and r.heads
              and r.heads["forces"].val_mae is not None]
    row = _line(files.text, "formation_energy ")
    assert row[1] == "meV/atom" and float(row[2]) == pytest.approx(1000 * baselines.heads["formation_energy"].mae,
                                                                   rel=1e-3)
    lowest = min(r.heads["formation_energy"].val_mae for r in ranked) * 1000
    assert float(row[3]) == pytest.approx(lowest, rel=1e-3)
    forces = _line(files.text, "forces ")
    assert forces[1] == "eV/Å" and float(forces[2]) == pytest.approx(baselines.heads["forces"].mae, rel=1e-3)
    assert "<h2>Baselines</h2>" in files.html.read_text()


def test_predict_prints_an_energys_mae_per_atom(direct_ensemble, direct_campaign, tmp_path, capsys):
    out = tmp_path / "p.csv"
    assert main(["predict", str(direct_ensemble), str(direct_campaign.dataset), "-o", str(out), "--no-progress"]) == 0
    errors = np.array([float(r["formation_energy_error"]) for r in csv.DictReader(out.open())])
    line = _line(capsys.readouterr().out, "formation_energy: MAE")
    assert float(line[2]) == pytest.approx(np.mean(np.abs(errors)), rel=1e-3)
    assert line[3] == "eV/atom" and line[5] == "meV/atom)"
    assert float(line[4].lstrip("(")) == pytest.approx(1000 * np.mean(np.abs(errors)), rel=1e-3)


def test_parity_plots_print_mae_and_r2_and_draw_forces_as_a_hexbin(tmp_path):
    from matplotlib.collections import PolyCollection

    from ensemble.plots import parity_figure, parity_plot

    rng = np.random.default_rng(0)
    y = rng.normal(size=(40, 1)) * 3 - 100
    mean = y + rng.normal(size=(40, 1)) * 0.5
    atoms = rng.integers(8, 40, size=40)
    fig = parity_figure(y, mean, np.full_like(y, 0.3), ENERGY, atoms)
    text = "\n".join(t.get_text() for t in fig.axes[0].texts)
    err = mean - y
    assert f"MAE {np.mean(np.abs(err)):.4g} eV" in text
    assert f"MAE {1000 * np.mean(np.abs(err[:, 0]) / atoms):.4g} meV/atom" in text
    assert f"R² {1 - np.sum(err ** 2) / np.sum((y - y.mean()) ** 2):.4f}" in text
    assert not any(isinstance(c, PolyCollection) for c in fig.axes[0].collections)
    forces = rng.normal(size=(500, 3))
    fig = parity_figure(forces, forces * 0.9, np.zeros_like(forces), FORCES)
    assert any(isinstance(c, PolyCollection) for c in fig.axes[0].collections)  # the hexbin
    text = "\n".join(t.get_text() for t in fig.axes[0].texts)
    assert f"MAE {np.mean(np.abs(0.1 * forces)):.4g} eV/Å" in text and "meV/atom" not in text
    assert parity_plot(forces, forces * 0.9, np.zeros_like(forces), tmp_path / "f.png", FORCES).stat().st_size > 0
