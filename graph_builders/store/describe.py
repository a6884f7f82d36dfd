"""A human-readable summary of a dataset (used by the CLI and ``make demo``), from its facts: no
sample is read, whatever the dataset's size."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from graph_builders.store.facts import Moments
from graph_builders.store.facts_cache import dataset_facts
from graph_builders.store.sharded import open_dataset


def describe(path: str | Path) -> str:
    """Splits and sizes, nodes/edges per graph, heads (level, dim, unit, target range), metadata."""
    lines: list[str] = []
    with open_dataset(path) as store:
        facts = dataset_facts(store)
        splits = {s: facts.splits[s] for s in store.split_names}
        total = sum(f.ndata for f in splits.values())
        shards = f" in {len(store.index.shards)} shards" if getattr(store, "sharded", False) else ""
        lines.append(f"{store.path}: {total} graphs{shards}")
        lines.append("  splits: " + ", ".join(f"{s} {f.ndata}" for s, f in splits.items()))
        filled = [f for f in splits.values() if f.ndata]
        if filled:
            n = sum(f.ndata for f in filled)
            for label, count, low, high in (("nodes", "nodes", "min_nodes", "max_nodes"),
                                            ("edges", "edges", "min_edges", "max_edges")):
                lines.append(f"  {label}/graph: mean {sum(getattr(f, count) for f in filled) / n:.1f}, "
                             f"min {min(getattr(f, low) for f in filled)}, max {max(getattr(f, high) for f in filled)}")
        lines.append(f"  heads: {len(store.heads)}")
        width = max([16] + [len(h.name) + 1 for h in store.heads])
        for head in store.heads:
            moments = [f.heads[head.name] for f in filled if head.name in f.heads]
            span = _span(moments)
            unit = head.unit or "-"
            lines.append(f"    {head.name:<{width}} {head.level:<5} dim {head.dim:<3} unit {unit:<8} {span}")
        if store.metadata:
            lines.append("  metadata:")
            lines.extend(f"    {key}: {value}" for key, value in sorted(store.metadata.items()))
        lines.append("  normalisation: " + ("stored" if store.normalisation is not None else "none"))
    return "\n".join(lines)


def _span(moments: list[Moments]) -> str:
    """Range and mean over every component of a head's targets in the splits."""
    total = None
    for m in moments:
        total = m if total is None else total.merged(m)
    if total is None or total.count == 0:
        return "no values"
    mean = float(total.total.sum() / (total.count * total.dim))
    return f"range [{float(np.min(total.low)):.4g}, {float(np.max(total.high)):.4g}], mean {mean:.4g}"
