"""A human-readable summary of a dataset file (used by the CLI and ``make demo``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from graph_builders.store.reader import GraphStore


def describe(path: str | Path) -> str:
    """Splits and sizes, nodes/edges per graph, heads (level, dim, unit, target range), metadata."""
    lines: list[str] = []
    with GraphStore(path) as store:
        sizes = {s: store.num_graphs(s) for s in store.split_names}
        lines.append(f"{store.path}: {sum(sizes.values())} graphs")
        lines.append("  splits: " + ", ".join(f"{s} {n}" for s, n in sizes.items()))
        filled = [s for s, n in sizes.items() if n]
        for label, key in (("nodes", "pos"), ("edges", "edge_index")):
            if filled and all(key in store.keys(s) for s in filled):
                counts = np.concatenate([store.sizes(s, key) for s in filled])
                lines.append(
                    f"  {label}/graph: mean {counts.mean():.1f}, min {counts.min()}, max {counts.max()}"
                )
        lines.append(f"  heads: {len(store.heads)}")
        width = max([16] + [len(h.name) + 1 for h in store.heads])
        for head in store.heads:
            values = [store.read_key(s, head.key) for s in filled if head.key in store.keys(s)]
            both = np.concatenate([v.reshape(-1) for v in values]) if values else np.zeros(0)
            span = f"range [{both.min():.4g}, {both.max():.4g}], mean {both.mean():.4g}" if both.size else "no values"
            unit = head.unit or "-"
            lines.append(f"    {head.name:<{width}} {head.level:<5} dim {head.dim:<3} unit {unit:<8} {span}")
        if store.metadata:
            lines.append("  metadata:")
            lines.extend(f"    {key}: {value}" for key, value in sorted(store.metadata.items()))
        lines.append("  normalisation: " + ("stored" if store.normalisation is not None else "none"))
    return "\n".join(lines)
