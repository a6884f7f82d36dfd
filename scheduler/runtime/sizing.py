"""How many slots a candidate trial gets and how long it is expected to take.

:class:`TrialSizer` is what the scheduler rank calls. The campaign runtime uses
:func:`scheduler.sizing.runtime_sizer` (the cost model: memory first, then a target duration; it
learns from finished trials); :class:`SmallestSizeSizer` is the simplest implementation (the smallest
allowed size, the mean wall time of finished trials as the prediction)."""

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


class SmallestSizeSizer:
    """Every trial at the smallest usable size; predicted time = running mean of finished trials."""

    def __init__(self, sizes: list[int], time_limit_s: float) -> None:
        self.sizes = sizes
        self.time_limit_s = time_limit_s
        self._sum = 0.0
        self._n = 0

    def size(self, params: dict[str, Any]) -> tuple[int, float]:
        predicted = self._sum / self._n if self._n else self.time_limit_s
        return self.sizes[0], predicted

    def observe(self, params: dict[str, Any], slots: int, wall_time_s: float, ok: bool) -> None:
        if ok:
            self._sum += wall_time_s
            self._n += 1

    def larger_than(self, slots: int) -> int | None:
        """The next usable size above ``slots`` (for retrying an out-of-memory trial), or None."""
        return next((s for s in self.sizes if s > slots), None)
