"""The cluster as the scheduler sees it: nodes, each with a fixed number of slots (GPUs / GCDs / CPU
ranks), grouped into network groups, and which trial holds which slot.

Slot ids are global integers: ``slot = node * slots_per_node + local``. Node ``n`` belongs to network
group ``n // node_group_size`` (e.g. the 32 nodes of one dragonfly group): multi-node trials are kept
inside as few groups as possible. The pool is the only place that records ownership; placement
policies read it and return decisions, the caller (the MPI runtime or the simulator) applies them
with :meth:`ResourcePool.allocate` and :meth:`ResourcePool.release`.

Cost: nodes are kept in buckets by free-slot count and groups in buckets by whole-free-node count
(:class:`scheduler._bucket_index.BucketIndex`), so finding a place for a trial of ``n`` slots costs
O(slots_per_node + log nodes) for a sub-node trial and O(n / slots_per_node + groups touched x
node_group_size + log nodes) for a multi-node trial, never a scan of the whole machine.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from contextlib import contextmanager
from itertools import chain
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np

from scheduler._bucket_index import BucketIndex

DEFAULT_NODE_GROUP_SIZE = 32


class ResourceError(RuntimeError):
    """An allocation that would double-book a slot, or a release of something not held."""


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
        self._whole_in_group = [len(self.nodes_of_group(gr)) for gr in range(self.num_groups)]
        self._groups = BucketIndex(self.num_groups, g, skip_zero=True)
        for gr in range(self.num_groups):
            self._groups.set(gr, self._whole_in_group[gr])
        self._local = np.arange(spn)
        self._busy = 0
        self._planned: dict[int, tuple[int, ...]] = {}  # tentative allocations (see tentative())
        self._node_slots = [tuple(range(nd * spn, nd * spn + spn)) for nd in range(self.num_nodes)]
        self._tentative: list[list[tuple[int, tuple[int, ...], dict[int, int], bool]]] = []
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

    def group_of(self, node: int) -> int:
        return node // self.node_group_size

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

    def is_free(self, slot: int) -> bool:
        """Whether ``slot`` is free (real allocations; inside :meth:`tentative` whole nodes planned
        for multi-node trials still read as free here, use :meth:`free_on_node`)."""
        return slot not in self._owner and self.node_of(slot) not in self._drained

    def owner_of(self, slot: int) -> int | None:
        """The trial holding ``slot``, or None."""
        return self._owner.get(slot)

    def held_by(self, trial_id: int) -> tuple[int, ...]:
        return self._held.get(trial_id, ())

    def running_trials(self) -> list[int]:
        return list(self._held)

    def hostname(self, node: int) -> str:
        return self.hostnames[node] if self.hostnames else f"node{node}"

    def can_fit(self, n: int) -> bool:
        """Whether a trial of ``n`` slots fits now (O(slots_per_node))."""
        spn = self.slots_per_node
        if n <= spn:
            return self._by_free.first_key_at_least(n) is not None
        return n % spn == 0 and self.whole_free_nodes >= n // spn

    def nodes_with_free(self, free: int) -> int:
        """Number of nodes in service with exactly ``free`` free slots (O(1))."""
        return self._by_free.count(free)

    # -- choosing slots ----------------------------------------------------------------------------
    def pick(self, n: int, exclude: set[int] | frozenset[int] | None = None) -> tuple[int, ...] | None:
        """Free slots for a trial of ``n`` slots, or None if it does not fit now.

        ``n <= slots_per_node``: best fit, the lowest-id node among those with the fewest free slots
        that still hold ``n`` (packs sub-node trials into partly used nodes), its lowest free slots.
        ``n > slots_per_node`` (a multiple of it): ``n / slots_per_node`` whole free nodes, taken from
        as few network groups as possible (whole free groups first, then the group whose free nodes
        fit the rest most tightly), lowest node ids first. Nodes in ``exclude`` are not used (cost
        O(len(exclude)) more).
        """
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
        nodes = self._pick_whole_nodes(n // spn, exclude or frozenset())
        if nodes is None:
            return None
        return tuple(chain.from_iterable(map(self._node_slots.__getitem__, nodes)))

    def _pick_whole_nodes(self, k: int, exclude: set[int] | frozenset[int]) -> list[int] | None:
        spn, g_size = self.slots_per_node, self.node_group_size
        hidden: dict[int, int] = {}  # group -> excluded whole-free nodes in it
        for node in exclude:
            if self._by_free.key_of(node) == spn:
                group = self.group_of(node)
                hidden[group] = hidden.get(group, 0) + 1
        if self.whole_free_nodes - sum(hidden.values()) < k:
            return None
        skip = set(hidden)  # groups found through `hidden`, not through the buckets
        taken: set[int] = set()

        def group_with(key: int) -> int | None:
            best = self._groups.lowest_excluding(key, skip | taken) if self._groups.count(key) else None
            for group, h in hidden.items():
                if group not in taken and self._whole_in_group[group] - h == key and (best is None or group < best):
                    best = group
            return best

        nodes: list[int] = []
        remaining = k
        while remaining > 0:
            group = None
            for key in range(min(remaining, g_size), g_size + 1):  # tightest group that holds the rest
                group = group_with(key)
                if group is not None:
                    break
            if group is None:  # no single group holds the rest: the fullest one
                for key in range(min(remaining, g_size) - 1, 0, -1):
                    group = group_with(key)
                    if group is not None:
                        break
            if group is None:
                raise AssertionError("whole-free node count and group buckets disagree")
            taken.add(group)
            keys = self._by_free._key
            members = self.nodes_of_group(group)
            free_nodes = [nd for nd in members if keys[nd] == spn and nd not in exclude] if exclude \
                else [nd for nd in members if keys[nd] == spn]
            nodes.extend(free_nodes[:remaining])
            remaining -= min(remaining, len(free_nodes))
        return nodes

    # -- changes ---------------------------------------------------------------------------------
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
            group = self.group_of(node)
            self._whole_in_group[group] += 1 if free == spn else -1
            self._groups.set(group, self._whole_in_group[group])

    def _node_counts(self, slots: tuple[int, ...]) -> dict[int, int]:
        """Slots per node of an allocation (vectorised for large ones)."""
        spn = self.slots_per_node
        if len(slots) <= 64:
            return Counter(map(spn.__rfloordiv__, slots))  # slot // slots_per_node, in C
        idx = np.fromiter(slots, np.int64, len(slots))
        if len(slots) % spn == 0:  # whole nodes in slot order (what pick returns)?
            firsts = idx[::spn]
            if np.array_equal(idx.reshape(-1, spn), firsts[:, None] + self._local) and not (firsts % spn).any():
                return dict.fromkeys((firsts // spn).tolist(), spn)
        nodes, counts = np.unique(idx // spn, return_counts=True)
        return dict(zip(nodes.tolist(), counts.tolist()))

    def _apply(self, counts: dict[int, int], sign: int) -> None:
        """Change the free counts of several nodes; group buckets are updated once per group."""
        spn, g_size = self.slots_per_node, self.node_group_size
        free_per_node, drained = self._free_per_node, self._drained
        if len(counts) > 8 and not drained and min(counts.values()) == spn:
            self._apply_whole_nodes(list(counts), sign)
            return
        set_key = self._by_free.set
        groups_changed: dict[int, int] = {}
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
                group = node // g_size
                groups_changed[group] = groups_changed.get(group, 0) + (1 if new == spn else -1)
        self._free_total += delta_total
        for group, delta in groups_changed.items():
            if delta:
                self._whole_in_group[group] += delta
                self._groups.set(group, self._whole_in_group[group])

    def _apply_whole_nodes(self, nodes: list[int], sign: int) -> None:
        """Fast path of :meth:`_apply`: whole nodes taken (sign -1) or given back (+1)."""
        spn = self.slots_per_node
        new = 0 if sign < 0 else spn
        free_per_node = self._free_per_node
        for node in nodes:
            free_per_node[node] = new
        self._free_total += sign * spn * len(nodes)
        self._by_free.set_many(nodes, new)
        for group, n in Counter(map(self.node_group_size.__rfloordiv__, nodes)).items():
            self._whole_in_group[group] += sign * n
            self._groups.set(group, self._whole_in_group[group])

    def allocate(self, trial_id: int, slots: Iterable[int]) -> tuple[int, ...]:
        """Give ``slots`` to ``trial_id`` (every slot free, on nodes in service, no repeats).

        Inside :meth:`tentative` the planning policy's choices are trusted: they come from
        :meth:`pick` on this pool, so the per-slot checks are skipped and a multi-node allocation
        (whole nodes, never searched slot by slot again) updates only the node indexes.
        """
        slots = tuple(slots)
        if not slots:
            raise ResourceError(f"trial {trial_id}: empty allocation")
        if trial_id in self._held or trial_id in self._planned:
            raise ResourceError(f"trial {trial_id} already holds slots {self.held_by(trial_id)}")
        counts = self._node_counts(slots)
        if self._tentative:
            per_slot = len(counts) == 1 or min(counts.values()) < self.slots_per_node
            if per_slot:
                self._owner.update(dict.fromkeys(slots, trial_id))
            self._apply(counts, -1)
            self._planned[trial_id] = slots
            self._tentative[-1].append((trial_id, slots, counts, per_slot))
            return slots
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
        owner.update(dict.fromkeys(slots, trial_id))
        self._apply(counts, -1)
        self._held[trial_id] = slots
        self._busy += len(slots)
        return slots

    def release(self, trial_id: int) -> tuple[int, ...]:
        if trial_id not in self._held:
            if trial_id in self._planned:
                raise ResourceError(f"trial {trial_id} is only planned (tentative); it is released "
                                    "when the tentative block ends")
            raise ResourceError(f"trial {trial_id} holds no slots")
        slots = self._held.pop(trial_id)
        self._busy -= len(slots)
        deque(map(self._owner.pop, slots), maxlen=0)  # C-level loop
        self._apply(self._node_counts(slots), +1)
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
                self._apply(counts, +1)
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


# -- node health ---------------------------------------------------------------------------------------

NODE_LEVEL_PATTERNS: tuple[str, ...] = (
    r"hip error", r"hiperror", r"cuda error", r"ecc error", r"uncorrectable",
    r"no (gpu|hip|cuda)[- ]capable device", r"device (not found|unavailable|lost)",
    r"rccl", r"nccl", r"bus error", r"illegal memory access", r"gpu (hang|hung|fell off)",
    r"input/output error", r"node failure", r"read-only file system", r"no space left on device",
)
_NODE_LEVEL_RE = re.compile("|".join(NODE_LEVEL_PATTERNS), re.IGNORECASE)


def is_node_level_failure(reason: str | None) -> bool:
    """Whether a trial's failure reason points at the node (device, interconnect, local disk)
    rather than at the trial's hyperparameters (:data:`NODE_LEVEL_PATTERNS`, case-insensitive)."""
    return bool(reason) and _NODE_LEVEL_RE.search(reason) is not None


