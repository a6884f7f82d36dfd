"""Population-based training against ASHA and TPE on the demo's search space (#46), real runs.

Each method runs the demo campaign's search space (``examples/alloy/campaign.yaml``) with the
built-in trainer under ``mpiexec -n --ranks`` (``--ranks - 1`` slots, the same for every method) for
``--budget`` seconds of campaign time (``max_time_s``; the trial time limit is the same, so a trial
never outlives it by much), ``--seeds`` seeds each:

* ``pbt``: a population of ``--population`` trials of ``--pbt-epochs`` epochs, exploit/explore every
  ``--interval`` epochs (no early discarding);
* ``asha``: random search with ASHA (min 1 epoch, reduction factor 3) over trials of ``--epochs``;
* ``tpe``: optuna-tpe over trials of ``--epochs``, no early discarding.

The slots are busy all along in every run, so equal campaign time is equal slot-seconds. From the
journal's epoch reports (validation objective, with rank 0's time), per run: the best validation
objective reported within the cut-off (the shortest makespan of all runs: equal slot-seconds), and
the seconds until the run first reported an objective at least as good as ASHA's best of the same
seed (None: never). Medians over the seeds are printed.

Run from the repository root (the campaign's processes import this checkout)::

    .venv/bin/python -m bench.pbt_compare --data /tmp/demo53/demo_out/alloy.bp [--ranks 5] [--budget 60]
        [--seeds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from bench.checkpoint_resume import child_env, demo_space, hpo_argv

METHODS = ("pbt", "asha", "tpe")


@dataclass
class Run:
    """One campaign run: its epoch reports as (seconds since its start, objective)."""

    method: str
    seed: int
    makespan_s: float
    reports: list[tuple[float, float]] = field(default_factory=list)
    exploits: int = 0

    def best_by(self, t: float) -> float | None:
        values = [v for s, v in self.reports if s <= t]
        return min(values) if values else None

    def time_to(self, target: float) -> float | None:
        return next((s for s, v in sorted(self.reports) if v <= target), None)


def write_campaign(tmp: Path, data: Path, method: str, seed: int, args) -> Path:
    spec, base = demo_space()
    training = base["NeuralNetwork"]["Training"]
    training["num_epoch"] = args.pbt_epochs if method == "pbt" else args.epochs
    training["EarlyStopping"] = False
    (tmp / "base.json").write_text(json.dumps(base))
    campaign = {
        "dataset": str(data), "base_config": "base.json", "objective": "objective", "search_space": spec,
        "max_trials": args.population if method == "pbt" else 200, "max_time_s": args.budget,
        "trial_time_limit_s": args.budget, "seed": seed,
        "resources": {"slots_per_node": 1, "device": "cpu", "slots_per_trial": [1]},
        "trial_program": "hydragnn_ensemble", "trial_launcher": "fork-server", "retries": 0, "malleable": False,
        "optimizer": {"pbt": {"name": "pbt", "options": {"interval": args.interval}},
                      "asha": {"name": "random"}, "tpe": {"name": "optuna-tpe"}}[method],
        "early_stopping": ({"method": "asha", "min_epochs": 1, "reduction_factor": 3} if method == "asha"
                           else {"method": "none"}),
    }
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    return path


def read_run(out: Path, method: str, seed: int) -> Run:
    events = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    start = next(e["time"] for e in events if e["event"] == "campaign_started")
    end = next(e["time"] for e in events if e["event"] == "campaign_finished")
    run = Run(method, seed, end - start, exploits=sum(e["event"] == "trial_exploited" for e in events))
    run.reports = [(e["time"] - start, float(e["objective"])) for e in events
                   if e["event"] == "trial_progress" and e.get("objective") is not None]
    return run


def run_once(data: Path, method: str, seed: int, args, work: Path) -> Run:
    tmp = work / f"{method}{seed}"
    tmp.mkdir()
    campaign = write_campaign(tmp, data, method, seed, args)
    proc = subprocess.run(hpo_argv(campaign, tmp / "out", args.ranks, resume=False), env=child_env(),
                          capture_output=True, text=True, timeout=20 * args.budget)
    if proc.returncode != 0:
        raise SystemExit(f"campaign failed ({tmp}):\n{proc.stderr[-3000:]}")
    return read_run(tmp / "out", method, seed)


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def report(runs: list[Run], args) -> dict:
    cutoff = min(r.makespan_s for r in runs)
    asha_best = {r.seed: min(v for _, v in r.reports) for r in runs if r.method == "asha"}
    out = {"cutoff_s": cutoff, "ranks": args.ranks, "budget_s": args.budget, "methods": {}}
    print(f"equal slot-seconds: {args.ranks - 1} slots x {cutoff:.1f} s (the shortest run)")
    for method in METHODS:
        mine = [r for r in runs if r.method == method]
        best = [r.best_by(cutoff) for r in mine]
        reach = [r.time_to(asha_best[r.seed]) for r in mine]
        out["methods"][method] = {"best": best, "time_to_asha_best_s": reach,
                                  "median_best": median(best), "median_time_to_asha_best_s": median(reach),
                                  "reached": sum(t is not None for t in reach), "exploits": [r.exploits for r in mine]}
        shown = ", ".join("never" if t is None else f"{t:.1f}" for t in reach)
        print(f"{method:>5}: best validation objective median {median(best):.5g} ({', '.join(f'{b:.5g}' for b in best)}); "
              f"seconds to ASHA's best: {shown}" + (f"; exploits {out['methods'][method]['exploits']}" if method == "pbt" else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--ranks", type=int, default=5)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--pbt-epochs", type=int, default=40)
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--interval", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="pbt_compare_") as work:
        for seed in range(args.seeds):
            for method in METHODS:
                runs.append(run_once(args.data.resolve(), method, seed, args, Path(work)))
                print(f"  {method} seed {seed}: {runs[-1].makespan_s:.1f} s, {len(runs[-1].reports)} epoch reports",
                      flush=True)
    figures = report(runs, args)
    figures["runs"] = [asdict(r) for r in runs]
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
