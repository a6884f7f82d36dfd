"""Time on shared GPUs in the simulator: processor sharing at the measured co-location curve.

A trial alone on a GPU needs ``duration`` seconds (its start-up and epochs, :meth:`SimTrial.attempt`).
While ``n`` trials share the GPU each advances at ``rate(n) = aggregate(n) / n`` of its speed alone
(:class:`~scheduler.sharing.ColocationCurve`). Whenever a GPU's residents change, every resident's
remaining work is advanced at the old rate and its end predicted again at the new one; the end
events of the old prediction carry an older version and are void. Start-up is charged like the
epochs (it is partly CPU and I/O: the charge is the larger one). Shared trials report no epochs (an
early-discarding stopper never sees them; the campaign re-estimates them from their predictions).
A resident still running at its time limit ends, like the trainer, after the epoch in progress
(:meth:`end_after`; a timeout with the epochs it finished).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from scheduler.sharing import ColocationCurve


@dataclass
class _Gpu:
    remaining: dict[int, float] = field(default_factory=dict)  # trial id -> alone-seconds of work left
    since: float = 0.0  # when ``remaining`` was last brought up to date
    version: int = 0


class SharedClock:
    """The residents of every shared GPU and their predicted ends; ``push(when, trial_id, version)``
    schedules an end event (the caller's event queue)."""

    def __init__(self, curve: ColocationCurve, push: Callable[[float, int, int], None]) -> None:
        self.curve = curve
        self.push = push
        self._gpus: dict[int, _Gpu] = {}  # slot -> its residents
        self._slot_of: dict[int, int] = {}  # trial id -> slot
        self._work: dict[int, float] = {}  # trial id -> alone-seconds of work it does in all

    def rate(self, n: int) -> float:
        """Each of ``n`` residents' speed relative to alone."""
        return self.curve.throughput(n) / n

    def join(self, trial_id: int, slot: int, duration: float, now: float) -> None:
        """``trial_id`` starts on shared GPU ``slot`` with ``duration`` alone-seconds of work."""
        gpu = self._gpus.setdefault(slot, _Gpu(since=now))
        self._advance(gpu, now)
        gpu.remaining[trial_id] = duration
        self._slot_of[trial_id] = slot
        self._work[trial_id] = duration
        self._predict(gpu, now)

    def work_done(self, trial_id: int, now: float) -> float:
        """Alone-seconds of work ``trial_id`` has done by ``now``."""
        gpu = self._gpus[self._slot_of[trial_id]]
        self._advance(gpu, now)
        return self._work[trial_id] - gpu.remaining[trial_id]

    def end_after(self, trial_id: int, work: float, now: float) -> None:
        """``trial_id`` ends once it has done ``work`` alone-seconds in all (its trainer stops early)."""
        done = self.work_done(trial_id, now)
        gpu = self._gpus[self._slot_of[trial_id]]
        gpu.remaining[trial_id] = max(work - done, 0.0)
        self._work[trial_id] = work
        self._predict(gpu, now)

    def leave(self, trial_id: int, now: float) -> None:
        """``trial_id`` ended (done, stopped or failed): the others speed up."""
        slot = self._slot_of.pop(trial_id, None)
        if slot is None:
            return
        gpu = self._gpus[slot]
        self._advance(gpu, now)
        del gpu.remaining[trial_id]
        del self._work[trial_id]
        if gpu.remaining:
            self._predict(gpu, now)
        else:
            del self._gpus[slot]

    def is_current(self, trial_id: int, version: int) -> bool:
        """Whether an end event of ``trial_id`` with ``version`` is the latest prediction."""
        slot = self._slot_of.get(trial_id)
        return slot is not None and self._gpus[slot].version == version

    def _advance(self, gpu: _Gpu, now: float) -> None:
        if gpu.remaining:
            done = (now - gpu.since) * self.rate(len(gpu.remaining))
            for tid in gpu.remaining:
                gpu.remaining[tid] = max(gpu.remaining[tid] - done, 0.0)
        gpu.since = now

    def _predict(self, gpu: _Gpu, now: float) -> None:
        gpu.version += 1
        rate = self.rate(len(gpu.remaining))
        for tid, left in gpu.remaining.items():
            self.push(now + left / rate, tid, gpu.version)
