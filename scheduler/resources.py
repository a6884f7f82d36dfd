"""The cluster as the scheduler sees it: nodes, each with a fixed number of slots (GPUs / GCDs / CPU
ranks), grouped into network groups, and which trial holds which slot.

Slot ids are global integers: ``slot = node * slots_per_node + local``. Node ``n`` belongs to network
group ``n // node_group_size`` (e.g. the 32 nodes of one dragonfly group): multi-node trials are kept
inside as few groups as possible. The pool is the only place that records ownership; placement
policies read it and return decisions, the caller (the MPI runtime or the simulator) applies them
with :meth:`ResourcePool.allocate` and :meth:`ResourcePool.release`.

Cost: nodes are kept in buckets by free-slot count (:class:`scheduler._bucket_index.BucketIndex`), so
a sub-node trial is placed in O(slots_per_node + log nodes). Whole-free nodes are also flagged in a
numpy array with a count per group: a multi-node trial is placed by a few vectorised operations over
the groups that have whole free nodes, and is handed out as :class:`WholeNodes` (its slot ids plus its
node ids), so allocating and releasing it costs O(its nodes), never a Python loop over its slots or
a scan of the whole machine in Python.
"""

from __future__ import annotations

from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import repeat
from typing import Iterable, Iterator, Sequence

import numpy as np

from scheduler._bucket_index import BucketIndex

DEFAULT_NODE_GROUP_SIZE = 32


class ResourceError(RuntimeError):
    """An allocation that would double-book a slot, or a release of something not held."""


class WholeNodes(tuple):
    """The slot ids of whole nodes, node after node (a plain tuple of ints to every reader), with
    the node ids kept in :attr:`nodes`.

    :meth:`ResourcePool.pick` returns one for a multi-node trial; :meth:`ResourcePool.allocate`,
    :meth:`ResourcePool.release` and the placement policies then update per-node state from
    ``nodes`` (256 entries for a 256-node trial) instead of looking at each of its 2,048 slots.
    """

    nodes: tuple[int, ...]
    slots_per_node: int

    def __new__(cls, nodes: Sequence[int] | np.ndarray, slots_per_node: int) -> "WholeNodes":
        arr = np.asarray(nodes, dtype=np.int64).reshape(-1)
        slots = (arr[:, None] * slots_per_node + np.arange(slots_per_node)).ravel().tolist()
        self = super().__new__(cls, slots)
        self.nodes = tuple(arr.tolist())
        self.slots_per_node = slots_per_node
        return self

    def __reduce__(self):  # pickles (MPI messages, multiprocessing) as what it is
        return (WholeNodes, (self.nodes, self.slots_per_node))


