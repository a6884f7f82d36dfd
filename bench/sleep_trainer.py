"""A trivial trial program for bench/campaign_overhead.py: the trainer CLI contract, no heavy imports.

    python -m bench.sleep_trainer train CONFIG --dataset D -o RUN_DIR [other trainer flags, ignored]

Sleeps ``config["Sleep"]["seconds"]`` and writes a completed result.json whose ``wall_time_s`` is
the time spent inside this module (so interpreter start-up = process wall time - wall_time_s).
"""

import json
import os
import sys
import time

_T0 = time.time()


def main(argv: list[str]) -> int:
    config_path, run_dir = argv[1], argv[argv.index("-o") + 1]
    with open(config_path) as fh:
        config = json.load(fh)
    time.sleep(config["Sleep"]["seconds"])
    x = config["Sleep"]["x"]
    result = {
        "status": "completed", "objective": (x - 0.3) ** 2, "heads": {}, "num_parameters": 0,
        "epochs": 1, "best_epoch": 0, "wall_time_s": time.time() - _T0, "peak_memory_mb": None,
        "slots": 1, "device": "cpu", "failure_reason": None, "traceback": None, "log_tail": None,
        "checkpoint": None,
    }
    tmp = os.path.join(run_dir, "result.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(result, fh)
    os.replace(tmp, os.path.join(run_dir, "result.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
