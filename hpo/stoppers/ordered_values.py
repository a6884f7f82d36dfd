"""A sorted multiset of numbers with rank and k-th-smallest look-ups: what lets a stopper judge a
value against a rung of half a million others without sorting them (issue #45).

Kept as consecutive sorted blocks of at most ``2 * load`` values, the largest value of each block
in ``maxes`` (bisected to find a value's block) and a Fenwick tree over the blocks' lengths (the
number of values before a block, the block holding the k-th value). :meth:`OrderedValues.add`,
:meth:`~OrderedValues.remove`, :meth:`~OrderedValues.count_below` and indexing cost O(log n)
comparisons and at most one block's move in memory (``load`` values, a constant); the tree is
rebuilt, in O(n / load), only when a block is split or emptied: at most once per ``load`` changes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Iterable, Iterator

__all__ = ["OrderedValues"]


class OrderedValues:
    """Numbers (ints or floats, no NaN: they do not order) in ascending order, duplicates kept.

    ``count_below(v)`` is how many values are ``< v`` (the position ``sorted(values)`` would give
    ``v``), ``values[k]`` the k-th smallest: the two questions a quantile rule asks of a rung.
    """

    def __init__(self, values: Iterable[float] = (), load: int = 512) -> None:
        if load < 1:
            raise ValueError(f"OrderedValues: load >= 1, got {load}")
        self._load = load
        ordered = sorted(values)
        self._blocks: list[list[float]] = [ordered[i:i + load] for i in range(0, len(ordered), load)]
        self._maxes: list[float] = [block[-1] for block in self._blocks]
        self._len = len(ordered)
        self._tree: list[int] | None = None  # Fenwick tree of the blocks' lengths; None: to rebuild

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[float]:
        for block in self._blocks:
            yield from block

    def __getitem__(self, k: int) -> float:
        """The ``k``-th smallest value (from 0; negative ``k`` counts from the largest)."""
        if k < 0:
            k += self._len
        if not 0 <= k < self._len:
            raise IndexError(f"OrderedValues index {k} out of range ({self._len} values)")
        block, offset = self._locate(k)
        return self._blocks[block][offset]

    def add(self, value: float) -> None:
        """Insert ``value`` (after the values equal to it)."""
        self._len += 1
        if not self._maxes:
            self._blocks.append([value])
            self._maxes.append(value)
            self._tree = None
            return
        i = bisect_right(self._maxes, value)
        if i == len(self._maxes):  # a new largest value: the end of the last block
            i -= 1
            self._blocks[i].append(value)
            self._maxes[i] = value
        else:
            insort(self._blocks[i], value)
        self._bump(i, 1)
        block = self._blocks[i]
        if len(block) > 2 * self._load:
            half = block[self._load:]
            del block[self._load:]
            self._maxes[i] = block[-1]
            self._blocks.insert(i + 1, half)
            self._maxes.insert(i + 1, half[-1])
            self._tree = None

    def remove(self, value: float) -> None:
        """Remove one value equal to ``value``; ValueError when there is none."""
        i = bisect_left(self._maxes, value)
        if i < len(self._maxes):
            block = self._blocks[i]
            j = bisect_left(block, value)
            if block[j] == value:
                del block[j]
                self._len -= 1
                if block:
                    self._maxes[i] = block[-1]
                    self._bump(i, -1)
                else:
                    del self._blocks[i]
                    del self._maxes[i]
                    self._tree = None
                return
        raise ValueError(f"OrderedValues.remove: {value!r} is not there")

    def count_below(self, value: float) -> int:
        """How many values are smaller than ``value``."""
        i = bisect_left(self._maxes, value)  # blocks before i hold only smaller values
        if i == len(self._maxes):
            return self._len
        return self._prefix(i) + bisect_left(self._blocks[i], value)

    def _index(self) -> list[int]:
        """The Fenwick tree of the blocks' lengths (1-based), rebuilt when the blocks changed."""
        if self._tree is None:
            tree = [0, *map(len, self._blocks)]
            for i in range(1, len(tree)):
                parent = i + (i & -i)
                if parent < len(tree):
                    tree[parent] += tree[i]
            self._tree = tree
        return self._tree

    def _bump(self, block: int, delta: int) -> None:
        """Block ``block`` grew by ``delta`` values (a tree to rebuild anyway is left alone)."""
        tree = self._tree
        if tree is None:
            return
        i = block + 1
        while i < len(tree):
            tree[i] += delta
            i += i & -i

    def _prefix(self, block: int) -> int:
        """How many values the blocks before ``block`` hold."""
        tree, total, i = self._index(), 0, block
        while i:
            total += tree[i]
            i -= i & -i
        return total

    def _locate(self, k: int) -> tuple[int, int]:
        """The block holding the ``k``-th smallest value and its offset there."""
        tree, pos = self._index(), 0
        step = 1 << (len(tree) - 1).bit_length()
        while step:
            ahead = pos + step
            if ahead < len(tree) and tree[ahead] <= k:
                k -= tree[ahead]
                pos = ahead
            step >>= 1
        return pos, k
