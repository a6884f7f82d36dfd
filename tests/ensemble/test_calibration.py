"""Calibration metrics on synthetic Gaussian data, std scaling, and calibrating a real ensemble."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from ensemble import (
    EnsemblePredictor,
    calibrate,
    calibration_metrics,
    coverage_curve,
    fit_std_scale,
    read_manifest,
    read_split,
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
    copy = tmp_path / "ens"
    shutil.copytree(direct_ensemble, copy)
    raw = EnsemblePredictor(copy)
    val = read_split(direct_campaign.dataset, "valset")
    test = read_split(direct_campaign.dataset, "testset")
    raw_val, raw_test = raw.predict_graphs(val), raw.predict_graphs(test)
    report = calibrate(copy, plots=True)
    y_val, y_test = split_targets(val, raw.heads), split_targets(test, raw.heads)
    for head in ("formation_energy", "stress", "forces"):
        hp = raw_val.heads[head]
        s = np.sqrt(np.mean(((hp.mean - y_val[head]) / hp.std) ** 2))
        assert report.scales[head] == pytest.approx(s, rel=1e-9)
        t = raw_test.heads[head]
        expect = calibration_metrics(y_test[head], t.mean, t.std * s)
        assert report.after[head].coverage_95 == expect.coverage_95
        assert report.after[head].nll == pytest.approx(expect.nll)
    assert read_manifest(copy).calibration == report.scales
    scaled = EnsemblePredictor(copy).predict_graphs(test)
    for head, s in report.scales.items():
        np.testing.assert_allclose(scaled.heads[head].std, raw_test.heads[head].std * s, rtol=1e-12)
        np.testing.assert_allclose(scaled.heads[head].mean, raw_test.heads[head].mean)
    assert len(report.plots) == 6
    for png in report.plots:
        assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    stored = json.loads((copy / "calibration" / "calibration.json").read_text())
    assert stored["scales"] == report.scales and set(stored["after"]) == set(report.scales)
