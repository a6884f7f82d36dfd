"""The simulator's decisions on a fixed set of campaigns, as fingerprints: every attempt (trial,
attempt, start, end, slots held, outcome, epochs) and the summary's figures other than wall-clock
ones. ``python tests/scheduler/decision_fingerprints.py OUT.json`` records them; the test
``test_simulator_decisions_recorded.py`` compares the current code's with the recording made before
the campaign loop wrote the journal (commit ce57ede), so a refactor that changes a decision fails."""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any, Callable

from scheduler.sharing import ColocationCurve, GpuSharing
from scheduler.simulator import SimConfig, generate_workload, simulate

WALL_CLOCK_KEYS = ("sim_wall_s", "decision_latency_ms", "decision_cpu_ms")


def _cases() -> dict[str, Callable[[], Any]]:
    def plain(policy: str, **cfg: Any) -> Callable[[], Any]:
        return lambda: simulate(generate_workload(300, 32, 8, 0.5, seed=3, max_trial_nodes=4),
                                SimConfig(nodes=32, gpus_per_node=8, policy=policy, block_nodes=4, **cfg))

    def curves(method: str, **cfg: Any) -> Callable[[], Any]:
        return lambda: simulate(generate_workload(200, 16, 4, 0.4, seed=5, curves=True),
                                SimConfig(nodes=16, gpus_per_node=4, block_nodes=2, early_stopping=method, **cfg))

    def shared() -> Any:
        curve = ColocationCurve({1: 1.0, 2: 1.7, 3: 2.2, 4: 2.5}, "recorded test curve")
        sharing = GpuSharing.parse("auto", 64.0, curve, time_limit_s=5400.0)
        work = generate_workload(200, 4, 8, 0.3, seed=11, space="demo", packing=sharing.packing(200 / 32))
        return simulate(work, SimConfig(nodes=4, gpus_per_node=8, gpu_sharing=sharing, colocation=curve))

    return {
        "load-aware": plain("load-aware"),
        "fixed-block": plain("fixed-block"),
        "first-fit": plain("first-fit"),
        "failures": plain("load-aware", failure_rate=0.05, bad_nodes=1, retries=1, failure_threshold=0.9),
        "asha": curves("asha"),
        "median": curves("median"),
        "asha-tail": curves("asha", fill_tail=True, max_trials=150),
        "malleable": plain("load-aware", malleable=True),
        "time-limit": plain("load-aware", max_time_s=3600.0),
        "latency": plain("load-aware", ask_latency_s=5.0, ask_batch=16),
        "shared": shared,
    }


def fingerprint(result: Any) -> dict[str, Any]:
    """The attempts' hash and the summary without wall-clock figures."""
    rows = sorted((r.trial_id, r.attempt, round(r.start, 6), round(r.end, 6), list(r.held), r.ok, r.epochs,
                   r.stopped, r.moved) for r in result.records)
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    summary = {k: v for k, v in result.summary.items() if k not in WALL_CLOCK_KEYS}
    return {"attempts": len(rows), "moved": sum(r.moved for r in result.records),
            "failed": sum(not r.ok for r in result.records), "stopped": sum(r.stopped for r in result.records),
            "attempts_sha256": digest, "summary": json.loads(json.dumps(summary))}


def fingerprints() -> dict[str, dict[str, Any]]:
    return {name: fingerprint(run()) for name, run in _cases().items()}


if __name__ == "__main__":
    out = fingerprints()
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True)
    for name, fp in out.items():
        print(name, {k: fp[k] for k in ("attempts", "moved", "failed", "stopped")}, fp["summary"]["makespan_s"])
