"""First-fit: walk the pending queue in submission order and start whatever fits now."""

from __future__ import annotations

from scheduler.placement.base import Decision, PlacementPolicy, pick_slots
from scheduler.resources import ResourcePool


class FirstFitPolicy(PlacementPolicy):
    """Start pending trials in arrival order, skipping those that do not fit at the moment."""

    name = "first-fit"

    def schedule(self, pool: ResourcePool, now: float) -> list[Decision]:
        decisions: list[Decision] = []
        taken: set[int] = set()
        for req in self.pending:
            if pool.free_slots - len(taken) <= 0:
                break
            if req.slots > pool.free_slots - len(taken):
                continue
            slots = pick_slots(pool, req.slots, taken)
            if slots is None:
                continue
            taken.update(slots)
            decisions.append(Decision(req.trial_id, slots))
            del self._pending[req.trial_id]
        return decisions
