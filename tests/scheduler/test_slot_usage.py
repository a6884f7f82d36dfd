"""Rank 0's busy slot-seconds as running sums (:class:`scheduler.runtime.slot_usage.SlotUsage`)
equal the sum over every trial, recomputed from scratch, at any moment."""

from __future__ import annotations

import random

import pytest

from scheduler.loop import RunningTrial, TrialSpec
from scheduler.runtime.slot_usage import SlotUsage


def test_running_sums_match_a_recount():
    rng = random.Random(3)
    usage = SlotUsage()
    running: dict[int, RunningTrial] = {}
    ended: list[tuple[RunningTrial, float]] = []
    now = 0.0
    for tid in range(300):
        now += rng.random()
        if running and rng.random() < 0.5:
            rt = running.pop(rng.choice(sorted(running)))
            usage.ended(rt, now, gpu_still_shared=False)
            ended.append((rt, now))
        rt = RunningTrial(TrialSpec(tid, {}), tuple(range(rng.randint(1, 8))), now)
        usage.started(rt)
        running[tid] = rt
        probe = now + rng.random()
        expected = sum(len(r.slots) * (end - r.start_time) for r, end in ended)
        expected += sum(len(r.slots) * (probe - r.start_time) for r in running.values())
        busy, slots = usage.now(probe)
        assert busy == pytest.approx(expected, rel=1e-9) and slots == sum(len(r.slots) for r in running.values())
