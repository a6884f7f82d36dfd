"""How many slots a candidate trial gets and how long it is expected to take.

:class:`TrialSizer` is what the scheduler rank calls; the campaign runtime implements it with
:func:`scheduler.sizing.runtime_sizer` (the cost model: memory first, then a target duration; it
learns from finished trials). :func:`usable_sizes` says which allowed sizes a run can start."""

from __future__ import annotations

from typing import Any, Protocol


class TrialSizer(Protocol):
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
