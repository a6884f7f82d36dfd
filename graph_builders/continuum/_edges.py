"""Unique element edges by sorting integer keys (no ``np.unique``: it is far slower on int64 keys).

Each element edge (a, b) is encoded as the int64 key ``min(a, b) << s | max(a, b)`` with
``s = bit_length(num_points - 1)``; one in-place ``np.sort`` and a neighbour mask leave each edge once,
and shifts/masks decode the key without integer division.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from graph_builders.continuum._elements import ElementType

MAX_POINTS = 2**31  # two point indices must fit side by side in one int64 key


def unique_element_edges(
    blocks: Sequence[tuple[ElementType, np.ndarray]], num_points: int
) -> np.ndarray:
    """Unique undirected edges of all cell blocks as an int64 array [2, U] with row 0 < row 1.

    ``blocks`` pairs an element type with its cells [C, >=num_corners] (point indices, corners first).
    The edges come out sorted by (row 0, row 1).
    """
    if num_points > MAX_POINTS:
        raise ValueError(f"meshes with more than {MAX_POINTS} points are not supported")
    shift = max(int(num_points - 1).bit_length(), 1)
    index_dtype = np.int32 if num_points <= np.iinfo(np.int32).max else np.int64
    total = sum(len(element.edges) * cells.shape[0] for element, cells in blocks)
    keys = np.empty(total, dtype=np.int64)
    start = 0
    for element, cells in blocks:
        corners = cells[:, : element.num_corners].astype(index_dtype, copy=False)
        count = corners.shape[0]
        lo = np.empty(count, dtype=index_dtype)
        hi = np.empty(count, dtype=index_dtype)
        for a, b in element.edges:
            np.minimum(corners[:, a], corners[:, b], out=lo)
            np.maximum(corners[:, a], corners[:, b], out=hi)
            segment = keys[start : start + count]
            segment[:] = lo
            segment <<= shift
            segment |= hi
            start += count
    keys.sort()
    if keys.size == 0:
        return np.empty((2, 0), dtype=np.int64)
    first = np.empty(keys.size, dtype=bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    unique = keys[first]
    edges = np.empty((2, unique.size), dtype=np.int64)
    np.right_shift(unique, shift, out=edges[0])
    np.bitwise_and(unique, (1 << shift) - 1, out=edges[1])
    return edges


def both_directions(edges: np.ndarray) -> np.ndarray:
    """[2, U] undirected pairs -> [2, 2U]: the pairs as given, then reversed."""
    count = edges.shape[1]
    out = np.empty((2, 2 * count), dtype=np.int64)
    out[:, :count] = edges
    out[0, count:] = edges[1]
    out[1, count:] = edges[0]
    return out
