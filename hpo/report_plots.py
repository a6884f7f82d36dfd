"""The campaign report's figures of the trials themselves, each drawn from the campaign state:

* :func:`plot_objective`: ``report/objective.png``, objective per trial in finishing order, one
  colour per final status, failures marked, best-so-far;
* :func:`plot_parallel`: ``report/parallel.png``, parallel coordinates of the searched parameters
  and the objective;
* :func:`plot_curves`: ``report/curves.png``, the learning curves the trials reported;
* :func:`plot_importance`: ``report/importance.png``, the hyperparameter importances
  (:mod:`hpo.importance`).

The slot usage (:mod:`hpo.gantt`), the cost model (:mod:`hpo.report_costs`) and the Pareto front
(:mod:`hpo.report_pareto`) have their own modules.
"""

from __future__ import annotations

import math
import os
from typing import Any

from hpo.figure_style import STATUS_COLOURS, pyplot
from hpo.state import CampaignState
from hpo.status import TrialStatus

__all__ = ["CURVE_LIMIT", "plot_curves", "plot_importance", "plot_objective", "plot_parallel"]


def plot_objective(state: CampaignState, path: str | os.PathLike) -> None:
    """Objective of each finished trial in finishing order, one colour per final status (completed,
    timeout, stopped early, diverged ...), trials without an objective as crosses on top, and the
    best-so-far line."""
    plt = pyplot()
    finished = sorted(
        state.finished, key=lambda r: (r.last_attempt.end if r.last_attempt and r.last_attempt.end is not None else math.inf, r.trial_id)
    )
    by_status: dict[str, tuple[list[int], list[float]]] = {}
    fail_x: dict[str, list[int]] = {}
    best_x, best_y = [], []
    best = math.inf
    for i, record in enumerate(finished, start=1):
        if record.objective is None:
            fail_x.setdefault(record.status, []).append(i)
        else:
            xs, ys = by_status.setdefault(record.status, ([], []))
            xs.append(i)
            ys.append(record.objective)
            best = min(best, record.objective)
        if best < math.inf:
            best_x.append(i)
            best_y.append(best)
    values = [y for _, ys in by_status.values() for y in ys]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for status, (xs, ys) in sorted(by_status.items()):
        ax.scatter(xs, ys, s=18, color=STATUS_COLOURS[status], label=f"{status} ({len(xs)})",
                   zorder=3)
    ax.step(best_x, best_y, where="post", color="black", linewidth=1.5, label="best so far", zorder=4)
    if values and min(values) > 0 and max(values) / min(values) > 100:
        ax.set_yscale("log")
    top = max(values) if values else 1.0
    for status, xs in sorted(fail_x.items()):
        ax.scatter(xs, [top] * len(xs), marker="x", color=STATUS_COLOURS[status],
                   label=f"{status}, no objective ({len(xs)})", zorder=3, clip_on=False)
    ax.set_xlabel("trials in finishing order")
    ax.set_ylabel(_plain(f"objective ({state.objective_name}, lower is better)"))
    title = "objective per trial"
    if state.best_trial is not None:
        title += f" - best: trial {state.best_trial.trial_id} = {state.best_objective:.4g}"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _plain(text: str) -> str:
    """``text`` for a matplotlib label, drawn as it is: a ``$`` would start mathtext."""
    return text.replace("$", r"\$")


def _axis_position(values: list[Any]) -> tuple[list[float], list[float], list[str]]:
    """Values of one parameter on a [0, 1] axis (numbers linearly, or by decades when they span
    more than 100x; anything else by its sorted distinct values), with tick positions and labels."""
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) == len(values) and numbers:
        lo, hi = min(numbers), max(numbers)
        scale = math.log10 if lo > 0 and hi / lo > 100 else (lambda v: v)
        a, b = scale(lo), scale(hi)
        span = (b - a) or 1.0
        return [(scale(v) - a) / span for v in numbers], [0.0, 1.0], [f"{lo:.3g}", f"{hi:.3g}"]
    levels = sorted({str(v) for v in values})
    where = {v: i / max(len(levels) - 1, 1) for i, v in enumerate(levels)}
    return [where[str(v)] for v in values], list(where.values()), levels


