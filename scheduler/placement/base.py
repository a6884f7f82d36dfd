"""The placement interface: which pending trial starts now, and on which slots.

A policy is driven by events. The caller (the MPI runtime on rank 0, or the discrete-event
simulator with a virtual clock) does::

    policy.submit(request)                    # a new candidate trial, already sized by the cost model
    decisions = policy.schedule(pool, now)    # whenever slots are freed or candidates arrive
    for d in decisions: pool.allocate(d.trial_id, d.slots); start(d)
    ...
    pool.release(trial_id); policy.finished(trial_id, now)

Contract for every policy:
- ``schedule`` never returns a slot that is not free in ``pool`` at that moment, never the same slot
  twice, and never a trial twice; it does not modify ``pool`` (the caller applies the decisions);
- a returned trial leaves the pending queue;
- ``schedule`` is deterministic given the same submissions and pool state.

Queueing behind a running trial (optional, the runtime's prefetch of very short trials): the caller
asks ``policy.next_to_queue(now)`` for the single-slot trial it would start next when one slot frees,
sends it ahead to the agent of a slot whose trial is about to end, and calls
``policy.queued_started(trial_id, slots, now)`` once that slot was released and given to it. A
policy that returns None (the default) is never prefetched from.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from scheduler.resources import ResourcePool


@dataclass(frozen=True)
class TrialRequest:
    """A candidate trial as placement sees it.

    ``slots``: the number of slots it needs (chosen by the cost model); a request for more than one
    node's worth of slots is a multi-node trial and always gets whole nodes.
    ``predicted_seconds``: predicted wall time at that size (used for reservations and backfill).
    ``predicted_work``: predicted slot-seconds (``slots * predicted_seconds`` unless stated).
    ``alternatives``: optional larger sizes the trial may run at instead (moldable), as
    ``(slots, predicted_seconds)`` in ascending slots; a policy may start it at one of them
    (``len(Decision.slots)`` is then the trial's size). Empty: the trial is rigid.
    """

    trial_id: int
    slots: int
    predicted_seconds: float = 1.0
    submit_time: float = 0.0
    memory_per_slot_gb: float = 0.0
    alternatives: tuple[tuple[int, float], ...] = ()

    @property
    def predicted_work(self) -> float:
        return self.slots * self.predicted_seconds


@dataclass(frozen=True)
class Decision:
    """Start ``trial_id`` on these global slot ids now."""

    trial_id: int
    slots: tuple[int, ...]


class PlacementPolicy(ABC):
    """Base class of placement policies. See the module docstring for the contract."""

    name: str = "abstract"

    def __init__(self) -> None:
        self._pending: dict[int, TrialRequest] = {}

    def submit(self, request: TrialRequest) -> None:
        """Add a candidate to the pending queue."""
        if request.trial_id in self._pending:
            raise ValueError(f"trial {request.trial_id} is already pending")
        self._pending[request.trial_id] = request

    def cancel(self, trial_id: int) -> None:
        """Drop a pending candidate (for example when the campaign budget is reached)."""
        self._pending.pop(trial_id, None)

    def finished(self, trial_id: int, now: float) -> None:  # noqa: B027 - optional hook
        """Called after a running trial's slots were released; policies with reservations update here."""

    def next_to_queue(self, now: float) -> TrialRequest | None:
        """The pending single-slot trial to start on the next slot that frees, removed from the queue,
        or None: nothing should be committed ahead of time (the default; see the module docstring)."""
        return None

    def queued_started(self, trial_id: int, slots: tuple[int, ...], now: float) -> None:  # noqa: B027
        """A trial from :meth:`next_to_queue` now holds ``slots`` (allocated in the caller's pool)."""

    def _pop_first_single(self, strict: bool) -> TrialRequest | None:
        """The first pending single-slot request, removed (``strict``: only if it heads the queue)."""
        for req in self._pending.values():
            if req.slots == 1:
                return self._pending.pop(req.trial_id)
            if strict:
                return None
        return None

    @property
    def pending(self) -> list[TrialRequest]:
        """Pending candidates in submission order."""
        return list(self._pending.values())

    def __len__(self) -> int:
        return len(self._pending)

    @abstractmethod
    def schedule(self, pool: ResourcePool, now: float) -> list[Decision]:
        """Choose trials to start now on free slots of ``pool``; remove them from the queue."""
