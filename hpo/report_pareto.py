"""The Pareto front of a multi-objective campaign: its text section and its plot in the report.

The front is taken over the trials that trained their whole budget (completed, or timed out with
their best epoch): a trial stopped early has a worse accuracy and a smaller training cost than it
would have had, so it is drawn but never on the front.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hpo.state import CampaignState, TrialRecord
from hpo.stoppers.pareto import front_index
from hydragnn_ensemble.result import TrialStatus

__all__ = ["ParetoFront", "format_pareto", "pareto_front", "plot_pareto"]

#: the statuses whose trials may be on the front (their whole budget trained)
FRONT_STATUSES = (TrialStatus.COMPLETED, TrialStatus.TIMEOUT)


@dataclass
class ParetoFront:
    """The objectives' names, the non-dominated trials (by the first objective) and every other
    trial with all its objectives (``others``: dominated, or stopped early)."""

    names: list[str]
    front: list[TrialRecord]
    others: list[TrialRecord]


def pareto_front(state: CampaignState) -> ParetoFront | None:
    """The front of ``state`` (None: the campaign has one objective)."""
    if not state.objectives.multi:
        return None
    scored = [r for _, r in sorted(state.trials.items()) if r.finished and r.objective_values is not None]
    eligible = [r for r in scored if r.status in FRONT_STATUSES]
    fronts = front_index([r.objective_values for r in eligible])
    front = sorted((r for r, f in zip(eligible, fronts) if f == 0), key=lambda r: (r.objective_values, r.trial_id))
    on_front = {r.trial_id for r in front}
    return ParetoFront(state.objectives.texts, front, [r for r in scored if r.trial_id not in on_front])


def format_pareto(front: ParetoFront) -> str:
    """The front as a text table: one line per non-dominated trial, best first objective first."""
    header = ["trial", *front.names]
    rows = [[str(r.trial_id), *(f"{v:.4g}" for v in r.objective_values)] for r in front.front]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [f"Pareto front ({len(front.front)} of {len(front.front) + len(front.others)} trials with every "
             f"objective; completed or timed out, not stopped early; all minimised):"]
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    lines.extend("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows)
    return "\n".join(lines)


def plot_pareto(front: ParetoFront, path: str | os.PathLike) -> bool:
    """The first objective against each other one (one panel each): the front's trials joined as a
    staircase, dominated trials grey, trials stopped early as open circles. False: nothing to draw."""
    if not front.front:
        return False
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    panels = len(front.names) - 1
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.2), dpi=100, squeeze=False)
    for j, ax in enumerate(axes[0], start=1):
        _panel(ax, front, j)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def _panel(ax: Any, front: ParetoFront, j: int) -> None:
    """Objective ``j`` (y) against the first (x)."""
    stopped = [r for r in front.others if r.status == TrialStatus.STOPPED]
    dominated = [r for r in front.others if r.status != TrialStatus.STOPPED]
    ax.scatter([r.objective_values[0] for r in dominated], [r.objective_values[j] for r in dominated],
               s=16, color="0.6", label=f"dominated ({len(dominated)})", zorder=2)
    ax.scatter([r.objective_values[0] for r in stopped], [r.objective_values[j] for r in stopped],
               s=16, facecolors="none", edgecolors="tab:orange", label=f"stopped early ({len(stopped)})", zorder=2)
    points = sorted((r.objective_values[0], r.objective_values[j]) for r in front.front)
    if len(front.names) == 2:  # with more objectives the front is not a staircase in one panel
        ax.step([p[0] for p in points], [p[1] for p in points], where="post", color="tab:blue", linewidth=1, zorder=3)
    ax.scatter([p[0] for p in points], [p[1] for p in points], s=28, color="tab:blue",
               label=f"Pareto front ({len(points)})", zorder=4)
    values = [r.objective_values[j] for r in front.front + front.others]
    if min(values) > 0 and max(values) / min(values) > 30:
        ax.set_yscale("log")
    ax.set_xlabel(front.names[0].replace("$", r"\$") + " (lower is better)")
    ax.set_ylabel(front.names[j].replace("$", r"\$") + " (lower is better)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
