"""Early discarding at realistic budgets, replayed from recorded learning curves (issue #25).

    .venv/bin/python -m bench.curve_replay [--table bench/data/alloy_curves.json.gz] [--seeds 20]
        [--budgets 25 50 100] [--slots 2] [--optimizers optuna-tpe random]
        [--methods none asha asha-min3 i-epoch median]

The curves of a few hundred configurations of the demo's alloy search space were recorded once
with the real trainer (``bench/record_curves.py``: every epoch's validation objective and seconds,
each trial's overhead outside its epochs, its best epoch's test predictions). Here the real
optimizers (``hpo.optimizers``) and stoppers (``hpo.stoppers``) search that space again on the
simulator's virtual clock, through the campaign loop the MPI runtime runs
(:class:`scheduler.simulator.search.OptimizerSource`): each suggestion runs as the recorded
configuration nearest to it (categorical values equal, the rest by their range, learning rate on
a log scale), epoch by epoch at its recorded seconds; a stop at a rung lands there, as in the
runtime with ``verdict_wait_s``. Seconds of a search, hours of training each.

A budget is given in full trainings (the median recorded full training's slot-seconds); the
campaign runs ``budget / slots`` seconds of wall time on ``slots`` slots (then nothing new starts;
only trials that ended within it count). Per (optimizer, method), medians over the seeds:

- ``best``: the best validation objective found within the budget;
- ``reach``: the share of the budget after which the method's best first reached method none's
  final best of the same seed (``-`` when it never did): the issue's goal is <= 1/3;
- ``top5`` / ``top5@1/3``: the formation-energy test MAE (eV/atom) of the equal-weight mean of the
  5 best trials that trained their whole budget (stopped ones are no members, as in ``select``),
  at the whole budget and at a third of it;
- trials run and stopped within the budget.

Goal (issue #25): the best discarding method reaches none's best in <= 1/3 of the slot-seconds with
a top-5 ensemble at that third no worse than none's at the whole budget.

``--confirm DATASET --workdir DIR`` checks the replay against real training at one budget (the
first of ``--budgets``, the first optimizer and method): the same search runs as a real campaign
under ``mpiexec -n SLOTS+1`` on the same data and trainer (``max_time_s`` = the budget's wall time;
only trials that ended within it count), and its trials, stops and best objective are placed among
the replayed seeds'.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "bench" / "data" / "alloy_curves.json.gz"
METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "none": ("none", {}),
    "asha": ("asha", {"min_epochs": 1, "reduction_factor": 3}),
    "asha-min3": ("asha", {"min_epochs": 3, "reduction_factor": 3}),  # the demo's
    "asha-min5-rf2": ("asha", {"min_epochs": 5, "reduction_factor": 2}),  # one late rung: the half that goes on
    "i-epoch": ("i-epoch", {"epochs": 1}),
    "i-epoch-5": ("i-epoch", {"epochs": 5}),
    "median": ("median", {"min_epochs": 2, "min_trials": 3}),
}
FULL_STATUSES = ("completed", "timeout")  # trained their whole budget: ensemble members


@dataclass(frozen=True)
class Recorded:
    """One recorded configuration: its curve (inf where not finite), epoch seconds, overhead and
    its best epoch's test predictions."""

    params: dict[str, Any]
    curve: tuple[float, ...]
    epoch_s: tuple[float, ...]
    overhead_s: float
    test_pred: np.ndarray | None

    @property
    def full_s(self) -> float:
        return self.overhead_s + sum(self.epoch_s)


