"""Calibration metrics on synthetic Gaussian data, std scaling, and calibrating a real ensemble."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch

from ensemble import (
    EnsembleIntegrityError,
    EnsemblePredictor,
    calibrate,
    calibration_metrics,
    coverage_curve,
    fit_std_scale,
    read_manifest,
    read_split,
    sha256_of,
    split_targets,
)


def _gaussian(n=200_000, seed=0):
    rng = np.random.default_rng(seed)
    std = rng.uniform(0.5, 2.0, size=n)
    y = rng.normal(size=n)
    mean = y + rng.normal(size=n) * std  # errors really are N(0, std^2)
    return y, mean, std


def test_metrics_of_calibrated_gaussian_predictions():
    y, mean, std = _gaussian()
    m = calibration_metrics(y, mean, std)
    assert m.coverage_68 == pytest.approx(0.6827, abs=0.005)
    assert m.coverage_95 == pytest.approx(0.9545, abs=0.003)
    expected_nll = np.mean(0.5 * np.log(2 * np.pi * std ** 2)) + 0.5
    assert m.nll == pytest.approx(expected_nll, abs=0.01)
    assert m.spearman > 0.2  # larger std, larger errors
    levels, observed = coverage_curve(y, mean, std, [0.5, 0.9])
    np.testing.assert_allclose(observed, [0.5, 0.9], atol=0.005)


def test_exact_values_on_a_small_case():
    y = np.array([0.0, 0.0, 0.0, 0.0])
    mean = np.array([1.0, -3.0, 0.5, 0.0])
    std = np.array([1.0, 1.0, 1.0, 2.0])
    m = calibration_metrics(y, mean, std)
    assert (m.n, m.mae, m.rmse) == (4, pytest.approx(1.125), pytest.approx(math.sqrt(10.25 / 4)))
    assert (m.coverage_68, m.coverage_95) == (0.75, 0.75)
    assert m.nll == pytest.approx(np.mean(0.5 * np.log(2 * np.pi * std ** 2) + 0.5 * (mean / std) ** 2))
    # ranks of |err| (3, 4, 2, 1) vs ranks of std with ties averaged (2, 2, 2, 4): r = -3 / sqrt(15)
    assert m.spearman == pytest.approx(-3 / math.sqrt(15))
    with pytest.raises(ValueError, match="shapes differ"):
        calibration_metrics(y, mean[:3], std[:3].reshape(3))


def test_scaling_recovers_a_known_factor():
    y, mean, std = _gaussian(seed=1)
    s = fit_std_scale(y, mean, std / 2.5)  # an overconfident ensemble: stds 2.5x too small
    assert s == pytest.approx(2.5, rel=0.01)
    before = calibration_metrics(y, mean, std / 2.5)
    after = calibration_metrics(y, mean, s * std / 2.5)
    assert before.coverage_95 < 0.7 and after.coverage_95 == pytest.approx(0.9545, abs=0.005)
    assert after.nll < before.nll
    with pytest.raises(ValueError, match="no spread"):
        fit_std_scale(y, mean, np.zeros_like(std))


def test_calibrate_a_real_ensemble(direct_ensemble, direct_campaign, tmp_path):
    """The stored model is what the report used: reloading predicts the same std, each term's share
    adds up to it, the weights minimise the validation NLL, and nothing comes from the test split."""
    copy = tmp_path / "ens"
    shutil.copytree(direct_ensemble, copy)
    report = calibrate(copy, plots=True)
    manifest = read_manifest(copy)
    assert manifest.uncertainty is not None and manifest.calibration == {}
    assert manifest.uncertainty.sha256 == sha256_of(copy / "uncertainty.npz")
    assert set(report.models) == {"formation_energy", "stress", "forces"}
    predictor = EnsemblePredictor(copy)
    val = read_split(direct_campaign.dataset, "valset")
    test = read_split(direct_campaign.dataset, "testset")
    y_val, y_test = split_targets(val, predictor.heads), split_targets(test, predictor.heads)
    pred_test, pred_val = predictor.predict_graphs(test), predictor.predict_graphs(val)
    for head, model in report.models.items():
        hp = pred_test.heads[head]
        expect = calibration_metrics(y_test[head], hp.mean, hp.std)
        assert report.after[head].nll == pytest.approx(expect.nll)
        assert report.after[head].coverage_95 == expect.coverage_95
        np.testing.assert_allclose(sum(p ** 2 for p in hp.parts.values()), hp.std ** 2, rtol=1e-9)
        assert model.distance_limit is not None and model.weights.keys() <= {"epistemic", "aleatoric", "distance"}
        # the fitted weights (before the group scales) are a minimum of the validation NLL: scaling
        # them up or down is worse
        observed_val = predictor.observe(val)
        vp = pred_val.heads[head]
        plain = {h: m.model_copy(update={"groups": None}) for h, m in report.models.items()}
        base = calibration_metrics(y_val[head], vp.mean, predictor.combine(observed_val, plain).heads[head].std).nll
        for factor in (0.7, 1.4):
            scaled = {h: m.model_copy(update={"weights": {k: w * factor for k, w in m.weights.items()}})
                      for h, m in plain.items()}
            other = predictor.combine(observed_val, scaled).heads[head]
            assert calibration_metrics(y_val[head], other.mean, other.std).nll > base - 1e-9
        # the group scales are split-conformal on the fit split: every group covers >= 95% of its rows
        assert model.groups is not None and min(model.groups.scales) > 0
        z = np.abs(vp.mean - y_val[head]) / vp.std
        assert np.mean(z <= 1.959963984540054 + 1e-9) >= 0.95
    assert pred_test.in_domain is not None and pred_test.in_domain.mean() >= 0.8
    assert len(report.plots) == 6
    for png in report.plots:
        assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    stored = json.loads((copy / "calibration" / "calibration.json").read_text())
    assert set(stored["models"]) == set(report.models) and stored["fit_split"] == "valset"
    # the ensemble's test errors beside the baselines fitted on the trainset (select --calibrate prints them)
    assert report.accuracy is not None and report.accuracy.baseline_fit_split == "trainset"
    for head in report.models:
        accuracy = report.accuracy.heads[head]
        assert accuracy.stats.mae == pytest.approx(float(np.mean(np.abs(pred_test.heads[head].mean - y_test[head]))))
        assert accuracy.baseline is not None and stored["accuracy"]["heads"][head]["mae"] == accuracy.stats.mae
    assert any("has no calibration split" in w for w in report.warnings)  # the valset chose members too
    # the array file is checked like the checkpoints
    (copy / "uncertainty.npz").write_bytes((copy / "uncertainty.npz").read_bytes()[:-10])
    with pytest.raises(EnsembleIntegrityError, match="checksum mismatch for uncertainty.npz"):
        read_manifest(copy)


def test_a_calibration_split_is_what_the_uncertainty_is_fitted_on(tmp_path):
    """A dataset with a ``calset`` is calibrated on it, without the warning; one without it on the
    valset, with a warning naming the file and the fix."""
    from ase.build import bulk

    from ensemble.calibration import default_fit_split
    from graph_builders.atomic import atoms_to_graph
    from graph_builders.schema import HeadRegistry, HeadSpec
    from graph_builders.store import write_dataset

    graphs = []
    for k in range(8):
        g = atoms_to_graph(bulk("Cu", "fcc", a=3.6 + 0.01 * k, cubic=True), cutoff=4.0)
        g.y_energy = torch.tensor([[float(k)]])
        graphs.append(g)
    heads = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV")])
    four = write_dataset(tmp_path / "four.bp", graphs, heads, fractions=(0.5, 0.25, 0.125, 0.125))
    three = write_dataset(tmp_path / "three.bp", graphs, heads)
    assert default_fit_split(four) == ("calset", None)
    split, warning = default_fit_split(three)
    assert split == "valset" and str(three) in warning and "--fractions 0.7,0.1,0.1,0.1" in warning