def plot_parallel(state: CampaignState, path: str | os.PathLike, short: dict[str, str]) -> bool:
    """Parallel coordinates of the searched parameters and the objective, one line per trial with
    an objective, coloured by it (best on top); False (nothing written) without such trials."""
    plt = pyplot()
    records = sorted((r for r in state.trials.values() if r.objective is not None), key=lambda r: -r.objective)
    keys = [k for k in state.param_keys if all(k in r.params for r in records)]
    if not records or not keys:
        return False
    columns = [_axis_position([r.params[k] for r in records]) for k in keys]
    columns.append(_axis_position([r.objective for r in records]))
    names = [short.get(k, k) for k in keys] + ["objective"]
    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 4.5), dpi=100)
    colours = plt.get_cmap("viridis_r")(columns[-1][0])
    from matplotlib.collections import LineCollection

    lines = [list(zip(range(len(names)), [col[0][i] for col in columns])) for i in range(len(records))]
    ax.add_collection(LineCollection(lines, colors=colours, linewidths=0.8 if len(records) > 300 else 1.4,
                                     alpha=0.35 if len(records) > 300 else 0.8))
    for x, (_, ticks, labels) in enumerate(columns):
        ax.axvline(x, color="black", linewidth=0.8)
        shown = range(0, len(ticks), max(1, len(ticks) // 8))
        for i in shown:
            ax.text(x + 0.03, ticks[i], _plain(labels[i]), fontsize=7, va="center")
    ax.set_xticks(range(len(names)), [_plain(n) for n in names], rotation=15, fontsize=8)
    ax.set_yticks([])
    ax.set_xlim(-0.2, len(names) - 0.6)
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"parallel coordinates: {len(records)} trials with an objective (yellow = best)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


#: learning-curve values beyond this magnitude are not drawn (a diverging trial may report 1e308)
CURVE_LIMIT = 1e100


def plot_curves(state: CampaignState, path: str | os.PathLike) -> bool:
    """The learning curves the trials reported (validation objective per epoch), a stopped trial's
    ending in a cross, the best trial's bold; False (nothing written) when no trial reported any."""
    curves = [(r, r.curve) for r in state.trials.values()
              if any(v is not None and abs(v) <= CURVE_LIMIT for _, v in r.curve)]
    if not curves:  # no epoch reported a value (a simulated campaign without learning curves)
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    best = min((r for r, _ in curves if r.objective is not None), key=lambda r: r.objective, default=None)
    for record, curve in curves:
        points = [(e, v) for e, v in curve if v is not None and abs(v) <= CURVE_LIMIT]
        if not points:
            continue
        epochs, values = zip(*points)
        is_best = record is best
        ax.plot(epochs, values, lw=2.2 if is_best else 0.8, alpha=1.0 if is_best else 0.55,
                color=STATUS_COLOURS[record.status],
                label=f"best: trial {record.trial_id}" if is_best else None)
        if record.status == TrialStatus.STOPPED:
            ax.plot(epochs[-1], values[-1], "x", color="#d62728", ms=5)
    ax.set_xlabel("epoch")
    ax.set_ylabel(_plain(f"validation {state.objective_name}"))
    ax.set_yscale("log" if all(v > 0 for _, c in curves for _, v in c if v is not None and abs(v) <= CURVE_LIMIT)
                  else "linear")
    stopped = sum(r.status == TrialStatus.STOPPED for r, _ in curves)
    ax.set_title(f"learning curves of {len(curves)} trials ({stopped} stopped early: x)")
    if best is not None:
        ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True



def plot_importance(found: list[Any], path: str | os.PathLike, short: dict[str, str]) -> None:
    """One panel per target: each parameter's importance with its 10-90% range over half-samples."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(found), figsize=(4.2 * len(found), 0.5 + 0.45 * len(found[0].params)),
                             squeeze=False)
    for ax, target in zip(axes[0], found):
        params = list(reversed(target.params))
        y = range(len(params))
        ax.barh(y, [p.importance for p in params], color="tab:blue", alpha=0.7)
        ax.errorbar([p.importance for p in params], y, fmt="none", ecolor="black", capsize=3,
                    xerr=[[max(0.0, p.importance - p.low) for p in params],
                          [max(0.0, p.high - p.importance) for p in params]])
        ax.set_yticks(list(y), [_plain(short.get(p.key, p.key)) for p in params])
        ax.set_xlim(0, 1)
        ax.set_title(_plain(f"{target.target} ({target.num_trials} trials)"), fontsize=9)
        ax.set_xlabel("PED-ANOVA importance (10-90% over halves)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

