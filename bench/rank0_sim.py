"""Does rank 0 keep up at full scale? (issue #45) The simulator on ``--nodes`` x 8 GCDs, one 1-GCD
trial per GCD per wave, charged rank 0's measured time per event (``bench/data/rank0_costs.json``,
written by ``bench/rank0_handlers.py``; :mod:`scheduler.simulator.rank0` states the error model)
against rank 0 for free, for the campaign shapes the issue names (trial length, epoch length).

Printed per shape: the events rank 0 must handle per second, its busy share of the campaign, how
long reports waited for it (p99, max), and the makespan with and without charging (the cost of a
rank 0 that does not keep up). Run: ``python -m bench.rank0_sim`` (about 5 minutes on 2 cores;
``--nodes 1024`` for a quick look).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from scheduler.simulator import SimConfig, SimTrial, simulate
from scheduler.simulator.rank0 import MEASURED, Rank0Costs

SHAPES = (("30 min, 60 s epochs", 1800.0, 60.0), ("10 min, 20 s epochs", 600.0, 20.0),
          ("2 min, 5 s epochs", 120.0, 5.0))
STARTUP_S = 20.0


def workload(slots: int, waves: float, trial_s: float, epoch_s: float, seed: int) -> list[SimTrial]:
    """``waves`` x ``slots`` one-GCD trials of about ``trial_s`` (lognormal spread 0.2)."""
    rng = np.random.default_rng(seed)
    epochs = max(1, int(round((trial_s - STARTUP_S) / epoch_s)))
    trials = []
    for i in range(int(waves * slots)):
        per_epoch = epoch_s * float(np.exp(0.2 * rng.standard_normal()))
        true = STARTUP_S + epochs * per_epoch
        trials.append(SimTrial(i, 1, trial_s, true, epochs=epochs, startup_s=STARTUP_S, epoch_s=per_epoch,
                               time_limit_s=10 * trial_s))
    return trials


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=8192)
    parser.add_argument("--waves", type=float, default=1.5, help="trials per GCD over the campaign (default 1.5)")
    parser.add_argument("--shapes", type=int, nargs="+", default=list(range(len(SHAPES))),
                        help=f"indices into {[s[0] for s in SHAPES]}")
    args = parser.parse_args(argv)
    slots = args.nodes * 8
    costs = Rank0Costs.read(MEASURED, slots)
    print(f"{args.nodes:,} nodes x 8 GCDs, {args.waves:g} one-GCD trials per GCD; rank 0 charged per {costs.source}: "
          f"start {1e6 * costs.start_s:.0f} us, epoch report {1e6 * costs.epoch_report_s:.0f} us, "
          f"end {1e6 * costs.end_s:.0f} us")
    print(f"{'shape':<22} {'events/s':>9} {'rank 0 busy':>12} {'wait p99':>9} {'wait max':>9} "
          f"{'makespan free':>14} {'charged':>9} {'sim s':>6}")
    for index in args.shapes:
        name, trial_s, epoch_s = SHAPES[index]
        work = workload(slots, args.waves, trial_s, epoch_s, seed=index)
        t0 = time.perf_counter()
        base = dict(nodes=args.nodes, gpus_per_node=8, retries=0, prefetch_below_s=0.0, learn_after=10**9)
        free = simulate(work, SimConfig(**base)).summary
        charged = simulate(work, SimConfig(**base, rank0_costs=costs)).summary
        rank0 = charged["rank0"]
        epochs = sum(t.epochs for t in work)
        rate = (2 * len(work) + epochs) / free["makespan_s"]
        print(f"{name:<22} {rate:>9,.0f} {100 * rank0['busy_fraction']:>11.1f}% {rank0['lag_s']['p99']:>8.2f}s "
              f"{rank0['lag_s']['max']:>8.1f}s {free['makespan_s'] / 60:>12.1f}min "
              f"{charged['makespan_s'] / 60:>7.1f}min {time.perf_counter() - t0:>6.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
