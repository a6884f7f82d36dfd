"""How well the ensemble's uncertainty matches its errors, and a per-head std scale that fixes it.

Per head (every component of every row counts as one sample):

* MAE, RMSE of the ensemble mean;
* Gaussian NLL: ``mean(0.5 log(2 pi std^2) + err^2 / (2 std^2))``;
* coverage of the central 68.27% and 95.45% Gaussian intervals (``|err| <= z std``, z = 1, 2);
* Spearman rank correlation between ``|err|`` and ``std``.

The std scale ``s`` minimising the validation NLL of ``N(mean, (s std)^2)`` is
``s^2 = mean((err / std)^2)``. :func:`calibrate` fits it on the validation split, stores it in the
manifest (the predictor multiplies every std by it) and reports the test split before and after.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ensemble.manifest import read_manifest, write_manifest

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


def _flat(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).reshape(-1)


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman rank correlation (ties get average ranks); None for constant input."""
    from scipy.stats import spearmanr

    a, b = _flat(a), _flat(b)
    if a.size < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return None
    return float(spearmanr(a, b).statistic)


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
        spearman=spearman(np.abs(err), std), mean_std=float(np.mean(std)))


def fit_std_scale(y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> float:
    """The NLL-optimal factor ``s`` for the std: ``s^2 = mean((err / std)^2)``."""
    err = _flat(mean) - _flat(y)
    if np.all(_flat(std) <= MIN_STD):
        raise ValueError("the ensemble has no spread (one distinct member without a variance head): "
                         "nothing to scale")
    s = np.maximum(_flat(std), MIN_STD)
    value = float(np.sqrt(np.mean((err / s) ** 2)))
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"cannot fit a std scale (got {value}); are the members identical?")
    return value


def coverage_curve(y: np.ndarray, mean: np.ndarray, std: np.ndarray,
                   levels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Expected vs observed coverage of central Gaussian intervals at ``levels`` (0..1)."""
    from scipy.stats import norm

    levels = np.linspace(0.05, 0.99, 20) if levels is None else np.asarray(levels, dtype=np.float64)
    z = np.abs(_flat(mean) - _flat(y)) / np.maximum(_flat(std), MIN_STD)
    half_width = norm.ppf(0.5 + levels / 2.0)
    observed = np.array([np.mean(z <= w) for w in half_width])
    return levels, observed


@dataclass
class CalibrationReport:
    """Scales fitted on ``fit_split`` and the metrics on ``eval_split`` before/after scaling."""

    scales: dict[str, float]
    before: dict[str, HeadCalibration]
    after: dict[str, HeadCalibration]
    fit_split: str = "valset"
    eval_split: str = "testset"
    plots: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # head -> why it was not calibrated

    def to_dict(self) -> dict:
        return {"scales": self.scales, "fit_split": self.fit_split, "eval_split": self.eval_split,
                "before": {h: asdict(m) for h, m in self.before.items()},
                "after": {h: asdict(m) for h, m in self.after.items()}, "plots": self.plots,
                "skipped": self.skipped}

    def format_table(self) -> str:
        """A plain-text table, one line per head (after scaling)."""
        lines = [f"{'head':<18}{'scale':>8}{'MAE':>11}{'RMSE':>11}{'NLL':>9}{'cov68':>7}{'cov95':>7}{'spearman':>9}"]
        for head, m in self.after.items():
            rho = "-" if m.spearman is None else f"{m.spearman:.2f}"
            lines.append(f"{head:<18}{self.scales.get(head, 1.0):>8.3f}{m.mae:>11.4g}{m.rmse:>11.4g}"
                         f"{m.nll:>9.3f}{m.coverage_68:>7.2f}{m.coverage_95:>7.2f}{rho:>9}")
        for head, why in self.skipped.items():
            lines.append(f"{head:<18}not calibrated: {why}")
        return "\n".join(lines)


def calibrate(ensemble_dir: str | os.PathLike, dataset: str | os.PathLike | None = None, *,
              fit_split: str = "valset", eval_split: str = "testset", store: bool = True,
              plots: bool = True, progress: bool = False) -> CalibrationReport:
    """Fit per-head std scales on ``fit_split`` of ``dataset`` (default: the manifest's dataset),
    store them in the manifest (when ``store``), write ``calibration.json`` and (``plots``)
    calibration-curve and parity PNGs into ``ENSEMBLE_DIR/calibration/``."""
    from ensemble.predictor import EnsemblePredictor

    root = Path(ensemble_dir)
    manifest = read_manifest(root)
    dataset = dataset or manifest.dataset
    if dataset is None:
        raise ValueError(f"{root}: the manifest records no dataset; pass one to calibrate on")
    predictor = EnsemblePredictor(root, progress=progress, verify=False)
    predictor.manifest.calibration = {}  # fit on the raw (unscaled) spread
    fit_pred, fit_y = predictor.predict_split(dataset, fit_split)
    eval_pred, eval_y = predictor.predict_split(dataset, eval_split)
    scales: dict[str, float] = {}
    before: dict[str, HeadCalibration] = {}
    after: dict[str, HeadCalibration] = {}
    skipped: dict[str, str] = {}
    for head, hp in fit_pred.heads.items():
        if head not in fit_y or head not in eval_y:
            skipped[head] = "no targets in the dataset"
            continue
        try:
            scales[head] = fit_std_scale(fit_y[head], hp.mean, hp.std)
        except ValueError as exc:
            skipped[head] = str(exc)
            continue
        ev = eval_pred.heads[head]
        before[head] = calibration_metrics(eval_y[head], ev.mean, ev.std)
        after[head] = calibration_metrics(eval_y[head], ev.mean, ev.std * scales[head])
    report = CalibrationReport(scales, before, after, fit_split, eval_split, skipped=skipped)
    out = root / "calibration"
    out.mkdir(exist_ok=True)
    if plots:
        from ensemble.plots import calibration_curve_plot, parity_plot

        for head in after:
            ev = eval_pred.heads[head]
            s = scales[head]
            report.plots.append(str(calibration_curve_plot(
                eval_y[head], ev.mean, ev.std, s, out / f"calibration_{head}.png", head)))
            report.plots.append(str(parity_plot(
                eval_y[head], ev.mean, ev.std * s, out / f"parity_{head}.png", head, ev.head.unit)))
    tmp = out / "calibration.json.tmp"
    tmp.write_text(json.dumps(report.to_dict(), indent=2))
    os.replace(tmp, out / "calibration.json")
    if store:
        manifest.calibration = scales
        write_manifest(root, manifest)
    return report
