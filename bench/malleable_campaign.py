"""Malleable trials in a real campaign (#46): does growing running trials onto idle slots end the
campaign sooner, and what does a move cost?

The same campaign runs with ``malleable: false`` and ``malleable: true``, alternating, ``--repeats``
times each: the built-in trainer (fork server) on the demo's alloy data under ``mpiexec -n
--ranks``, ``--trials`` trials of the demo's search space drawn by the random optimizer with one
seed (the same configurations in every run), ``--epochs`` epochs each, no early stopping and no
early discarding (so every run trains the same epochs of the same trials), ``slots_per_trial: [1,
2]``. Per setting, medians over the repeats of:

* the makespan (the journal's ``campaign_started`` to ``campaign_finished``) and its ratio;
* the first attempts' start-up (start to first epoch report, less that epoch);
* moves, and per move: the epochs done before it, the seconds per epoch on 1 slot (the moved
  attempt's last three) and on 2 (the continuation's first three), and the move's cost: from the
  moved attempt's last epoch report to the continuation's first, less one epoch on 2 slots (stop,
  exit, restart, reading the state; what placement charges as the trial's start-up paid again),
  and what it adds to the first start-up (the simulator's ``restart_extra_s``).

Run from the repository root (the campaign's processes import this checkout)::

    hydragnn-ensemble demo-data alloy --components 2-3 --num 800 --fractions 0.7,0.1,0.1,0.1 -o demo_out/alloy.bp
    .venv/bin/python -m bench.malleable_campaign --data demo_out/alloy.bp [--ranks 3] [--trials 5]
        [--epochs 30] [--repeats 2] [--seed 0] [--json out.json]

A move pays only where the slots it takes would idle and the trial's processes get cores of their
own: on a 2-core machine, ``--ranks 3`` (two agents) is the shape where they do.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bench.checkpoint_resume import child_env, demo_space, hpo_argv


@dataclass
class Move:
    """One move of a trial, read from the journal."""

    trial_id: int
    epochs_done: int
    epoch_s_before: float
    epoch_s_after: float
    cost_s: float


@dataclass
class Run:
    """One campaign run."""

    malleable: bool
    makespan_s: float
    moves: list[Move] = field(default_factory=list)
    startups_s: list[float] = field(default_factory=list)  # first attempts: start to first report, less that epoch


def write_campaign(tmp: Path, data: Path, trials: int, epochs: int, seed: int, malleable: bool) -> Path:
    spec, base = demo_space()
    training = base["NeuralNetwork"]["Training"]
    training["num_epoch"], training["EarlyStopping"] = epochs, False
    (tmp / "base.json").write_text(json.dumps(base))
    campaign = {
        "dataset": str(data), "base_config": "base.json", "objective": "objective", "search_space": spec,
        "optimizer": {"name": "random"}, "max_trials": trials, "trial_time_limit_s": 600, "seed": seed,
        "resources": {"slots_per_node": 1, "device": "cpu", "slots_per_trial": [1, 2]},
        "trial_program": "hydragnn_ensemble", "trial_launcher": "fork-server", "retries": 0,
        "malleable": malleable,
    }
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    return path


def read_run(out: Path, malleable: bool) -> Run:
    """Makespan and moves of a finished campaign directory."""
    events = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    start = next(e["time"] for e in events if e["event"] == "campaign_started")
    end = next(e["time"] for e in events if e["event"] == "campaign_finished")
    run = Run(malleable, end - start)
    curves: dict[tuple[int, int], list[dict]] = {}
    for e in events:
        if e["event"] == "trial_progress":
            curves.setdefault((e["trial_id"], e["attempt"]), []).append(e)
    starts = {(e["trial_id"], e["attempt"]): e["time"] for e in events if e["event"] == "trial_started"}
    for (trial_id, attempt), curve in curves.items():
        if attempt == 0 and (trial_id, 0) in starts:
            run.startups_s.append(curve[0]["time"] - starts[(trial_id, 0)] - curve[0]["epoch_s"])
    for e in events:
        if e["event"] != "trial_moved":
            continue
        before = curves.get((e["trial_id"], e["attempt"]), [])
        after = curves.get((e["trial_id"], e["attempt"] + 1), [])
        if not before or not after:
            continue
        slow = statistics.median(r["epoch_s"] for r in before[-3:])
        fast = statistics.median(r["epoch_s"] for r in after[:3])
        run.moves.append(Move(e["trial_id"], e["epochs_done"], slow, fast,
                              after[0]["time"] - before[-1]["time"] - after[0]["epoch_s"]))
    return run


def run_once(data: Path, args, malleable: bool, work: Path, k: int) -> Run:
    tmp = work / f"{'on' if malleable else 'off'}{k}"
    tmp.mkdir()
    campaign = write_campaign(tmp, data, args.trials, args.epochs, args.seed, malleable)
    out = tmp / "out"
    proc = subprocess.run(hpo_argv(campaign, out, args.ranks, resume=False), env=child_env(),
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"campaign failed ({tmp}):\n{proc.stderr[-3000:]}")
    return read_run(out, malleable)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(runs: list[Run], args) -> dict:
    off = [r for r in runs if not r.malleable]
    on = [r for r in runs if r.malleable]
    moves = [m for r in on for m in r.moves]
    summary = {
        "makespan_off_s": median([r.makespan_s for r in off]), "makespan_on_s": median([r.makespan_s for r in on]),
        "makespans_off_s": [round(r.makespan_s, 2) for r in off], "makespans_on_s": [round(r.makespan_s, 2) for r in on],
        "moves_per_run": median([len(r.moves) for r in on]),
        "move_cost_s": median([m.cost_s for m in moves]),
        "epoch_s_before": median([m.epoch_s_before for m in moves]),
        "epoch_s_after": median([m.epoch_s_after for m in moves]),
        "epochs_done_at_move": [m.epochs_done for m in moves],
        "first_startup_s": median([x for r in runs for x in r.startups_s]),
    }
    # what a continuation adds to a trial's start-up (scheduler.simulator.trial_state's restart_extra_s)
    summary["restart_extra_s"] = summary["move_cost_s"] - summary["first_startup_s"]
    print(f"malleable campaign: mpiexec -n {args.ranks}, {args.trials} trials x {args.epochs} epochs, "
          f"slots_per_trial [1, 2], {args.repeats} run(s) per setting, medians")
    print(f"  makespan  malleable off {summary['makespan_off_s']:.1f} s {summary['makespans_off_s']}  "
          f"on {summary['makespan_on_s']:.1f} s {summary['makespans_on_s']}  "
          f"ratio on/off {summary['makespan_on_s'] / summary['makespan_off_s']:.3f}")
    print(f"  moves per run {summary['moves_per_run']:g}; per move: epoch {summary['epoch_s_before']:.3f} s on 1 slot -> "
          f"{summary['epoch_s_after']:.3f} s on 2 (speed-up {summary['epoch_s_before'] / summary['epoch_s_after']:.2f}x), "
          f"cost {summary['move_cost_s']:.2f} s (stop, exit, restart, state read); epochs done at the moves "
          f"{summary['epochs_done_at_move']}")
    print(f"  first attempts' start-up {summary['first_startup_s']:.2f} s: a move adds "
          f"{summary['restart_extra_s']:.2f} s to a trial's start-up (restart_extra_s)")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the demo's alloy.bp")
    ap.add_argument("--ranks", type=int, default=3, help="mpiexec -n (1 scheduler + agents)")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2, help="runs per setting, alternating")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args(argv)
    data = args.data.resolve()
    runs = []
    with tempfile.TemporaryDirectory(prefix="malleable-") as work:
        for k in range(args.repeats):
            for malleable in (False, True):
                runs.append(run_once(data, args, malleable, Path(work), k))
                print(f"  run {k} malleable {malleable}: {runs[-1].makespan_s:.1f} s, {len(runs[-1].moves)} move(s)",
                      file=sys.stderr)
    summary = report(runs, args)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
