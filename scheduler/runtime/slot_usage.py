"""Slot-seconds a campaign's trials kept busy, for rank 0's progress line (its utilisation), kept
as running sums: a progress line costs O(1), not O(running trials)."""

from __future__ import annotations

from scheduler.loop import RunningTrial


class SlotUsage:
    """A trial's slots count busy from its start to its processes' end; a shared GPU counts once,
    from its first resident's start to its last resident's end."""

    def __init__(self) -> None:
        self.busy_slot_s = 0.0  # of trials that ended
        self._shared_since: dict[int, float] = {}  # slot of a shared GPU -> its first resident's start
        self._shared_since_sum = 0.0
        self._slots = 0  # slots held by running trials alone on their GPUs
        self._slot_starts = 0.0  # the sum of their slots x start times

    def started(self, rt: RunningTrial) -> None:
        if rt.on_shared_gpu:
            if rt.slots[0] not in self._shared_since:
                self._shared_since[rt.slots[0]] = rt.start_time
                self._shared_since_sum += rt.start_time
        else:
            self._slots += len(rt.slots)
            self._slot_starts += len(rt.slots) * rt.start_time

    def ended(self, rt: RunningTrial, ended: float, gpu_still_shared: bool) -> None:
        """``rt`` ended at ``ended`` (its processes' end); ``gpu_still_shared``: other trials still
        hold its shared GPU (one agent reports its slot's exits in order)."""
        if not rt.on_shared_gpu:
            self.busy_slot_s += len(rt.slots) * max(0.0, ended - rt.start_time)
            self._slots -= len(rt.slots)
            self._slot_starts -= len(rt.slots) * rt.start_time
        elif not gpu_still_shared:
            since = self._shared_since.pop(rt.slots[0])
            self._shared_since_sum -= since
            self.busy_slot_s += max(0.0, ended - since)

    def now(self, now: float) -> tuple[float, int]:
        """Slot-seconds kept busy up to ``now`` by every trial so far, and the slots in use now."""
        busy = self.busy_slot_s + max(0.0, self._slots * now - self._slot_starts)
        busy += max(0.0, len(self._shared_since) * now - self._shared_since_sum)
        return busy, self._slots + len(self._shared_since)
