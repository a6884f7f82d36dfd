"""PNG plots of an ensemble's predictions (matplotlib, Agg backend): calibration curve, parity plot
with its MAE (per atom for an energy), RMSE and R² (error bars for graph heads, a hexbin for forces)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.accuracy import ErrorStats, error_stats
from ensemble.metrics import coverage_curve
from graph_builders.schema import MEV_PER_ATOM, HeadSpec, in_mev_per_atom


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


def parity_text(head: HeadSpec, stats: ErrorStats) -> str:
    """The figures a parity plot prints: MAE (and per atom for an energy, in meV/atom), RMSE, R²."""
    unit = f" {head.unit}" if head.unit else ""
    lines = [f"MAE {stats.mae:.4g}{unit}"]
    if stats.mae_per_atom is not None:
        lines.append(f"MAE {in_mev_per_atom(stats.mae_per_atom, head.unit):.4g} {MEV_PER_ATOM}")
    lines.append(f"RMSE {stats.rmse:.4g}{unit}")
    lines.append("R² -" if stats.r2 is None else f"R² {stats.r2:.4f}")
    lines.append(f"n = {stats.count}")
    return "\n".join(lines)


def parity_figure(y: np.ndarray, mean: np.ndarray, std: np.ndarray, head: HeadSpec,
                  atoms: np.ndarray | None = None, max_points: int = 2000) -> Any:
    """The parity figure (see :func:`parity_plot`); the caller closes it."""
    plt = _pyplot()
    stats = error_stats(head, y, mean, atoms)
    y, mean, std = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (y, mean, std))
    fig, ax = plt.subplots(figsize=(4.8, 4.5))
    lo, hi = float(min(y.min(), mean.min())), float(max(y.max(), mean.max()))
    if head.level == "node":  # every component of every atom: a density, not thousands of points
        cells = ax.hexbin(y, mean, gridsize=60, bins="log", mincnt=1, cmap="viridis",
                          extent=(lo, hi, lo, hi))
        fig.colorbar(cells, ax=ax, label="components per cell")
        title = f"parity: {head.name} (every component)"
    else:
        stride = max(1, y.size // max_points)
        ax.errorbar(y[::stride], mean[::stride], yerr=std[::stride], fmt="o", ms=2, lw=0.5, alpha=0.6, capsize=0)
        title = f"parity: {head.name} (error bars: 1 std)"
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax.text(0.03, 0.97, parity_text(head, stats), transform=ax.transAxes, va="top", ha="left", fontsize=8,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "edgecolor": "0.7"})
    label = f" [{head.unit}]" if head.unit else ""
    ax.set_xlabel(f"true {head.name}{label}")
    ax.set_ylabel(f"ensemble {head.name}{label}")
    ax.set_title(title)
    return fig


def parity_plot(y: np.ndarray, mean: np.ndarray, std: np.ndarray, path: str | os.PathLike,
                head: HeadSpec, atoms: np.ndarray | None = None, max_points: int = 2000) -> Path:
    """Predicted vs true values with MAE, RMSE and R² printed (an energy's MAE also per atom, from
    ``atoms`` per structure for a total): a graph head as points with +-1 std error bars (at most
    ``max_points``, evenly strided; the figures use all), a node head (forces) as a hexbin density
    of every component."""
    plt = _pyplot()
    fig = parity_figure(y, mean, std, head, atoms, max_points)
    path = _save(fig, path)
    plt.close(fig)
    return path