@dataclass(frozen=True)
class DrainReport:
    """A node taken out of service by :class:`NodeHealth`."""

    node: int
    hostname: str
    failures: int
    last_reason: str


class NodeHealth:
    """Counts node-level failures per node; after ``threshold`` in a row (no successful trial on the
    node in between) the node is drained in ``pool`` and reported in :attr:`reports`."""

    def __init__(self, pool: ResourcePool, threshold: int = 3) -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be >= 1, got {threshold}")
        self.pool = pool
        self.threshold = threshold
        self._strikes: dict[int, int] = {}
        self.reports: list[DrainReport] = []

    def record(self, slots: Sequence[int], ok: bool, reason: str | None = None) -> list[int]:
        """Record the outcome of a trial that ran on ``slots``; returns the nodes drained now.

        A success clears the nodes' strikes; a failure whose reason is node-level
        (:func:`is_node_level_failure`) adds one strike to each node of the trial; other failures
        (the trial's own fault) change nothing.
        """
        nodes = sorted({self.pool.node_of(s) for s in slots})
        if ok:
            for node in nodes:
                self._strikes.pop(node, None)
            return []
        if not is_node_level_failure(reason):
            return []
        drained = []
        for node in nodes:
            strikes = self._strikes.get(node, 0) + 1
            self._strikes[node] = strikes
            if strikes >= self.threshold and node not in self.pool.drained_nodes:
                self.pool.drain(node)
                self.reports.append(DrainReport(node, self.pool.hostname(node), strikes, reason or ""))
                drained.append(node)
        return drained

    def strikes(self, node: int) -> int:
        return self._strikes.get(node, 0)
