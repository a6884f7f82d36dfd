"""Rank 0's thread per finished trial with the optimizer on it or in a process of its own
(:mod:`hpo.optimizer_process`), same run, same backend: CPU time of the calling thread
(``time.thread_time``) for the tell of each result and the asks that replace them (batches of 64,
as the candidate pool asks), over ``--results`` results of a synthetic objective arriving at
``--rate`` per second; and, in its own process, how often rank 0 found no suggestion ready.

Run: ``python -m bench.optimizer_process`` (about 3 minutes on 2 cores). The process's own work
is not on rank 0's thread: it runs on another core.
"""

from __future__ import annotations

import argparse
import time

from hpo.optimizer_process import OptimizerProcess
from hpo.optimizers import make_optimizer
from hpo.pool import CandidatePool
from hpo.space import SearchSpace

SPACE = {"NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 16, "high": 256, "log": True},
         "NeuralNetwork.Architecture.num_conv_layers": {"type": "int", "low": 1, "high": 6},
         "NeuralNetwork.Training.Optimizer.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
         "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["SchNet", "EGNN", "PAINN"]}}


def _objective(params: dict) -> float:
    lr = params["NeuralNetwork.Training.Optimizer.learning_rate"]
    return abs(lr - 2e-3) * 100 + 1.0 / params["NeuralNetwork.Architecture.hidden_dim"]


def per_result(optimizer, results: int, rate: float) -> tuple[float, int]:
    """Rank 0's CPU seconds per result, and how many times it found no suggestion ready, when
    results come at ``rate`` per second (rank 0 idle between them): take a candidate, tell its
    result (the pool asks in 64s)."""
    pool = CandidatePool(optimizer, batch_size=64)
    while pool.size < 64:  # the first wave (not counted): its own process has started and made them
        pool.refill(64)
        time.sleep(0.01)
    cpu, starved = 0.0, 0
    for _ in range(results):
        c0 = time.thread_time()
        taken = pool.take(1)
        while not taken:  # none made yet: rank 0 goes on pumping messages, and looks again
            starved += 1
            cpu += time.thread_time() - c0
            time.sleep(0.001)
            c0 = time.thread_time()
            taken = pool.take(1)
        optimizer.tell(taken[0].suggestion_id, _objective(taken[0].params))
        cpu += time.thread_time() - c0
        time.sleep(1.0 / rate)
    return cpu / results, starved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["optuna-tpe", "deephyper-cbo"])
    parser.add_argument("--results", type=int, default=200)
    parser.add_argument("--rate", type=float, default=36.0,
                        help="results per second (36: one 30-minute trial per GCD on 65,536 GCDs)")
    args = parser.parse_args(argv)
    space = SearchSpace.from_dict(SPACE)
    print(f"rank 0's thread per result ({args.results} results at {args.rate:g}/s; CPU ms), and the takes that "
          "found no suggestion ready")
    print(f"{'backend':<15} {'on the thread':>14} {'own process':>12} {'ratio':>7} {'starved takes':>14}")
    for name in args.backends:
        inline, _ = per_result(make_optimizer(name, space, 0), args.results, args.rate)
        proc = OptimizerProcess(name, space, 0, {}, stock=64)
        try:
            apart, starved = per_result(proc, args.results, args.rate)
        finally:
            proc.close()
        print(f"{name:<15} {1e3 * inline:>14.2f} {1e3 * apart:>12.3f} {inline / apart:>6.0f}x {starved:>14}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
