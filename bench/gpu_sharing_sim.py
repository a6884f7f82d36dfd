"""Campaign time with several small trials per GPU against one trial per GPU, in the simulator.

The same synthetic campaign of the demo's search space (``simulate --space demo``: GIN, CGCNN or
SchNet, hidden 16-64, 1-3 layers, 30 epochs, on the multidataset's 2 M graphs; 50% lognormal
estimate error) runs through the real campaign loop, pool and load-aware policy, once per arm:
``off`` (the sizer spreads long trials over more GPUs to meet the 30-minute target, as today) and
each sharing rule (small trials sized at one GPU, from 4 trials per GPU on without wider sizes,
:mod:`scheduler.sharing`); shared GPUs run at the co-location curve's rate (processor sharing,
:mod:`scheduler.simulator.shared_clock`). Both arms plan from predictions only (no epoch reports:
shared trials report none). The trial time limit is the campaign's default, 3x the 30-minute
target: a trial joins a shared GPU only where every resident, its whole predicted run stretched
by the curve, is predicted to end within it; with the estimate error some still run longer and
end as timeouts with fewer epochs (a shared trial at its limit ends after the epoch in progress,
like the trainer). Printed per (nodes, trials per GPU): makespan per arm, its ratio to ``off`` and
the trials that ended as timeouts; the curve's source says whether it was measured.

    python -m bench.gpu_sharing_sim --curve colocation.json [--nodes 16 8192] [--per-gpu 4 16]
                                    [--arms off 4 auto] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from scheduler.sharing import ColocationCurve, GpuSharing
from scheduler.simulator import SimConfig, generate_workload, simulate
from scheduler.simulator.workload import default_time_limit

GPUS_PER_NODE = 8
TARGET_S = 1800.0  # generate_workload's default target duration


def run_arm(arm: str, nodes: int, trials: int, curve: ColocationCurve, seed: int) -> dict:
    """One simulated campaign; its makespan, mean wait and attempts on shared GPUs."""
    limit = default_time_limit(TARGET_S)
    sharing = GpuSharing.parse(arm, 64.0, curve, limit)
    workload = generate_workload(trials, nodes, GPUS_PER_NODE, 0.5, seed, space="demo", time_limit_s=limit,
                                 packing=sharing.packing(trials / (nodes * GPUS_PER_NODE)))
    config = SimConfig(nodes=nodes, gpus_per_node=GPUS_PER_NODE, seed=seed, estimate_error=0.5, reveal_epochs=False,
                       gpu_sharing=sharing, colocation=curve if sharing.enabled else None)
    t0 = time.perf_counter()
    result = simulate(workload, config)
    s, epochs = result.summary, {t.trial_id: t.epochs for t in workload}
    timeouts = sum(1 for r in result.records if r.ok and r.epochs is not None and r.epochs < epochs[r.trial_id])
    return {"makespan_h": s["makespan_s"] / 3600, "timeouts": timeouts,
            "shared": s["gpu_sharing"]["shared_attempts"], "sim_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--curve", type=Path, required=True, help="co-location curve (bench/gpu_colocation.py)")
    parser.add_argument("--nodes", type=int, nargs="+", default=[16])
    parser.add_argument("--per-gpu", type=float, nargs="+", default=[4.0, 16.0], help="trials per GPU of the machine")
    parser.add_argument("--arms", nargs="+", default=["off", "4", "auto"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.arms[0] != "off":
        parser.error("--arms must start with off (the ratios are to one trial per GPU)")
    curve = ColocationCurve.read(args.curve)
    print(f"curve {dict(curve.aggregate)} ({curve.source})")
    print(f"{'nodes':>6s} {'trials':>8s} " + " ".join(f"{a + ' h':>9s} {'ratio':>6s} {'t/o':>5s}" for a in args.arms))
    for nodes in args.nodes:
        for per_gpu in args.per_gpu:
            trials = int(per_gpu * nodes * GPUS_PER_NODE)
            rows = {arm: run_arm(arm, nodes, trials, curve, args.seed)
                    for arm in args.arms}
            base = rows["off"]["makespan_h"]
            print(f"{nodes:6d} {trials:8d} " + " ".join(f"{r['makespan_h']:9.2f} {r['makespan_h'] / base:6.2f} "
                                                          f"{r['timeouts']:5d}" for r in rows.values())
                  + "   (sim s: " + ", ".join(f"{r['sim_s']:.0f}" for r in rows.values()) + ")", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
