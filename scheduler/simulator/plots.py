"""Utilisation-over-time and Gantt charts of a simulated campaign (PNG, matplotlib Agg)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scheduler.simulator.results import SimResult


def utilisation_curve(result: SimResult) -> tuple[np.ndarray, np.ndarray]:
    """(times, busy fraction) as a step function over the campaign (all occupied slots)."""
    deltas: dict[float, int] = {}
    for r in result.records:
        deltas[r.start] = deltas.get(r.start, 0) + len(r.held)
        deltas[r.end] = deltas.get(r.end, 0) - len(r.held)
    times = np.array(sorted(deltas))
    busy = np.cumsum([deltas[t] for t in times]) / result.total_slots
    return times, busy


def plot_utilisation(result: SimResult, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times, busy = utilisation_curve(result)
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.step(times / 3600, 100 * busy, where="post", lw=1)
    s = result.summary
    ax.set(xlabel="time (h)", ylabel="busy slots (%)", ylim=(0, 105),
           title=f"{s['policy']}: U = {100 * s['utilisation']:.1f}%, makespan/LB = {s['makespan_over_lb']:.2f}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sim_gantt(result: SimResult, path: str | Path, max_rows: int = 128) -> None:
    """One row per sampled node (at most ``max_rows`` evenly spaced nodes); a bar per attempt on
    that node, coloured by the trial's size (log scale), failed attempts hatched in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import cm, colors

    spn = result.slots_per_node
    num_nodes = result.total_slots // spn
    rows = np.unique(np.linspace(0, num_nodes - 1, min(max_rows, num_nodes)).astype(int))
    row_of = {int(n): i for i, n in enumerate(rows)}
    norm = colors.LogNorm(vmin=1, vmax=max(2, max((r.slots for r in result.records), default=2)))
    cmap = matplotlib.colormaps["viridis"]
    fig, ax = plt.subplots(figsize=(11, 6))
    for r in result.records:
        for node in sorted({s // spn for s in r.held}):
            if node in row_of:
                frac = sum(1 for s in r.held if s // spn == node) / spn
                ax.broken_barh([(r.start / 3600, (r.end - r.start) / 3600)], (row_of[node], 0.9 * frac),
                               facecolors="tab:red" if not r.ok else cmap(norm(r.slots)),
                               edgecolors="white", linewidths=0.4)
    ax.set(xlabel="time (h)", ylabel=f"node (every {max(1, num_nodes // len(rows))}th)",
           title=f"{result.summary['policy']}: sampled nodes (bar height = share of the node's slots)")
    ax.set_yticks(range(0, len(rows), max(1, len(rows) // 8)))
    ax.set_yticklabels([str(rows[i]) for i in range(0, len(rows), max(1, len(rows) // 8))])
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="trial size (slots)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
