"""PNG plots of an ensemble's predictions (matplotlib, Agg backend): calibration curve, parity plot
with error bars."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.metrics import coverage_curve


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike) -> Path:
    path = Path(path)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    os.replace(tmp, path)
    return path


def calibration_curve_plot(y: np.ndarray, mean: np.ndarray, raw_std: np.ndarray, std: np.ndarray,
                           path: str | os.PathLike, head: str) -> Path:
    """Expected vs observed coverage of central intervals: the members' raw spread and the
    calibrated std."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    levels, raw = coverage_curve(y, mean, raw_std)
    _, calibrated = coverage_curve(y, mean, std)
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="ideal")
    ax.plot(levels, raw, "o-", ms=3, label="ensemble spread")
    ax.plot(levels, calibrated, "s-", ms=3, label="calibrated std")
    ax.set_xlabel("expected coverage")
    ax.set_ylabel("observed coverage")
    ax.set_title(f"calibration: {head}")
    ax.legend(loc="upper left", fontsize=8)
    path = _save(fig, path)
    plt.close(fig)
    return path


def parity_plot(y: np.ndarray, mean: np.ndarray, std: np.ndarray, path: str | os.PathLike,
                head: str, unit: str = "", max_points: int = 2000) -> Path:
    """Predicted (with +-1 std error bars) vs true values; at most ``max_points`` (evenly strided)."""
    plt = _pyplot()
    y, mean, std = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (y, mean, std))
    stride = max(1, y.size // max_points)
    y, mean, std = y[::stride], mean[::stride], std[::stride]
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.errorbar(y, mean, yerr=std, fmt="o", ms=2, lw=0.5, alpha=0.6, capsize=0)
    lo, hi = float(min(y.min(), mean.min())), float(max(y.max(), mean.max()))
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    label = f" [{unit}]" if unit else ""
    ax.set_xlabel(f"true {head}{label}")
    ax.set_ylabel(f"ensemble {head}{label}")
    ax.set_title(f"parity: {head} (error bars: 1 std)")
    path = _save(fig, path)
    plt.close(fig)
    return path
