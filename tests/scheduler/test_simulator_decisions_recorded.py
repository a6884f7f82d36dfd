"""The simulator decides exactly as it did before the campaign loop wrote the journal (#44): eleven
campaigns (three policies, failures with drained nodes, ASHA, the median rule, the campaign's tail,
malleable moves, a time budget, optimizer latency, GPU sharing) recorded with commit ce57ede in
``data/decisions_ce57ede.json`` (by ``decision_fingerprints.py``) are run again: every attempt must
start and end at the same time on the same slots with the same outcome, and every summary figure
must agree to floating-point rounding (the attempts are now summed in trial order).

One case was recorded again since, on purpose: ``malleable``, when growth was limited to the
campaign's tail (nothing waits and every trial is out; #46) and a move waits for the epoch in
progress (as the runtime's trainer does; it waited for the nearest epoch end): 5 moves instead of
9, the same makespan and utilisation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from decision_fingerprints import fingerprints

RECORDED = Path(__file__).parent / "data" / "decisions_ce57ede.json"


def close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)
    return a == b


@pytest.fixture(scope="module")
def now() -> dict:
    return fingerprints()


@pytest.mark.parametrize("case", sorted(json.loads(RECORDED.read_text())))
def test_the_same_decisions_as_before_the_renovation(case, now):
    before = json.loads(RECORDED.read_text())[case]
    after = now[case]
    assert after["attempts_sha256"] == before["attempts_sha256"], f"{case}: an attempt started or ended differently"
    assert {k: after[k] for k in ("attempts", "moved", "failed", "stopped")} == \
        {k: before[k] for k in ("attempts", "moved", "failed", "stopped")}
    differ = [k for k in before["summary"] if not close(before["summary"][k], after["summary"][k])]
    assert not differ, f"{case}: {differ} changed"


def test_the_recording_exercises_what_the_renovation_touched():
    recorded = json.loads(RECORDED.read_text())
    assert recorded["malleable"]["moved"] > 0 and recorded["failures"]["failed"] > 0
    assert recorded["failures"]["summary"]["drained_nodes"] and recorded["asha"]["stopped"] > 0
    assert recorded["shared"]["summary"]["gpu_sharing"]["shared_attempts"] > 0
