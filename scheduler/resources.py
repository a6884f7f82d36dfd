"""The cluster as the scheduler sees it: nodes, each with a fixed number of slots (GPUs / GCDs / CPU
ranks), and which trial holds which slot.

Slot ids are global integers: ``slot = node * slots_per_node + local``. The pool is the only place
that records ownership; placement policies read it and return decisions, the caller (the MPI runtime
or the simulator) applies them with :meth:`ResourcePool.allocate` and :meth:`ResourcePool.release`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence


class ResourceError(RuntimeError):
    """An allocation that would double-book a slot, or a release of something not held."""


@dataclass
class ResourcePool:
    """Free/busy tracking of ``num_nodes x slots_per_node`` slots."""

    num_nodes: int
    slots_per_node: int
    hostnames: Sequence[str] | None = None
    _owner: dict[int, int] = field(default_factory=dict, init=False, repr=False)  # slot -> trial
    _held: dict[int, tuple[int, ...]] = field(default_factory=dict, init=False, repr=False)
    _free_per_node: list[int] = field(default_factory=list, init=False, repr=False)
    _drained: set[int] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.num_nodes < 1 or self.slots_per_node < 1:
            raise ValueError("a pool needs at least one node with at least one slot")
        self._free_per_node = [self.slots_per_node] * self.num_nodes

    # -- queries ---------------------------------------------------------------------------------
    @property
    def total_slots(self) -> int:
        return self.num_nodes * self.slots_per_node

    @property
    def free_slots(self) -> int:
        return sum(f for n, f in enumerate(self._free_per_node) if n not in self._drained)

    @property
    def busy_slots(self) -> int:
        return len(self._owner)

    def node_of(self, slot: int) -> int:
        return slot // self.slots_per_node

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
        return slot not in self._owner and self.node_of(slot) not in self._drained

    def held_by(self, trial_id: int) -> tuple[int, ...]:
        return self._held.get(trial_id, ())

    def running_trials(self) -> list[int]:
        return list(self._held)

    def hostname(self, node: int) -> str:
        return self.hostnames[node] if self.hostnames else f"node{node}"

    # -- changes ---------------------------------------------------------------------------------
    def allocate(self, trial_id: int, slots: Iterable[int]) -> tuple[int, ...]:
        slots = tuple(slots)
        if not slots:
            raise ResourceError(f"trial {trial_id}: empty allocation")
        if trial_id in self._held:
            raise ResourceError(f"trial {trial_id} already holds slots {self._held[trial_id]}")
        if len(set(slots)) != len(slots):
            raise ResourceError(f"trial {trial_id}: repeated slot in {slots}")
        for s in slots:
            if not 0 <= s < self.total_slots:
                raise ResourceError(f"trial {trial_id}: slot {s} outside 0..{self.total_slots - 1}")
            if s in self._owner:
                raise ResourceError(f"trial {trial_id}: slot {s} already held by trial {self._owner[s]}")
            if self.node_of(s) in self._drained:
                raise ResourceError(f"trial {trial_id}: slot {s} is on drained node {self.node_of(s)}")
        for s in slots:
            self._owner[s] = trial_id
            self._free_per_node[self.node_of(s)] -= 1
        self._held[trial_id] = slots
        return slots

    def release(self, trial_id: int) -> tuple[int, ...]:
        if trial_id not in self._held:
            raise ResourceError(f"trial {trial_id} holds no slots")
        slots = self._held.pop(trial_id)
        for s in slots:
            del self._owner[s]
            self._free_per_node[self.node_of(s)] += 1
        return slots

    def drain(self, node: int) -> None:
        """Take a node out of service: running trials finish, nothing new is placed there."""
        self._drained.add(node)

    @property
    def drained_nodes(self) -> set[int]:
        return set(self._drained)
