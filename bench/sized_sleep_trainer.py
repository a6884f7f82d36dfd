"""A light trial program for bench/campaign_local.py: the trainer CLI contract, sleeps instead of
training, for a time set by the trial's own hyperparameters and size.

    python -m bench.sized_sleep_trainer train CONFIG --dataset D -o RUN_DIR --rank R --world-size W ...

Duration = ``SizedSleep.seconds_per_work`` x the cost model's analytic work of the config (GIN..PaiNN,
hidden_dim, layers, epochs; fixed dataset statistics) / (W x e(W)), times a lognormal factor
(``SizedSleep.scatter``) seeded by the trial id, capped by ``--time-budget``. Every rank sleeps the
same time; rank 0 writes result.json. No torch import (start-up stays ~0.1 s).
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from pathlib import Path

_T0 = time.time()


def _arg(argv: list[str], flag: str, default: str) -> str:
    return argv[argv.index(flag) + 1] if flag in argv else default


def duration_s(config: dict, world: int, trial_key: str) -> float:
    """How long this trial sleeps on ``world`` slots."""
    from scheduler.cost_model import CostModel, TrialFeatures
    from scheduler.dataset_stats import DatasetStats
    from scheduler.efficiency import ParallelEfficiency

    opts = config["SizedSleep"]
    model = CostModel(DatasetStats(opts.get("num_graphs", 1000), 30.0, 600.0),
                      efficiency=ParallelEfficiency(slots_per_node=opts.get("slots_per_node", 4)))
    work = model.analytic_work(TrialFeatures.from_config(config)) * opts["seconds_per_work"]
    scatter = math.exp(opts.get("scatter", 0.0) * random.Random(trial_key).gauss(0.0, 1.0))
    return work * scatter / (world * model.efficiency(world))


def main(argv: list[str]) -> int:
    config_path, run_dir = argv[1], Path(_arg(argv, "-o", "."))
    rank, world = int(_arg(argv, "--rank", "0")), int(_arg(argv, "--world-size", "1"))
    budget = float(_arg(argv, "--time-budget", "inf"))
    config = json.loads(Path(config_path).read_text())
    seconds = min(duration_s(config, world, run_dir.name), budget)
    time.sleep(max(0.0, seconds - (time.time() - _T0)))
    if rank == 0:
        arch = config["NeuralNetwork"]["Architecture"]
        result = {
            "status": "completed", "objective": (arch.get("hidden_dim", 64) - 48) ** 2 / 1000.0,
            "heads": {}, "num_parameters": 0, "epochs": 1, "best_epoch": 0,
            "wall_time_s": time.time() - _T0, "peak_memory_mb": None, "slots": world, "device": "cpu",
            "failure_reason": None, "traceback": None, "log_tail": None, "checkpoint": None,
        }
        tmp = run_dir / "result.json.tmp"
        tmp.write_text(json.dumps(result))
        os.replace(tmp, run_dir / "result.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
