"""A real campaign under ``mpiexec -n 16`` with trials of mixed sizes: load-aware against FIFO on the
same seed (same optimizer, same search space, same trial program), utilisation and makespan of each.

    .venv/bin/python bench/campaign_local.py [--ranks 16] [--trials 60] [--slots-per-node 4]
        [--policies load-aware fifo] [--repeats 1]

15 agents = slots grouped into nodes of ``--slots-per-node`` (the last node partial: the rank-0 host
lends it a slot); the cost model sizes each trial (1, 2, 4 slots or whole nodes) from its
hyperparameters; trials are ``bench.sized_sleep_trainer`` (sleeps for a time set by its
hyperparameters and size). Utilisation = sum(slots x wall time of each trial) / (usable slots x
campaign makespan) from the journal.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

BASE = {
    "NeuralNetwork": {
        "Architecture": {"mpnn_type": "GIN", "hidden_dim": 64, "num_conv_layers": 2},
        "Training": {"batch_size": 32, "num_epoch": 1, "Optimizer": {"learning_rate": 1e-3}},
    },
    "SizedSleep": {"seconds_per_work": 1.0, "num_graphs": 1000, "scatter": 0.3},
}
SPACE = {
    "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["GIN", "SchNet", "PNA", "PaiNN"]},
    "NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 16, "high": 160, "log": True},
    "NeuralNetwork.Architecture.num_conv_layers": {"type": "int", "low": 1, "high": 4},
}


def campaign(tmp: Path, policy: str, trials: int, spn: int, seed: int, scale: float) -> Path:
    base = json.loads(json.dumps(BASE))
    base["SizedSleep"]["seconds_per_work"] = scale
    base["SizedSleep"]["slots_per_node"] = spn
    (tmp / "base.json").write_text(json.dumps(base))
    (tmp / "data.bp").write_text("not read by the sized sleep trainer")
    sizes = sorted({1, 2, spn, 2 * spn} | ({4} if spn >= 4 else set()))
    data = {
        "dataset": "data.bp", "base_config": "base.json", "search_space": SPACE,
        "optimizer": {"name": "random"}, "max_trials": trials, "trial_time_limit_s": 24,
        "trial_program": "bench.sized_sleep_trainer", "seed": seed, "placement": policy,
        "resources": {"slots_per_node": spn, "device": "cpu", "slots_per_trial": sizes},
    }
    path = tmp / f"{policy}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def measure(out: Path, usable: int) -> dict:
    from hpo.journal import read_journal

    events = read_journal(out / "journal.jsonl").events
    started = {e["trial_id"]: e for e in events if e["event"] == "trial_started"}
    done = [e for e in events if e["event"] in ("trial_finished", "trial_failed")]
    t0 = min(e["time"] for e in events if e["event"] == "campaign_started")
    t1 = max(e["time"] for e in done)
    busy = sum(len(started[e["trial_id"]]["slots"]) * e["result"]["wall_time_s"] for e in done if e.get("result"))
    sizes = sorted(len(s["slots"]) for s in started.values())
    return {"makespan_s": t1 - t0, "utilisation": busy / (usable * (t1 - t0)), "trials": len(done),
            "sizes": {n: sizes.count(n) for n in sorted(set(sizes))}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--slots-per-node", type=int, default=4)
    ap.add_argument("--policies", nargs="+", default=["load-aware", "fifo"])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="seconds of sleep per unit of analytic work")
    args = ap.parse_args(argv)
    usable = args.ranks - 1
    results: dict[str, list[dict]] = {p: [] for p in args.policies}
    with tempfile.TemporaryDirectory() as td:
        for rep in range(args.repeats):
            for pol in args.policies:
                tmp = Path(td) / f"{pol}_{rep}"
                tmp.mkdir()
                path = campaign(tmp, pol, args.trials, args.slots_per_node, args.seed, args.scale)
                out = tmp / "out"
                t = time.perf_counter()
                proc = subprocess.run([str(BIN / "mpiexec"), "-n", str(args.ranks), str(BIN / "hydragnn-ensemble"),
                                       "hpo", str(path), "-o", str(out), "--no-progress"],
                                      cwd=REPO, capture_output=True, text=True, timeout=1800)
                if proc.returncode != 0:
                    print(proc.stdout[-2000:], proc.stderr[-4000:])
                    return 1
                m = measure(out, usable)
                m["wall_s"] = time.perf_counter() - t
                results[pol].append(m)
                print(f"{pol:<11} run {rep}: makespan {m['makespan_s']:.1f} s, utilisation "
                      f"{100 * m['utilisation']:.1f}%, {m['trials']} trials, sizes {m['sizes']}")
    print(f"\nmpiexec -n {args.ranks} ({usable} slots, nodes of {args.slots_per_node}), {args.trials} trials, "
          f"seed {args.seed}, medians over {args.repeats} run(s):")
    for pol in args.policies:
        r = results[pol]
        print(f"  {pol:<11} makespan {statistics.median(x['makespan_s'] for x in r):7.1f} s   "
              f"utilisation {100 * statistics.median(x['utilisation'] for x in r):5.1f}%")
    if "load-aware" in results and "fifo" in results:
        la = statistics.median(x["makespan_s"] for x in results["load-aware"])
        ff = statistics.median(x["makespan_s"] for x in results["fifo"])
        print(f"  fifo / load-aware makespan ratio: {ff / la:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