class CurveTable:
    """The recorded configurations and the nearest-configuration lookup of a suggestion."""

    def __init__(self, path: Path) -> None:
        from hpo.space import SearchSpace

        with gzip.open(path, "rt") as fh:
            data = json.load(fh)
        self.space = SearchSpace.from_dict(data["search_space"])
        self.targets = np.asarray(data["test_targets"], dtype=float)
        self.recorded = data["recorded"]
        self.configs = [Recorded(c["params"], tuple(math.inf if v is None else float(v) for v in c["objective"]),
                                 tuple(float(s) for s in c["epoch_s"]), float(c["overhead_s"]),
                                 None if c["test_pred"] is None else np.asarray(c["test_pred"], dtype=float))
                        for c in data["configs"] if c["overhead_s"] is not None and None not in c["epoch_s"]]
        self._coords = np.array([self._coordinates(c.params) for c in self.configs])
        self.full_s = statistics.median(c.full_s for c in self.configs)

    def _coordinates(self, params: dict[str, Any]) -> list[float]:
        """Numeric parameters on [0, 1] (log where the space says so); categoricals as one-hot."""
        from hpo.space import CategoricalParam

        out: list[float] = []
        for key in self.space.keys:
            p, v = self.space[key], params[key]
            if isinstance(p, CategoricalParam):
                out.extend(1.0 if p.index_of(v) == i else 0.0 for i in range(len(p.choices)))
            elif p.log:
                out.append((math.log(v) - math.log(p.low)) / (math.log(p.high) - math.log(p.low)))
            else:
                out.append((v - p.low) / (p.high - p.low))
        return out

    def nearest(self, params: dict[str, Any]) -> Recorded:
        d = ((self._coords - np.asarray(self._coordinates(params))) ** 2).sum(axis=1)
        return self.configs[int(np.argmin(d))]

    def trial(self, trial_id: int, params: dict[str, Any]):
        """The simulator trial a suggestion runs as (one slot, its nearest configuration's truth;
        placement is told the median full training: it knows nothing of the configuration)."""
        from scheduler.simulator import SimTrial

        c = self.nearest(params)
        return SimTrial(trial_id, slots=1, predicted_seconds=self.full_s, true_seconds=c.full_s, curve=c.curve,
                        epochs=len(c.curve), startup_s=c.overhead_s, epoch_s=sum(c.epoch_s) / len(c.epoch_s))


@dataclass
class Run:
    """One replayed search: (end time, objective, status, trial's recorded config) per trial."""

    ended: list[tuple[float, float | None, str, Recorded]]
    horizon_s: float

    def within(self, t: float) -> list[tuple[float, float | None, str, Recorded]]:
        return [r for r in self.ended if r[0] <= t]

    def best(self, t: float) -> float:
        return min((o for _, o, _, _ in self.within(t) if o is not None), default=math.inf)

    def first_reach(self, target: float) -> float | None:
        hits = [e for e, o, _, _ in self.ended if o is not None and o <= target and e <= self.horizon_s]
        return min(hits, default=None)

    def top5_mae(self, t: float, targets: np.ndarray) -> float | None:
        full = sorted(((o, c) for _, o, s, c in self.within(t) if s in FULL_STATUSES and o is not None
                       and c.test_pred is not None), key=lambda x: x[0])[:5]
        if not full:
            return None
        mean = np.mean([c.test_pred for _, c in full], axis=0)
        return float(np.mean(np.abs(mean - targets)))


def replay(table: CurveTable, optimizer: str, method: str, seed: int, budget: float, slots: int) -> Run:
    """One search of ``budget`` full trainings on ``slots`` slots."""
    from hpo.optimizers import make_optimizer
    from scheduler.simulator import SimConfig, simulate
    from scheduler.simulator.search import OptimizerSource

    horizon = budget * table.full_s / slots
    stopper, options = METHODS[method]
    opt = make_optimizer(optimizer, table.space, seed=seed)
    source = OptimizerSource(opt, table.trial, max_trials=100_000)
    result = simulate(source, SimConfig(nodes=1, gpus_per_node=slots, policy="load-aware", node_group_size=1,
                                        early_stopping=stopper, early_stopping_options=options, seed=seed,
                                        prefetch_below_s=0.0, max_time_s=horizon))
    ended = []
    for r in result.records:
        if not r.ok or r.moved:
            continue
        status = "stopped" if r.stopped else ("completed" if r.epochs == source.by_id[r.trial_id].epochs else "timeout")
        ended.append((r.end, r.objective, status, table.nearest(source.params[r.trial_id])))
    return Run(sorted(ended, key=lambda x: x[0]), horizon)