@dataclass
class ResourcePool:
    """Free/busy tracking of ``num_nodes x slots_per_node`` slots in groups of ``node_group_size``
    nodes (default 32, or all nodes when fewer)."""

    num_nodes: int
    slots_per_node: int
    hostnames: Sequence[str] | None = None
    node_group_size: int | None = None
    _owner: dict[int, int] = field(default_factory=dict, init=False, repr=False)  # slot -> trial
    _held: dict[int, tuple[int, ...]] = field(default_factory=dict, init=False, repr=False)
    _free_per_node: list[int] = field(default_factory=list, init=False, repr=False)
    _drained: set[int] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.num_nodes < 1 or self.slots_per_node < 1:
            raise ValueError("a pool needs at least one node with at least one slot")
        if self.hostnames is not None and len(self.hostnames) != self.num_nodes:
            raise ValueError(f"{len(self.hostnames)} hostnames for {self.num_nodes} nodes")
        if self.node_group_size is None:
            self.node_group_size = min(self.num_nodes, DEFAULT_NODE_GROUP_SIZE)
        if self.node_group_size < 1:
            raise ValueError(f"node_group_size must be >= 1, got {self.node_group_size}")
        spn, g = self.slots_per_node, self.node_group_size
        self._free_per_node = [spn] * self.num_nodes
        self._free_total = self.num_nodes * spn
        self._by_free = BucketIndex(self.num_nodes, spn, skip_zero=True)
        for node in range(self.num_nodes):
            self._by_free.set(node, spn)
        self.num_groups = (self.num_nodes + g - 1) // g
        # whole-free nodes in service: a flag per node (padded to whole groups) and a count per group
        self._whole = np.zeros(self.num_groups * g, dtype=bool)
        self._whole[: self.num_nodes] = True
        self._whole_in_group = self._whole.reshape(self.num_groups, g).sum(axis=1)
        self._busy = 0
        self._planned: dict[int, tuple[int, ...]] = {}  # tentative allocations (see tentative())
        self._tentative: list[list[tuple[int, tuple[int, ...], dict[int, int] | None, bool]]] = []
        self.drain_version = 0  # bumped by every drain/undrain (policies cache per-node state)

    # -- queries ---------------------------------------------------------------------------------
    @property
    def total_slots(self) -> int:
        return self.num_nodes * self.slots_per_node

    @property
    def free_slots(self) -> int:
        """Free slots on nodes in service (O(1))."""
        return self._free_total

    @property
    def busy_slots(self) -> int:
        """Slots held by real (not tentative) allocations (O(1))."""
        return self._busy

    @property
    def whole_free_nodes(self) -> int:
        """Nodes in service with every slot free (O(1))."""
        return self._by_free.count(self.slots_per_node)

    def node_of(self, slot: int) -> int:
        return slot // self.slots_per_node

    def nodes_of_group(self, group: int) -> range:
        start = group * self.node_group_size
        return range(start, min(start + self.node_group_size, self.num_nodes))

    def slots_of_node(self, node: int) -> range:
        start = node * self.slots_per_node
        return range(start, start + self.slots_per_node)

    def free_on_node(self, node: int) -> int:
        return 0 if node in self._drained else self._free_per_node[node]

    def free_slots_of_node(self, node: int) -> list[int]:
        if node in self._drained:
            return []
        return [s for s in self.slots_of_node(node) if s not in self._owner]

    def owner_of(self, slot: int) -> int | None:
        """The trial holding ``slot``, or None."""
        return self._owner.get(slot)

    def held_by(self, trial_id: int) -> tuple[int, ...]:
        return self._held.get(trial_id, ())

    def running_trials(self) -> list[int]:
        return list(self._held)

    def hostname(self, node: int) -> str:
        return self.hostnames[node] if self.hostnames else f"node{node}"

    def can_fit(self, n: int, avoid: frozenset[int] = frozenset()) -> bool:
        """Whether a trial of ``n`` slots fits now (O(slots_per_node)), off the nodes in ``avoid``
        where enough nodes in service are outside it (:meth:`pick`)."""
        if self._avoids(n, avoid):
            return self.pick(n, avoid) is not None
        spn = self.slots_per_node
        if n <= spn:
            return self._by_free.first_key_at_least(n) is not None
        return n % spn == 0 and self.whole_free_nodes >= n // spn

    def free_histogram(self, nodes: Iterable[int]) -> list[int]:
        """How many of ``nodes`` have 0, 1, ..., slots_per_node free slots (drained nodes count as
        0 free); O(len(nodes)) in C."""
        hist = [0] * (self.slots_per_node + 1)
        nodes = list(nodes)
        for free, n in Counter(map(self._free_per_node.__getitem__, nodes)).items():
            hist[free] += n
        for node in self._drained.intersection(nodes):
            hist[self._free_per_node[node]] -= 1
            hist[0] += 1
        return hist

    def nodes_with_free(self, free: int) -> int:
        """Number of nodes in service with exactly ``free`` free slots (O(1))."""
        return self._by_free.count(free)

    # -- choosing slots ----------------------------------------------------------------------------
    def pick(self, n: int, exclude: set[int] | frozenset[int] | None = None,
             avoid: frozenset[int] = frozenset()) -> tuple[int, ...] | None:
        """Free slots for a trial of ``n`` slots, or None if it does not fit now.

        ``n <= slots_per_node``: best fit, the lowest-id node among those with the fewest free slots
        that still hold ``n`` (packs sub-node trials into partly used nodes), its lowest free slots.
        ``n > slots_per_node`` (a multiple of it): ``n / slots_per_node`` whole free nodes, taken from
        as few network groups as possible (whole free groups first, then the group whose free nodes
        fit the rest most tightly), lowest node ids first, returned as :class:`WholeNodes`. Nodes in
        ``exclude`` are not used (cost O(len(exclude)) more); nor are nodes in ``avoid`` (where a
        trial failed for a node-level reason) while enough nodes in service lie outside it for the
        trial: it waits for those rather than go back.
        """
        if self._avoids(n, avoid):
            return self.pick(n, frozenset(avoid) | frozenset(exclude or ()))
        spn = self.slots_per_node
        if n < 1:
            raise ValueError(f"a trial needs at least one slot, got {n}")
        if n <= spn:
            for key in range(n, spn + 1):
                if not self._by_free.count(key):
                    continue
                node = self._by_free.lowest_excluding(key, exclude) if exclude else self._by_free.lowest(key)
                if node is not None:
                    return tuple(self.free_slots_of_node(node)[:n])
            return None
        if n % spn:
            raise ValueError(f"a multi-node trial needs a multiple of {spn} slots, got {n}")
        nodes = self._pick_whole_nodes(n // spn, exclude)
        return None if nodes is None else WholeNodes(nodes, spn)

    def _avoids(self, n: int, avoid: frozenset[int]) -> bool:
        """Whether a trial of ``n`` slots is kept off ``avoid``: enough nodes in service lie
        outside it to hold the trial (one node for a sub-node trial)."""
        if not avoid:
            return False
        outside = self.num_nodes - len(self._drained | set(avoid))
        return outside >= max(1, n // self.slots_per_node)

    def _pick_whole_nodes(self, k: int, exclude: set[int] | frozenset[int] | None) -> np.ndarray | None:
        """``k`` whole free nodes by the rule of :meth:`pick`, vectorised over the groups that have
        whole free nodes (no Python loop over groups or nodes, however scattered the free nodes are).

        The rule takes groups fullest first (ties: lowest id) until the rest fits into one group; that
        last group is the tightest fit (fewest whole free nodes that still hold the rest, lowest id).
        """
        g_size = self.node_group_size
        if self.whole_free_nodes < k:  # O(1): not enough whole free nodes, excluded ones or not
            return None
        whole, counts = self._whole, self._whole_in_group
        if exclude:
            ex = np.fromiter(exclude, dtype=np.int64, count=len(exclude))
            ex = ex[whole[ex]]
            if ex.size:
                whole = whole.copy()
                whole[ex] = False
                counts = counts - np.bincount(ex // g_size, minlength=self.num_groups)
        if k <= g_size:  # one group may hold them all: the tightest fit, lowest id among equals
            fitting = np.where(counts >= k, counts, g_size + 1)
            group = int(np.argmin(fitting))
            if fitting[group] <= g_size:
                return np.flatnonzero(whole[group * g_size: (group + 1) * g_size])[:k] + group * g_size
        groups = np.flatnonzero(counts)
        c = counts[groups]
        if int(c.sum()) < k:
            return None
        order = np.argsort(-c, kind="stable")  # fullest first, lowest id among equals
        groups, c = groups[order], c[order]
        rest = k - (np.cumsum(c) - c)  # nodes still needed when group i is considered
        fits_rest = (rest > 0) & (rest < g_size) & (c >= rest)
        if fits_rest.any():
            i = int(np.argmax(fits_rest))
            # the groups at i.. that hold the rest are a run of c >= rest; its last count is the
            # tightest fit, and the first group with that count has the lowest id
            neg = -c
            end = int(np.searchsorted(neg, -rest[i], side="right"))
            tight = int(np.searchsorted(neg, neg[end - 1], side="left"))
            taken = np.append(groups[:i], groups[max(tight, i)])
        else:  # whole groups (and fullest ones) fill k exactly
            taken = groups[: int(np.searchsorted(np.cumsum(c), k)) + 1]
        rows, cols = np.nonzero(whole.reshape(self.num_groups, g_size)[taken])
        return (taken[rows] * g_size + cols)[:k]

    # -- changes ---------------------------------------------------------------------------------
    def _mark_whole(self, node: int, is_whole: bool) -> None:
        """Record that ``node`` (in service) became whole-free or stopped being so."""
        self._whole[node] = is_whole
        self._whole_in_group[node // self.node_group_size] += 1 if is_whole else -1

    def _set_node_free(self, node: int, free: int) -> None:
        """Update the free count of ``node`` and every index that depends on it."""
        old = self._free_per_node[node]
        self._free_per_node[node] = free
        if node in self._drained:
            return
        self._free_total += free - old
        self._by_free.set(node, free)
        spn = self.slots_per_node
        if (old == spn) != (free == spn):
            self._mark_whole(node, free == spn)

    def _node_counts(self, slots: tuple[int, ...]) -> dict[int, int]:
        """Slots per node of an allocation given as slot ids (vectorised for large ones)."""
        spn = self.slots_per_node
        if len(slots) <= 64:
            return Counter(map(spn.__rfloordiv__, slots))  # slot // slots_per_node, in C
        nodes, counts = np.unique(np.fromiter(slots, np.int64, len(slots)) // spn, return_counts=True)
        return dict(zip(nodes.tolist(), counts.tolist()))

    def _apply(self, counts: dict[int, int], sign: int) -> None:
        """Change the free counts of several nodes (``counts``: slots per node)."""
        spn = self.slots_per_node
        free_per_node, drained = self._free_per_node, self._drained
        set_key = self._by_free.set
        delta_total = 0
        for node, count in counts.items():
            old = free_per_node[node]
            new = old + sign * count
            free_per_node[node] = new
            if drained and node in drained:
                continue
            delta_total += new - old
            set_key(node, new)
            if old == spn or new == spn:
                self._mark_whole(node, new == spn)
        self._free_total += delta_total

    def _apply_slots(self, slots: tuple[int, ...], counts: dict[int, int] | None, sign: int) -> None:
        """Take (sign -1) or give back (+1) an allocation; ``counts`` is None for :class:`WholeNodes`."""
        if counts is not None:
            self._apply(counts, sign)
        elif self._drained and not self._drained.isdisjoint(slots.nodes):  # type: ignore[attr-defined]
            self._apply(dict.fromkeys(slots.nodes, self.slots_per_node), sign)  # type: ignore[attr-defined]
        else:
            self._apply_whole_nodes(slots.nodes, sign)  # type: ignore[attr-defined]

    def _apply_whole_nodes(self, nodes: tuple[int, ...], sign: int) -> None:
        """Whole nodes in service taken (sign -1) or given back (+1): bucket moves in one loop, the
        whole-node flags and group counts vectorised."""
        spn = self.slots_per_node
        new, old = (0, spn) if sign < 0 else (spn, 0)
        deque(map(self._free_per_node.__setitem__, nodes, repeat(new, len(nodes))), maxlen=0)
        self._free_total += sign * spn * len(nodes)
        self._by_free.set_many(nodes, new, old_key=old)
        idx = np.fromiter(nodes, dtype=np.int64, count=len(nodes))
        self._whole[idx] = sign > 0
        np.add.at(self._whole_in_group, idx // self.node_group_size, sign)

    def allocate(self, trial_id: int, slots: Iterable[int]) -> tuple[int, ...]:
        """Give ``slots`` to ``trial_id`` (every slot free, on nodes in service, no repeats);
        returns them as a tuple (the :class:`WholeNodes` itself when given one).

        Inside :meth:`tentative` the planning policy's choices are trusted: they come from
        :meth:`pick` on this pool, so the per-slot checks are skipped and a multi-node allocation
        (whole nodes, never searched slot by slot again) updates only the node indexes.
        """
        spn = self.slots_per_node
        whole = isinstance(slots, WholeNodes) and slots.slots_per_node == spn
        slots = slots if whole else tuple(slots)  # type: ignore[assignment]
        if not slots:
            raise ResourceError(f"trial {trial_id}: empty allocation")
        if trial_id in self._held or trial_id in self._planned:
            raise ResourceError(f"trial {trial_id} already holds slots {self.held_by(trial_id)}")
        counts = None if whole else self._node_counts(slots)
        if self._tentative:
            per_slot = not whole
            if per_slot:
                self._owner.update(dict.fromkeys(slots, trial_id))
            self._apply_slots(slots, counts, -1)
            self._planned[trial_id] = slots
            self._tentative[-1].append((trial_id, slots, counts, per_slot))
            return slots
        if whole:
            self._check_whole_nodes(trial_id, slots.nodes)  # type: ignore[attr-defined]
        else:
            self._check_slots(trial_id, slots, counts)  # type: ignore[arg-type]
        self._owner.update(dict.fromkeys(slots, trial_id))
        self._apply_slots(slots, counts, -1)
        self._held[trial_id] = slots
        self._busy += len(slots)
        return slots

    def _check_slots(self, trial_id: int, slots: tuple[int, ...], counts: dict[int, int]) -> None:
        if len(set(slots)) != len(slots):
            raise ResourceError(f"trial {trial_id}: repeated slot in {slots}")
        total, owner = self.total_slots, self._owner
        if min(slots) < 0 or max(slots) >= total:
            bad = next(s for s in slots if not 0 <= s < total)
            raise ResourceError(f"trial {trial_id}: slot {bad} outside 0..{total - 1}")
        if not owner.keys().isdisjoint(slots):
            s = next(s for s in slots if s in owner)
            raise ResourceError(f"trial {trial_id}: slot {s} already held by trial {owner[s]}")
        for node in counts:
            if node in self._drained:
                raise ResourceError(f"trial {trial_id}: slot on drained node {node}")

    def _check_whole_nodes(self, trial_id: int, nodes: tuple[int, ...]) -> None:
        """A whole-node allocation is valid when its nodes are distinct, exist, are in service and
        have every slot free (O(nodes), no look at each slot)."""
        if len(set(nodes)) != len(nodes):
            raise ResourceError(f"trial {trial_id}: repeated node in {nodes}")
        if min(nodes) < 0 or max(nodes) >= self.num_nodes:
            bad = next(nd for nd in nodes if not 0 <= nd < self.num_nodes)
            raise ResourceError(f"trial {trial_id}: node {bad} outside 0..{self.num_nodes - 1}")
        spn, free_per_node = self.slots_per_node, self._free_per_node
        for node in nodes:
            if node in self._drained:
                raise ResourceError(f"trial {trial_id}: slot on drained node {node}")
            if free_per_node[node] != spn:
                s = next(s for s in self.slots_of_node(node) if s in self._owner)
                raise ResourceError(f"trial {trial_id}: slot {s} already held by trial {self._owner[s]}")

    def release(self, trial_id: int) -> tuple[int, ...]:
        if trial_id not in self._held:
            if trial_id in self._planned:
                raise ResourceError(f"trial {trial_id} is only planned (tentative); it is released "
                                    "when the tentative block ends")
            raise ResourceError(f"trial {trial_id} holds no slots")
        slots = self._held.pop(trial_id)
        self._busy -= len(slots)
        deque(map(self._owner.pop, slots), maxlen=0)  # C-level loop
        whole = isinstance(slots, WholeNodes) and slots.slots_per_node == self.slots_per_node
        self._apply_slots(slots, None if whole else self._node_counts(slots), +1)
        return slots

    @contextmanager
    def tentative(self) -> Iterator["ResourcePool"]:
        """Allocations made inside the ``with`` block are undone when it ends.

        Policies use it to plan several decisions against an up-to-date pool inside one
        ``schedule`` call while leaving the pool as they found it. Planned allocations count as
        busy for :meth:`pick`, :attr:`free_slots` and the other queries, but not for
        :meth:`held_by` / :attr:`busy_slots` (they are not real yet).
        """
        self._tentative.append([])
        try:
            yield self
        finally:
            for trial_id, slots, counts, per_slot in reversed(self._tentative.pop()):
                if per_slot:
                    deque(map(self._owner.pop, slots), maxlen=0)
                self._apply_slots(slots, counts, +1)
                del self._planned[trial_id]

    def drain(self, node: int) -> None:
        """Take a node out of service: running trials finish, nothing new is placed there."""
        if node in self._drained:
            return
        free = self._free_per_node[node]
        self._set_node_free(node, 0)  # leaves the indexes as if the node were full...
        self._drained.add(node)
        self._free_per_node[node] = free  # ...but keeps its real count for releases
        self._by_free.set(node, -1)
        self.drain_version += 1

    def undrain(self, node: int) -> None:
        """Put a drained node back into service."""
        if node not in self._drained:
            return
        self._drained.discard(node)
        free = self._free_per_node[node]
        self._free_per_node[node] = 0
        self._by_free.set(node, 0)
        self._set_node_free(node, free)
        self.drain_version += 1

    @property
    def drained_nodes(self) -> set[int]:
        return set(self._drained)
