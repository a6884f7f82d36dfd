"""From the agents' start-up reports to the slot layout placement works on.

One agent rank owns one slot. The agents of each host are split, in rank order, into nodes of
``slots_per_node`` slots (``slots_per_node: 1``: every agent is a node of its own; ``8`` on Frontier
with ``srun --ntasks-per-node=8 --gpus-per-task=1``: one node per host). A host with fewer agents than
a multiple of ``slots_per_node`` (the host of rank 0 gives up one slot to the scheduler) gets a last,
partial node whose missing slots are *reserved*: allocated once at start-up to a placeholder trial id
so placement never uses them and multi-node trials never pick that node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.resources import ResourcePool
from scheduler.runtime.messages import AgentAssignment, AgentHello

RESERVED_TRIAL_ID = -1  # the placeholder holding the reserved slots of partial nodes


@dataclass
class ClusterLayout:
    """Nodes, slots and which agent rank serves which slot."""

    slots_per_node: int
    node_hosts: list[str]
    slot_to_rank: dict[int, int]
    assignments: dict[int, AgentAssignment]
    reserved_slots: list[int] = field(default_factory=list)

    @property
    def num_nodes(self) -> int:
        return len(self.node_hosts)

    @property
    def usable_slots(self) -> int:
        return len(self.slot_to_rank)

    def slots_on_nodes(self) -> list[int]:
        """Usable (not reserved) slots of each node."""
        counts = [0] * self.num_nodes
        for slot in self.slot_to_rank:
            counts[slot // self.slots_per_node] += 1
        return counts

    def make_pool(self) -> ResourcePool:
        """A ResourcePool with the reserved slots already taken."""
        pool = ResourcePool(self.num_nodes, self.slots_per_node, hostnames=list(self.node_hosts))
        if self.reserved_slots:
            pool.allocate(RESERVED_TRIAL_ID, self.reserved_slots)
        return pool


def build_layout(hellos: list[AgentHello], slots_per_node: int) -> ClusterLayout:
    """Group the agents (``hellos`` of ranks 1..N-1) into nodes of ``slots_per_node`` slots per host."""
    if slots_per_node < 1:
        raise ValueError(f"resources.slots_per_node must be >= 1, got {slots_per_node}")
    by_host: dict[str, list[AgentHello]] = {}
    for h in sorted(hellos, key=lambda h: h.rank):
        by_host.setdefault(h.host, []).append(h)
    node_hosts: list[str] = []
    slot_to_rank: dict[int, int] = {}
    assignments: dict[int, AgentAssignment] = {}
    reserved: list[int] = []
    for host, agents in by_host.items():
        for start in range(0, len(agents), slots_per_node):
            node = len(node_hosts)
            node_hosts.append(host)
            chunk = agents[start:start + slots_per_node]
            for local, h in enumerate(chunk):
                slot = node * slots_per_node + local
                slot_to_rank[slot] = h.rank
                assignments[h.rank] = AgentAssignment(slot=slot, node=node, local_index=start + local)
            reserved.extend(node * slots_per_node + k for k in range(len(chunk), slots_per_node))
    return ClusterLayout(slots_per_node, node_hosts, slot_to_rank, assignments, reserved)
