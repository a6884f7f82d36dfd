"""First-fit: walk the pending queue in submission order and start whatever fits now."""

from __future__ import annotations

from scheduler.placement.base import Decision, PlacementPolicy
from scheduler.resources import ResourcePool


class FirstFitPolicy(PlacementPolicy):
    """Start pending trials in arrival order, skipping those that do not fit at the moment."""

    name = "first-fit"

    def schedule(self, pool: ResourcePool, now: float) -> list[Decision]:
        decisions: list[Decision] = []
        with pool.tentative():
            for req in self.pending:
                if pool.free_slots <= 0:
                    break
                if req.slots > pool.free_slots or not pool.can_fit(req.slots):
                    continue
                slots = pool.pick(req.slots)
                if slots is None:
                    continue
                pool.allocate(req.trial_id, slots)
                decisions.append(Decision(req.trial_id, slots))
                del self._pending[req.trial_id]
        return decisions
