"""Early discarding on the alloy data: no discarding, ASHA, i-epoch, and Optuna TPE + Hyperband.

    .venv/bin/python -m bench.early_stopping [--budget 300] [--seeds 3] [--structures 600]
                                             [--workers 2] [--workdir DIR]

Each (method, seed) is one search over the demo campaign's space (``examples/alloy/campaign.yaml``)
with the demo's trainer config (``formation_energy.json``, 10 epochs), given the same budget of
slot-seconds (one process, trials back to back, a trial that would end past the budget does not
count). Methods:

- ``none``: our TPE (``optuna-tpe`` backend), every trial to its budget (a);
- ``asha``: the same with :class:`hpo.stoppers.AshaStopper` (min 1 epoch, reduction factor 3) (b);
- ``asha-min2-rf2``: ASHA with min 2 epochs, reduction factor 2 (promotes more trials to the end);
- ``i-epoch``: the same with :class:`hpo.stoppers.IEpochStopper` (1 epoch, best third goes on) (c);
- ``optuna-hyperband``, the anchor: Optuna's TPESampler with its ``HyperbandPruner`` (min resource
  1, max resource 10, reduction factor 3) driving the same trainer in its own loop (d).

The trainer reports each epoch to the method through its epoch channel
(:class:`hydragnn_ensemble.train.progress.EpochChannel`) and stops when asked, in-process: the
campaign runtime's file-and-message path (tested in tests/campaign) adds about one epoch of delay
to each stop, which this bench leaves out for every method alike.

Printed per method (median over seeds): trials run, stopped; best validation objective; the
formation-energy test MAE of the best trial and of the top-5 ensemble (equal weights, trials that
ran to their budget; stopped ones only if fewer than 5 did); the slot-seconds to reach (a)'s final
best validation objective within 2% (its own seed). Goals: (b) reaches (a)'s best in <= 1/3 of
the slot-seconds; (b)'s top-5 test MAE <= (a)'s; (b) at least as good as (d).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("none", "asha", "asha-min2-rf2", "i-epoch", "optuna-hyperband")
HEAD = "formation_energy"
REACH = 1.02  # within 2% of (a)'s best


@dataclass
class TrialRun:
    trial: int
    status: str
    objective: float | None
    test_mae: float | None
    epochs: int
    seconds: float
    end_s: float  # slot-seconds spent when it ended
    checkpoint: str | None


@dataclass
class MethodRun:
    method: str
    seed: int
    trials: list[TrialRun] = field(default_factory=list)


def _channel_for(method: str, run_dir: Path, trial_id: int, stopper, optuna_trial):
    """The epoch channel a method's trainer reports to: our stopper, Optuna's pruner, or none."""
    from hydragnn_ensemble.train.progress import EpochChannel

    class StopperChannel(EpochChannel):
        def __init__(self) -> None:
            super().__init__(run_dir, enabled=True)
            self.stop = False

        def report(self, epoch, objective, heads, elapsed_s) -> None:
            super().report(epoch, objective, heads, elapsed_s)
            if stopper is not None:
                self.stop = self.stop or stopper.report(trial_id, epoch, objective)
            elif optuna_trial is not None:
                optuna_trial.report(objective, epoch)
                self.stop = optuna_trial.should_prune()

        def stop_reason(self) -> str | None:
            return f"{method} after this epoch" if self.stop else None

    return StopperChannel()


def run_method(method: str, seed: int, dataset: str, budget_s: float, workdir: str) -> MethodRun:
    """One search of ``budget_s`` slot-seconds (see the module docstring)."""
    import optuna
    import torch
    import yaml

    from hpo.optimizers.optuna_tpe import OptunaTPE, optuna_distributions
    from hpo.space import SearchSpace, apply_params
    from hpo.stoppers import AshaStopper, IEpochStopper
    from hydragnn_ensemble.config import config_from_dict
    from hydragnn_ensemble.train import train_trial

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    campaign = yaml.safe_load((ROOT / "examples" / "alloy" / "campaign.yaml").read_text())
    space = SearchSpace.from_dict(campaign["search_space"])
    base = json.loads((ROOT / "examples" / "alloy" / "formation_energy.json").read_text())
    epochs = int(base["NeuralNetwork"]["Training"]["num_epoch"])
    stopper = {"asha": lambda: AshaStopper(1, 3), "asha-min2-rf2": lambda: AshaStopper(2, 2),
               "i-epoch": lambda: IEpochStopper(1, 1 / 3)}.get(method, lambda: None)()
    if method == "optuna-hyperband":
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed),
                                    pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=epochs,
                                                                          reduction_factor=3))
        distributions = optuna_distributions(space)
    else:
        optimizer = OptunaTPE(space, seed=seed)
    out = MethodRun(method, seed)
    spent = 0.0
    for trial_id in range(10_000):
        optuna_trial = suggestion = None
        if method == "optuna-hyperband":
            optuna_trial = study.ask(distributions)
            params = optuna_trial.params
        else:
            suggestion = optimizer.ask(1)[0]
            params = suggestion.params
        run_dir = Path(workdir) / f"{method}-{seed}" / str(trial_id)
        config = config_from_dict(apply_params(base, params))
        channel = _channel_for(method, run_dir, trial_id, stopper, optuna_trial)
        t0 = time.perf_counter()
        result = train_trial(config, dataset, run_dir, device="cpu", progress=False, channel=channel)
        seconds = time.perf_counter() - t0
        if spent + seconds > budget_s:
            break
        spent += seconds
        mae = result.heads[HEAD].test_mae if HEAD in result.heads else None
        out.trials.append(TrialRun(trial_id, result.status, result.objective, mae, result.epochs, seconds, spent,
                                   str(run_dir / result.checkpoint) if result.checkpoint else None))
        if method == "optuna-hyperband":
            if result.status == "stopped":
                study.tell(optuna_trial, state=optuna.trial.TrialState.PRUNED)
            elif result.objective is None:
                study.tell(optuna_trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(optuna_trial, result.objective)
        else:
            optimizer.tell(suggestion.suggestion_id, result.objective)
    return out


def ensemble_test_mae(run: MethodRun, dataset: str, k: int = 5) -> float | None:
    """Formation-energy test MAE of the equal-weight mean of the ``k`` best trials that ran to their
    budget (stopped ones fill up when fewer than ``k`` did)."""
    import numpy as np

    from ensemble.members import MemberModel, read_split, run_members, split_targets
    from hydragnn_ensemble.inference import load_checkpoint

    scored = [t for t in run.trials if t.objective is not None and t.checkpoint]
    full = sorted((t for t in scored if t.status != "stopped"), key=lambda t: t.objective)
    stopped = sorted((t for t in scored if t.status == "stopped"), key=lambda t: t.objective)
    chosen = (full + stopped)[:k]
    if not chosen:
        return None
    members = []
    for t in chosen:
        loaded = load_checkpoint(t.checkpoint)
        members.append(MemberModel(t.trial, 1.0, loaded, float(loaded.spec.radius)))
    graphs = read_split(dataset, "testset")
    preds = run_members(members, graphs, cutoff=max(m.radius for m in members))
    mean = np.mean([p.preds[HEAD] for p in preds], axis=0)
    target = split_targets(graphs, members[0].loaded.heads)[HEAD]
    return float(np.mean(np.abs(mean.reshape(target.shape) - target)))


def _summary(run: MethodRun, target: float | None, dataset: str) -> dict:
    scored = [t for t in run.trials if t.objective is not None]
    best = min(scored, key=lambda t: t.objective, default=None)
    reach = next((t.end_s for t in sorted(run.trials, key=lambda t: t.end_s)
                  if target is not None and t.objective is not None and t.objective <= target * REACH), None)
    return {"trials": len(run.trials), "stopped": sum(t.status == "stopped" for t in run.trials),
            "best_objective": None if best is None else best.objective,
            "best_test_mae": None if best is None else best.test_mae,
            "ensemble_test_mae": ensemble_test_mae(run, dataset),
            "reach_s": reach, "spent_s": max((t.end_s for t in run.trials), default=0.0)}


def _earlier_runs(path: Path, jobs: list[tuple[str, int]]) -> dict[tuple[str, int], MethodRun]:
    """The runs of ``jobs`` an earlier invocation left in ``path`` (runs.json)."""
    if not path.exists():
        return {}
    saved = json.loads(path.read_text())
    out = {}
    for method, seed in jobs:
        entry = saved.get(f"{method}-{seed}")
        if entry is not None:
            out[(method, seed)] = MethodRun(method, seed, [TrialRun(**t) for t in entry["trials"]])
    return out


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=300.0, help="slot-seconds per (method, seed)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--structures", type=int, default=600)
    ap.add_argument("--workers", type=int, default=2, help="searches run side by side (one core each)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--methods", nargs="+", default=["none", "asha", "i-epoch", "optuna-hyperband"], choices=METHODS)
    ap.add_argument("--reuse", action="store_true",
                    help="take (method, seed) runs already in WORKDIR/runs.json instead of running them again")
    args = ap.parse_args(argv)

    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.store import write_dataset

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="early_stopping_"))
    workdir.mkdir(parents=True, exist_ok=True)
    dataset = workdir / "alloy.bp"
    if not dataset.exists():
        data = make_alloy_dataset(num_structures=args.structures, seed=0, progress=False, components=(2, 3))
        write_dataset(dataset, data.graphs, data.heads, splits=data.splits, metadata=data.metadata)
    t_start = time.perf_counter()
    jobs = [(m, s) for s in range(args.seeds) for m in args.methods]
    runs = _earlier_runs(workdir / "runs.json", jobs) if args.reuse else {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {job: pool.submit(run_method, job[0], job[1], str(dataset), args.budget, str(workdir))
                   for job in jobs if job not in runs}
        runs.update({job: f.result() for job, f in futures.items()})
    (workdir / "runs.json").write_text(json.dumps({f"{m}-{s}": asdict(r) for (m, s), r in runs.items()}, indent=1))

    rows: dict[str, list[dict]] = {m: [] for m in args.methods}
    for seed in range(args.seeds):
        plain = runs.get(("none", seed))
        target = min((t.objective for t in plain.trials if t.objective is not None), default=None) if plain else None
        for m in args.methods:
            rows[m].append(_summary(runs[(m, seed)], target, str(dataset)))
    print(f"\n{args.seeds} seeds x {args.budget:g} slot-seconds, {args.structures} alloys, medians "
          f"(reach: slot-seconds to (a)'s best validation objective within 2%, its seed)")
    print(f"{'method':<18} {'trials':>6} {'stopped':>7} {'best val':>9} {'best test MAE':>13} "
          f"{'top-5 test MAE':>14} {'reach s':>8}  (MAE in eV/atom)")
    med = {m: {k: _median([r[k] for r in rows[m]]) for k in rows[m][0]} for m in args.methods}
    for m in args.methods:
        r = med[m]
        print(f"{m:<18} {_fmt(r['trials'], '.0f'):>6} {_fmt(r['stopped'], '.0f'):>7} {_fmt(r['best_objective'], '.4f'):>9} "
              f"{_fmt(r['best_test_mae'], '.4f'):>13} {_fmt(r['ensemble_test_mae'], '.4f'):>14} {_fmt(r['reach_s'], '.0f'):>8}")
        print(f"{'':<18} per seed reach s: {[_fmt(x['reach_s'], '.0f') for x in rows[m]]}")
    for variant in ("asha", "asha-min2-rf2"):
        if "none" not in med or variant not in med:
            continue
        a, b = med["none"], med[variant]
        ratio = None if a["reach_s"] is None or b["reach_s"] is None else b["reach_s"] / a["reach_s"]
        print(f"\n{variant} reaches (a)'s best in {_fmt(ratio, '.2f')} x its slot-seconds (goal <= 0.33); "
              f"top-5 test MAE {_fmt(b['ensemble_test_mae'], '.4f')} vs {_fmt(a['ensemble_test_mae'], '.4f')} (goal <=)")
        if "optuna-hyperband" in med:
            d = med["optuna-hyperband"]
            print(f"{variant} vs Optuna TPE + Hyperband at equal budget: best val {_fmt(b['best_objective'], '.4f')} vs "
                  f"{_fmt(d['best_objective'], '.4f')}, top-5 test MAE {_fmt(b['ensemble_test_mae'], '.4f')} vs "
                  f"{_fmt(d['ensemble_test_mae'], '.4f')}")
    print(f"bench wall time {time.perf_counter() - t_start:.0f} s; runs in {workdir / 'runs.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
