"""First-in first-out baselines: strict (head-of-line blocking) and skipping."""

from __future__ import annotations

from scheduler.placement.base import Decision, PlacementPolicy, TrialRequest
from scheduler.resources import ResourcePool


class FifoPolicy(PlacementPolicy):
    """Start trials strictly in submission order; the first one that does not fit blocks the rest."""

    name = "fifo"

    def schedule(self, pool: ResourcePool, now: float) -> list[Decision]:
        decisions: list[Decision] = []
        with pool.tentative():
            for req in self.pending:
                slots = pool.pick(req.slots, avoid=req.avoid_nodes)
                if slots is None:
                    break
                pool.allocate(req.trial_id, slots)
                decisions.append(Decision(req.trial_id, slots))
                del self._pending[req.trial_id]
        return decisions

    def next_to_queue(self, now: float) -> TrialRequest | None:
        """The head of the queue if it needs one slot (strict order)."""
        return self._pop_first_single(strict=True)


class FifoSkipPolicy(PlacementPolicy):
    """Walk the queue in submission order and start whatever fits, skipping what does not.

    A size that did not fit makes every larger size of the same kind (sub-node / multi-node) skip
    without a search; the walk stops when no slot is left.
    """

    name = "fifo-skip"

    def schedule(self, pool: ResourcePool, now: float) -> list[Decision]:
        decisions: list[Decision] = []
        spn = pool.slots_per_node
        smallest_failed_sub = spn + 1
        smallest_failed_multi: int | None = None
        with pool.tentative():
            for req in self.pending:
                if pool.free_slots <= 0:
                    break
                n = req.slots
                if n <= spn and n >= smallest_failed_sub:
                    continue
                if n > spn and smallest_failed_multi is not None and n >= smallest_failed_multi:
                    continue
                slots = pool.pick(n, avoid=req.avoid_nodes)
                if slots is None and req.avoid_nodes:  # waits for a node it did not fail on
                    continue
                if slots is None:
                    if n <= spn:
                        smallest_failed_sub = n
                    else:
                        smallest_failed_multi = n
                    continue
                pool.allocate(req.trial_id, slots)
                decisions.append(Decision(req.trial_id, slots))
                del self._pending[req.trial_id]
        return decisions

    def next_to_queue(self, now: float) -> TrialRequest | None:
        """The first single-slot trial in submission order."""
        return self._pop_first_single(strict=False)
