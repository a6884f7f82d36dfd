"""Slot-seconds a campaign's trials kept busy, for rank 0's progress line (its utilisation)."""

from __future__ import annotations

from typing import Iterable

from scheduler.loop import RunningTrial


class SlotUsage:
    """A trial's slots count busy from its start to its processes' end; a shared GPU counts once,
    from its first resident's start to its last resident's end."""

    def __init__(self) -> None:
        self.busy_slot_s = 0.0  # of trials that ended
        self._shared_since: dict[int, float] = {}  # slot of a shared GPU -> its first resident's start

    def started(self, rt: RunningTrial) -> None:
        if rt.on_shared_gpu:
            self._shared_since.setdefault(rt.slots[0], rt.start_time)

    def ended(self, rt: RunningTrial, ended: float, gpu_still_shared: bool) -> None:
        """``rt`` ended at ``ended`` (its processes' end); ``gpu_still_shared``: other trials still
        hold its shared GPU (one agent reports its slot's exits in order)."""
        if not rt.on_shared_gpu:
            self.busy_slot_s += len(rt.slots) * max(0.0, ended - rt.start_time)
        elif not gpu_still_shared:
            self.busy_slot_s += max(0.0, ended - self._shared_since.pop(rt.slots[0]))

    def now(self, running: Iterable[RunningTrial], now: float) -> tuple[float, int]:
        """Slot-seconds kept busy up to ``now`` by every trial so far, and the slots in use now."""
        alone = [rt for rt in running if not rt.on_shared_gpu]
        busy = self.busy_slot_s + sum(len(rt.slots) * max(0.0, now - rt.start_time) for rt in alone)
        busy += sum(max(0.0, now - since) for since in self._shared_since.values())
        return busy, sum(len(rt.slots) for rt in alone) + len(self._shared_since)
