"""How well predicted stds match errors: the metrics of calibration reports and the benchmark.

Per head (every component of every row counts as one sample):

* MAE, RMSE of the ensemble mean;
* Gaussian NLL ``mean(0.5 log(2 pi std^2) + err^2 / (2 std^2))``;
* coverage of the central 68.27% and 95.45% Gaussian intervals (``|err| <= z std``, z = 1, 2);
* ZMS, the mean squared z-score ``mean((err / std)^2)`` (1 when the std is right on average);
* Spearman rank correlation between ``|err|`` and ``std``;
* miscalibration area: the mean absolute gap between expected and observed coverage over the
  central intervals at 1%..99% (0 when calibrated);
* AUROC of the std as a detector of large errors (:func:`auroc`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: std values below this are clamped (a member set that agrees exactly would give NLL = inf).
MIN_STD = 1e-12
#: Gaussian central-interval probabilities at 1 and 2 standard deviations.
P68 = math.erf(1 / math.sqrt(2))
P95 = math.erf(2 / math.sqrt(2))


@dataclass
class HeadCalibration:
    """Calibration metrics of one head on one split."""

    n: int
    mae: float
    rmse: float
    nll: float
    coverage_68: float
    coverage_95: float
    spearman: float | None  # None when std or |err| is constant
    mean_std: float
    zms: float = float("nan")
    miscalibration_area: float = float("nan")


def _flat(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).reshape(-1)


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman rank correlation (ties get average ranks); None for constant input."""
    from scipy.stats import spearmanr

    a, b = _flat(a), _flat(b)
    if a.size < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return None
    return float(spearmanr(a, b).statistic)


def coverage_curve(y: np.ndarray, mean: np.ndarray, std: np.ndarray,
                   levels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Expected vs observed coverage of central Gaussian intervals at ``levels`` (0..1)."""
    from scipy.stats import norm

    levels = np.linspace(0.05, 0.99, 20) if levels is None else np.asarray(levels, dtype=np.float64)
    z = np.abs(_flat(mean) - _flat(y)) / np.maximum(_flat(std), MIN_STD)
    half_width = norm.ppf(0.5 + levels / 2.0)
    observed = np.array([np.mean(z <= w) for w in half_width])
    return levels, observed


def miscalibration_area(y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> float:
    """Mean |expected - observed| coverage over central intervals at 1%..99%."""
    levels, observed = coverage_curve(y, mean, std, np.linspace(0.01, 0.99, 99))
    return float(np.mean(np.abs(observed - levels)))


def auroc(score: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve of ``score`` for the boolean labels ``positive`` (ties counted
    half); None when a class is empty."""
    from scipy.stats import rankdata

    score, positive = _flat(score), np.asarray(positive, dtype=bool).reshape(-1)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def calibration_metrics(y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> HeadCalibration:
    """Metrics of predictions ``mean`` +- ``std`` against targets ``y`` (same shapes)."""
    y, mean, std = _flat(y), _flat(mean), _flat(std)
    if not (y.shape == mean.shape == std.shape):
        raise ValueError(f"shapes differ: y {y.shape}, mean {mean.shape}, std {std.shape}")
    if y.size == 0:
        raise ValueError("no samples to calibrate on")
    err = mean - y
    s = np.maximum(std, MIN_STD)
    z = np.abs(err) / s
    nll = float(np.mean(0.5 * np.log(2 * np.pi * s * s) + 0.5 * z * z))
    return HeadCalibration(
        n=int(y.size), mae=float(np.mean(np.abs(err))), rmse=float(np.sqrt(np.mean(err * err))),
        nll=nll, coverage_68=float(np.mean(z <= 1.0)), coverage_95=float(np.mean(z <= 2.0)),
        spearman=spearman(np.abs(err), std), mean_std=float(np.mean(std)), zms=float(np.mean(z * z)),
        miscalibration_area=miscalibration_area(y, mean, std))


def fit_std_scale(y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> float:
    """The NLL-optimal factor ``s`` for a std: ``s^2 = mean((err / std)^2)`` (the ZMS)."""
    err = _flat(mean) - _flat(y)
    if np.all(_flat(std) <= MIN_STD):
        raise ValueError("the ensemble has no spread (one distinct member without a variance head): "
                         "nothing to scale")
    s = np.maximum(_flat(std), MIN_STD)
    value = float(np.sqrt(np.mean((err / s) ** 2)))
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"cannot fit a std scale (got {value}); are the members identical?")
    return value
