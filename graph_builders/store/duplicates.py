"""Exact duplicates across a dataset's splits: a structure in the training split and again in the
validation, test or calibration split makes those splits' errors look better than new data's.

Two graphs are the same structure when their atomic numbers (or node features when there are none),
positions and cell agree to :data:`DECIMALS` decimals, in the same node order (a permuted copy is
not found: "exact" duplicates only).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from torch_geometric.data import Data

DECIMALS = 5


def structure_key(graph: Data) -> bytes:
    """A digest of the graph's species, positions and cell, rounded to :data:`DECIMALS` decimals."""
    digest = hashlib.blake2b(digest_size=16)
    for key in ("z", "x", "pos", "cell"):
        value = getattr(graph, key, None)
        if value is None or (key == "x" and getattr(graph, "z", None) is not None):
            continue
        array = np.asarray(value.detach().cpu().numpy(), dtype=np.float64)
        digest.update(key.encode() + str(array.shape).encode())
        digest.update(np.round(array, DECIMALS).tobytes())
    return digest.digest()


@dataclass(frozen=True)
class CrossSplitDuplicate:
    """Graph ``index`` of split ``split`` repeats graph ``first_index`` of ``first_split``."""

    split: str
    index: int
    first_split: str
    first_index: int


def duplicates_across_splits(graphs: Sequence[Data],
                             splits: Mapping[str, Sequence[int]]) -> list[CrossSplitDuplicate]:
    """Graphs (indices into ``graphs``) that repeat a graph of an earlier split, in split order."""
    first: dict[bytes, tuple[str, int]] = {}
    found: list[CrossSplitDuplicate] = []
    for split, indices in splits.items():
        for i in np.asarray(indices, dtype=np.int64).tolist():
            key = structure_key(graphs[i])
            seen = first.get(key)
            if seen is None:
                first[key] = (split, i)
            elif seen[0] != split:
                found.append(CrossSplitDuplicate(split, i, seen[0], seen[1]))
    return found


def duplicate_warning(found: Sequence[CrossSplitDuplicate], splits: Mapping[str, Sequence[int]]) -> str | None:
    """One warning line for the user (None when there is nothing to say)."""
    if not found:
        return None
    per_split: dict[str, int] = {}
    for d in found:
        per_split[d.split] = per_split.get(d.split, 0) + 1
    counts = ", ".join(f"{n} of {len(splits[s])} {s}" for s, n in per_split.items())
    examples = "; ".join(f"graph {d.index} ({d.split}) = graph {d.first_index} ({d.first_split})" for d in found[:3])
    return (f"exact duplicate structures across splits: {counts} repeat a structure of an earlier split "
            f"(e.g. {examples}); their errors will look like training errors. Remove the copies from the "
            "inputs or give the splits explicitly.")
