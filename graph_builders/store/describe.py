"""A human-readable summary of a dataset (used by the CLI and ``make demo``): a dataset file, or a
sharded dataset (its shards' stored facts, so describing one reads no graph)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from graph_builders.store.reader import GraphStore
from graph_builders.store.sharded import ShardedStore, is_sharded


def describe(path: str | Path) -> str:
    """Splits and sizes, nodes/edges per graph, heads (level, dim, unit, target range), metadata."""
    if is_sharded(path):
        return _describe_sharded(Path(path))
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
        width = _width(store.heads)
        for head in store.heads:
            values = [store.read_key(s, head.key) for s in filled if head.key in store.keys(s)]
            both = np.concatenate([v.reshape(-1) for v in values]) if values else np.zeros(0)
            span = f"range [{both.min():.4g}, {both.max():.4g}], mean {both.mean():.4g}" if both.size else "no values"
            lines.append(_head_line(head, width, span))
        lines += _tail(store)
    return "\n".join(lines)


def _describe_sharded(path: Path) -> str:
    """As :func:`describe`, from the shards' facts (nodes and edges: mean and max, no min)."""
    with ShardedStore(path) as store:
        sizes = {s: store.num_graphs(s) for s in store.split_names}
        facts = store.facts.splits
        lines = [f"{store.path}: {sum(sizes.values())} graphs in {len(store.index.shards)} shards "
                 f"(layout {store.layout})",
                 "  splits: " + ", ".join(f"{s} {n}" for s, n in sizes.items())]
        filled = [facts[s] for s in sizes if sizes[s] and s in facts]
        graphs = sum(f.ndata for f in filled)
        if graphs:
            lines.append(f"  nodes/graph: mean {sum(f.nodes for f in filled) / graphs:.1f}, "
                         f"max {max(f.max_nodes for f in filled)}")
            lines.append(f"  edges/graph: mean {sum(f.edges for f in filled) / graphs:.1f}, "
                         f"max {max(f.max_edges for f in filled)}")
        lines.append(f"  heads: {len(store.heads)}")
        width = _width(store.heads)
        for head in store.heads:
            moments = [f.heads[head.name] for f in filled if head.name in f.heads and f.heads[head.name].count]
            if moments:
                low = min(float(m.low.min()) for m in moments)
                high = max(float(m.high.max()) for m in moments)
                mean = sum(float(m.total.sum()) for m in moments) / sum(m.count * m.dim for m in moments)
                span = f"range [{low:.4g}, {high:.4g}], mean {mean:.4g}"
            else:
                span = "no values"
            lines.append(_head_line(head, width, span))
        lines += _tail(store)
    return "\n".join(lines)


def _width(heads) -> int:
    return max([16] + [len(h.name) + 1 for h in heads])


def _head_line(head, width: int, span: str) -> str:
    unit = head.unit or "-"
    return f"    {head.name:<{width}} {head.level:<5} dim {head.dim:<3} unit {unit:<8} {span}"


def _tail(store) -> list[str]:
    lines = []
    if store.metadata:
        lines.append("  metadata:")
        lines.extend(f"    {key}: {value}" for key, value in sorted(store.metadata.items()))
    lines.append("  normalisation: " + ("stored" if store.normalisation is not None else "none"))
    return lines