def confirm(table: CurveTable, dataset: Path, workdir: Path, optimizer: str, method: str, budget: float,
            slots: int, seeds: int) -> None:
    """Run the search for real (the recording's campaign with this optimizer, stopper and time) and
    place its outcome among the replayed seeds'."""
    import subprocess

    import yaml

    from bench.record_curves import campaign_file
    from hpo.journal import read_events
    from hpo.state import CampaignState

    horizon = budget * table.full_s / slots
    workdir.mkdir(parents=True, exist_ok=True)
    path = campaign_file(workdir, dataset, trials=10_000, seed=0)
    data = yaml.safe_load(path.read_text())
    stopper, options = METHODS[method]
    data.update(optimizer={"name": optimizer, "options": {}}, early_stopping={"method": stopper, **options},
                max_time_s=horizon)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = workdir / f"confirm_{optimizer}_{method}"
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / "mpiexec"), "-n", str(slots + 1), str(bin_dir / "hydragnn-ensemble"), "hpo",
                    str(path), "-o", str(out), "--no-progress"], check=True)
    state = CampaignState.replay(read_events(out / "journal.jsonl"))
    t0 = min(a.start for r in state.trials.values() for a in r.attempts.values() if a.start is not None)
    ended = [(a.end - t0, a.result) for r in state.trials.values() if (a := r.last_attempt) is not None
             and a.end is not None and a.result is not None and a.end - t0 <= horizon]
    real = {"trials": len(ended), "stopped": sum(str(res.status) == "stopped" for _, res in ended),
            "best": min((res.objective for _, res in ended if res.objective is not None), default=math.inf)}
    runs = [replay(table, optimizer, method, s, budget, slots) for s in range(seeds)]
    replayed = {"trials": [len(r.within(horizon)) for r in runs],
                "stopped": [sum(s == "stopped" for _, _, s, _ in r.within(horizon)) for r in runs],
                "best": [r.best(horizon) for r in runs]}
    print(f"\nconfirmation at {budget:g} full trainings ({horizon:.0f} s on {slots} slots), {optimizer} + {method}: "
          f"real campaign {out}")
    for key, value in real.items():
        xs = sorted(replayed[key])
        below = sum(x < value for x in xs) + 0.5 * sum(x == value for x in xs)
        print(f"  {key:<8} real {value:.4g}   replayed median {statistics.median(xs):.4g} "
              f"(range {xs[0]:.4g}-{xs[-1]:.4g}; real at percentile {100 * below / len(xs):.0f})")


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isinf(v)) else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", type=Path, default=TABLE)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budgets", type=float, nargs="+", default=[25.0, 50.0, 100.0], help="in full trainings")
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--optimizers", nargs="+", default=["optuna-tpe", "random"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--confirm", type=Path, default=None, metavar="DATASET",
                    help="also run the search for real on this alloy.bp (the recording's data)")
    ap.add_argument("--workdir", type=Path, default=Path("bench/out/curve_replay"))
    args = ap.parse_args(argv)
    table = CurveTable(args.table)
    if args.confirm is not None:
        confirm(table, args.confirm, args.workdir, args.optimizers[0], args.methods[0], args.budgets[0], args.slots,
                args.seeds)
        return 0
    print(f"{len(table.configs)} recorded configurations ({table.recorded['machine']}, "
          f"{table.recorded['trials_at_once']} trials at once); median full training {table.full_s:.1f} s; "
          f"{args.slots} slots; medians over {args.seeds} seeds")
    goal_met = False
    for optimizer in args.optimizers:
        for budget in args.budgets:
            print(f"\n{optimizer}, budget {budget:g} full trainings ({budget * table.full_s:.0f} slot-s):")
            print(f"  {'method':<13} {'trials':>6} {'stopped':>7} {'best':>8} {'reach':>6} {'reached':>7} "
                  f"{'top5':>8} {'top5@1/3':>8}")
            runs = {m: [replay(table, optimizer, m, s, budget, args.slots) for s in range(args.seeds)] for m in args.methods}
            base = runs.get("none")
            base_top5 = statistics.median(v for r in base if (v := r.top5_mae(r.horizon_s, table.targets)) is not None) \
                if base else None
            for method, rs in runs.items():
                reach = []
                for i, r in enumerate(rs):
                    if base is None:
                        continue
                    t = r.first_reach(base[i].best(base[i].horizon_s))
                    reach.append(math.inf if t is None else t / r.horizon_s)
                med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
                top5 = med([v for r in rs if (v := r.top5_mae(r.horizon_s, table.targets)) is not None])
                top5_third = med([v for r in rs if (v := r.top5_mae(r.horizon_s / 3, table.targets)) is not None])
                r_med = med(reach)
                print(f"  {method:<13} {med([len(r.within(r.horizon_s)) for r in rs]):>6.0f} "
                      f"{med([sum(s == 'stopped' for _, _, s, _ in r.within(r.horizon_s)) for r in rs]):>7.0f} "
                      f"{med([r.best(r.horizon_s) for r in rs]):>8.4f} {_fmt(r_med, '.2f'):>6} "
                      f"{sum(x <= 1.0 for x in reach):>4}/{len(reach):<2} {_fmt(top5, '.4f'):>8} {_fmt(top5_third, '.4f'):>8}")
                if method != "none" and r_med is not None and r_med <= 1 / 3 and base_top5 is not None \
                        and top5_third is not None and top5_third <= base_top5:
                    goal_met = True
    print(f"\ngoal (a discarding method reaches none's best in <= 1/3 of the budget, top-5 at that third no "
          f"worse than none's at the whole budget): {'met' if goal_met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
