"""The HydraGNN HPO recipe: every trial gets the same block of ``block_nodes`` whole nodes, first in
first out, whatever its own size.

The block is handed out whole (``Decision.slots`` holds all its slots); a trial that asks for more
than one block gets the smallest multiple of the block that holds it. The simulator counts only the
trial's own ``slots`` as useful work (the rest of the block idles), as in the ANCHORS toy.
"""

from __future__ import annotations

from scheduler.placement.base import Decision, PlacementPolicy
from scheduler.resources import ResourcePool, WholeNodes


class FixedBlockPolicy(PlacementPolicy):
    """FIFO over fixed blocks of ``block_nodes`` nodes (node ``b * block_nodes ...`` for block ``b``)."""

    name = "fixed-block"

    def __init__(self, block_nodes: int = 1) -> None:
        super().__init__()
        if block_nodes < 1:
            raise ValueError(f"block_nodes must be >= 1, got {block_nodes}")
        self.block_nodes = block_nodes

    def _blocks_needed(self, slots: int, spn: int) -> int:
        per_block = self.block_nodes * spn
        return max(1, -(-slots // per_block))

    def _free_blocks(self, pool: ResourcePool) -> list[int]:
        """Blocks (aligned runs of ``block_nodes`` nodes) whose every node is whole-free."""
        blocks = []
        for b in range(pool.num_nodes // self.block_nodes):
            nodes = range(b * self.block_nodes, (b + 1) * self.block_nodes)
            if all(pool.free_on_node(nd) == pool.slots_per_node for nd in nodes):
                blocks.append(b)
        return blocks

    def schedule(self, pool: ResourcePool, now: float) -> list[Decision]:
        decisions: list[Decision] = []
        if not self._pending:
            return decisions
        free = self._free_blocks(pool)
        spn = pool.slots_per_node
        for req in self.pending:
            need = self._blocks_needed(req.slots, spn)
            if need > len(free):
                break  # FIFO: the head waits for its block(s)
            chosen, free = free[:need], free[need:]
            slots = WholeNodes([nd for b in chosen for nd in range(b * self.block_nodes, (b + 1) * self.block_nodes)],
                               spn)
            decisions.append(Decision(req.trial_id, slots))
            del self._pending[req.trial_id]
        return decisions
