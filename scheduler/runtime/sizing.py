"""How many slots a candidate trial gets and how long it is expected to take.

:class:`TrialSizer` is what the scheduler rank calls; the campaign runtime implements it with
:func:`scheduler.sizing.runtime_sizer` (the cost model: memory first, then a target duration; it
learns from finished trials). :func:`usable_sizes` says which allowed sizes a run can start;
:func:`trial_request` is what placement is told about a trial attempt."""

from __future__ import annotations

from typing import Any, Protocol

from scheduler.placement.base import TrialRequest
from scheduler.sizing import SizedTrial


class TrialSizer(Protocol):
    def choose(self, params: dict[str, Any]) -> SizedTrial:
        """Size, predicted seconds and wider sizes (moldable alternatives) of a candidate."""

    def size(self, params: dict[str, Any]) -> tuple[int, float]:
        """(slots, predicted seconds) for a candidate."""

    def observe(self, params: dict[str, Any], slots: int, wall_time_s: float, ok: bool) -> None:
        """Learn from a finished trial."""

    def larger_than(self, slots: int) -> int | None:
        """The next usable size above ``slots`` (out-of-memory retry), or None."""


def usable_sizes(allowed: list[int], slots_per_node: int, slots_on_nodes: list[int]) -> list[int]:
    """The allowed trial sizes this cluster can run, ascending. ``slots_on_nodes``: usable slots of
    each node. A size up to one node needs a node with that many usable slots; a larger one needs
    ``size / slots_per_node`` complete nodes."""
    complete = sum(n == slots_per_node for n in slots_on_nodes)
    biggest = max(slots_on_nodes, default=0)
    ok = sorted(s for s in set(allowed) if (s <= slots_per_node and s <= biggest) or (
        s > slots_per_node and s % slots_per_node == 0 and s // slots_per_node <= complete))
    if not ok:
        raise ValueError(
            f"resources.slots_per_trial {sorted(allowed)}: no size fits this run (usable slots per "
            f"node: {slots_on_nodes}, slots_per_node {slots_per_node}); start more ranks or allow "
            "smaller trials")
    return ok


MIN_MOLDABLE_S = 60.0  # trials predicted shorter than this at their own size are not widened


def trial_request(trial_id: int, slots: int, sized: SizedTrial, submit_time: float,
                  min_moldable_s: float = MIN_MOLDABLE_S) -> TrialRequest:
    """The placement request of a trial attempt on ``slots`` slots: the predicted time at that size
    and the sizer's wider sizes as moldable ``alternatives`` (a policy may start it at one of them;
    the trial then runs on that many slots, see ``SchedulerRank._schedule``).

    A trial predicted to take less than ``min_moldable_s`` at ``slots`` stays rigid: starting more
    processes and their torch.distributed rendezvous costs seconds, which the cost model does not
    count and which would eat what a wider start saves on a short trial."""
    seconds = sized.seconds_at(slots)
    wider = tuple((n, sec) for n, sec in sized.alternatives if n > slots) if seconds >= min_moldable_s else ()
    return TrialRequest(trial_id, slots, predicted_seconds=seconds, submit_time=submit_time, alternatives=wider)
