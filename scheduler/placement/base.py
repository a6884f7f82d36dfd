"""The placement interface: which pending trial starts now, and on which slots.

A policy is driven by events. The caller (the MPI runtime on rank 0, or the discrete-event
simulator with a virtual clock) does::

    policy.submit(request)                    # a new candidate trial, already sized by the cost model
    policy.update(request)                    # a pending one sized again (the cost model learnt)
    decisions = policy.schedule(pool, now)    # whenever slots are freed or candidates arrive
    for d in decisions: pool.allocate(d.trial_id, d.slots); start(d)
    ...
    policy.revise(estimate, now)              # a running trial re-estimated after an epoch
    policy.adopt(owner, slots, end, now)      # slots the caller holds itself (a shared GPU)
    for g in policy.grow(pool, now): move(g)  # nothing pending: running trials onto more slots
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

Growing running trials (optional, malleable trials): ``policy.grow(pool, now)`` returns
:class:`Growth` decisions for running trials whose :class:`RunningEstimate` offers wider sizes, each
with the slots the trial is to run on (free ones, and possibly its own). The caller holds the free
ones under :func:`growth_key` until the move (the trial's next epoch boundary, or at once for a
restart from scratch), then releases both holdings, gives the trial its new slots and calls
``policy.finished(growth_key(id), now)``, ``policy.finished(id, now)`` and ``policy.moved(id, slots,
end, now)``. A policy that returns nothing (the default) never grows a trial.
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
    ``avoid_nodes``: nodes an earlier attempt failed on for a node-level reason; a policy passes them
    to :meth:`ResourcePool.pick` (``avoid``), which uses them only when nothing else fits.
    """

    trial_id: int
    slots: int
    predicted_seconds: float = 1.0
    submit_time: float = 0.0
    memory_per_slot_gb: float = 0.0
    alternatives: tuple[tuple[int, float], ...] = ()
    avoid_nodes: frozenset[int] = frozenset()

    @property
    def predicted_work(self) -> float:
        return self.slots * self.predicted_seconds


@dataclass(frozen=True)
class RunningEstimate:
    """A running trial re-estimated after an epoch: its predicted ``end`` on the ``slots`` it
    holds, the ``boundary`` (the end of its current epoch: the earliest it can move) and the wider
    sizes it may move to there, as ``(slots, predicted end if moved)`` in ascending slots (empty:
    it stays on its slots)."""

    trial_id: int
    slots: int
    end: float
    boundary: float
    wider: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class Growth:
    """Move running trial ``trial_id`` onto ``slots`` (global slot ids: free ones, possibly some of
    its own) at the ``boundary`` of its :class:`RunningEstimate`; ``end``: its predicted end there."""

    trial_id: int
    slots: tuple[int, ...]
    end: float


def growth_key(trial_id: int) -> int:
    """The pool owner id under which the free slots a growing trial will move onto are held."""
    return -1 - trial_id


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

    def update(self, request: TrialRequest) -> None:
        """A pending candidate was sized again (the cost model learnt since): the same trial with a
        new size, prediction or alternatives; it keeps its place in submission order."""
        if request.trial_id not in self._pending:
            raise KeyError(f"trial {request.trial_id} is not pending")
        self._pending[request.trial_id] = request

    def finished(self, trial_id: int, now: float) -> None:  # noqa: B027 - optional hook
        """Called after a running trial's slots were released; policies with reservations update here."""

    def adopt(self, owner: int, slots: tuple[int, ...], end: float, now: float) -> None:  # noqa: B027
        """The caller holds ``slots`` under ``owner`` (a shared GPU, :mod:`scheduler.sharing`), a
        holder placement did not start, predicted to end at ``end`` (:meth:`revise` moves the end,
        :meth:`finished` releases it); policies that plan with running ends count it like a trial."""

    def revise(self, estimate: RunningEstimate, now: float) -> None:  # noqa: B027 - optional hook
        """A running trial's end was re-estimated (from the epochs it reported): policies that plan
        with running trials' ends (reservations, the ideal finish time, growth) use the new one."""

    def grow(self, pool: ResourcePool, now: float) -> list[Growth]:
        """Running trials to move onto more slots (none by default; see the module docstring). Like
        :meth:`schedule` it does not modify ``pool`` and names only free slots besides the trial's."""
        return []

    def moved(self, trial_id: int, slots: tuple[int, ...], end: float, now: float) -> None:  # noqa: B027
        """A trial it grew holds ``slots`` from now on and is predicted to end at ``end``."""

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
