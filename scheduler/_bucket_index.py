"""Items (node or group ids) kept in buckets by a small integer key, with the lowest id of a bucket
found in O(log n).

Used by :class:`scheduler.resources.ResourcePool` for "nodes with exactly f free slots" and "groups
with exactly w whole free nodes". Each bucket is a binary heap with lazy deletion: an item that moves
to another bucket leaves a stale entry behind, dropped when it reaches the top. An item has at most
one entry per heap (a bit mask per item remembers which heaps hold one), so an item moving back and
forth never piles up duplicates; a heap is rebuilt when stale entries outnumber live ones, so memory
stays O(items) and every operation is amortised O(log n).
"""

from __future__ import annotations

import heapq
from collections import deque
from itertools import repeat


class BucketIndex:
    """``num_items`` items, each in at most one of the buckets ``0..max_key`` (or in none).

    ``skip_zero``: bucket 0 is only counted, never searched (no heap is kept for it).
    """

    def __init__(self, num_items: int, max_key: int, skip_zero: bool = False) -> None:
        self.max_key = max_key
        self.skip_zero = skip_zero
        self._key: list[int] = [-1] * num_items  # -1: in no bucket
        self._in_heap: list[int] = [0] * num_items  # bit k: the item has an entry in heap k
        self._heaps: list[list[int]] = [[] for _ in range(max_key + 1)]
        self._counts: list[int] = [0] * (max_key + 1)

    def count(self, key: int) -> int:
        """Number of items in bucket ``key``."""
        return self._counts[key]

    def set(self, item: int, key: int) -> None:
        """Move ``item`` to bucket ``key`` (-1 removes it from every bucket)."""
        old = self._key[item]
        if old == key:
            return
        counts = self._counts
        if old >= 0:
            counts[old] -= 1
        self._key[item] = key
        if key < 0:
            return
        counts[key] += 1
        if key == 0 and self.skip_zero:
            return
        bit = 1 << key
        if self._in_heap[item] & bit:
            return  # its old entry in this heap is live again
        self._in_heap[item] |= bit
        heap = self._heaps[key]
        heapq.heappush(heap, item)
        if len(heap) > 2 * counts[key] + 64:
            self._rebuild(key)

    def set_many(self, items: list[int] | tuple[int, ...], key: int, old_key: int | None = None) -> None:
        """:meth:`set` for many items moving to the same bucket. ``old_key``: the bucket every item
        is in now, when the caller knows it (the keys are then rewritten by one C-level loop)."""
        keys, counts, in_heap = self._key, self._counts, self._in_heap
        searchable = key >= 0 and not (key == 0 and self.skip_zero)
        bit = 1 << key if key >= 0 else 0
        heap = self._heaps[key] if searchable else None
        if old_key is not None:
            if old_key == key:
                return
            n = len(items)
            if old_key >= 0:
                counts[old_key] -= n
            deque(map(keys.__setitem__, items, repeat(key, n)), maxlen=0)
            if key < 0:
                return
            counts[key] += n
            if heap is not None:
                for item in [item for item in items if not in_heap[item] & bit]:
                    in_heap[item] |= bit
                    heapq.heappush(heap, item)
        else:
            for item in items:
                old = keys[item]
                if old == key:
                    continue
                if old >= 0:
                    counts[old] -= 1
                keys[item] = key
                if key < 0:
                    continue
                counts[key] += 1
                if heap is not None and not in_heap[item] & bit:
                    in_heap[item] |= bit
                    heapq.heappush(heap, item)
        if heap is not None and len(heap) > 2 * counts[key] + 64:
            self._rebuild(key)

    def _rebuild(self, key: int) -> None:
        bit = 1 << key
        keys, in_heap = self._key, self._in_heap
        live = []
        for item in self._heaps[key]:
            if keys[item] == key:
                live.append(item)
            else:
                in_heap[item] &= ~bit
        live.sort()
        self._heaps[key] = live  # a sorted list is a valid heap

    def _check_searchable(self, key: int) -> None:
        if key == 0 and self.skip_zero:
            raise ValueError("bucket 0 is not searchable (skip_zero)")

    def lowest(self, key: int) -> int | None:
        """The lowest item id in bucket ``key``, or None if it is empty."""
        if self._counts[key] == 0:
            return None
        self._check_searchable(key)
        heap, keys = self._heaps[key], self._key
        while keys[heap[0]] != key:
            self._in_heap[heapq.heappop(heap)] &= ~(1 << key)
        return heap[0]

    def lowest_excluding(self, key: int, exclude: set[int] | frozenset[int]) -> int | None:
        """The lowest item id in bucket ``key`` that is not in ``exclude`` (O(|exclude| log n))."""
        if self._counts[key] == 0:
            return None
        self._check_searchable(key)
        heap, keys = self._heaps[key], self._key
        popped: list[int] = []
        found = None
        while heap:
            item = heapq.heappop(heap)
            if keys[item] != key:
                self._in_heap[item] &= ~(1 << key)  # stale: dropped for good
                continue
            popped.append(item)
            if item not in exclude:
                found = item
                break
        for item in popped:
            heapq.heappush(heap, item)
        return found

    def first_key_at_least(self, key: int) -> int | None:
        """The smallest non-empty bucket key >= ``key`` (scans at most ``max_key`` counters)."""
        for k in range(max(key, 0), self.max_key + 1):
            if self._counts[k]:
                return k
        return None

