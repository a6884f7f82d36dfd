"""Scheduling and bookkeeping overhead of the campaign runtime vs. processes sharing an Optuna journal.

    .venv/bin/python -m bench.campaign_overhead [--trials 1000] [--ranks 16] [--sleep 0.05] [--repeats 3]
                                               [--launcher fork-server|exec] [--placement P]
                                               [--prefetch-below S]

Ours: ``mpiexec -n RANKS`` (rank 0 schedules, RANKS-1 agents = slots), ``--trials`` trials of a
trivial trial program (bench/sleep_trainer.py: one process per trial, forked by the agent's fork
server (``--launcher exec``: a new interpreter per trial), sleeps, writes result.json), random
search, journal with fsync; short trials are sent ahead to their slot (``prefetch_below_s`` 2, the
default; ``--prefetch-below 0`` turns it off). Figures per trial:

- total overhead = (slots x campaign wall - sum of time spent inside the trial module) / trials
  = start-up/teardown of the trial process + our scheduling gap;
- runtime overhead = (slots x wall - sum of trial *process* wall times) / trials: the slot time
  during which no trial process existed (messages, journal, placement, Popen);
- rank-0 time = rank 0's busy time (deciding, journaling, messaging) / trials (the fsyncs run in
  the journal writer thread; their number per trial is printed too);
- idle slot time = 1 - sum of trial process wall / (slots x wall);
- the campaign wall runs from the moment every agent can start a trial (its fork server has
  imported) to the last report; the start-up before it (mpiexec, imports, fork servers, rank 0's
  set-up) is printed separately, as "start-up";
- CPU per trial: user+system time of all ranks and trial processes (start-up of the ranks included),
  and of rank 0, the agents and the trial processes (with their fork servers) inside the campaign.
  On 2 cores, 15 slots of 50 ms trials need 300 trials/s; at ~9 ms of CPU per trial that is more
  than the machine has, so idle slot time under ``-n 16`` measures CPU starvation as much as the
  runtime; ``--ranks 4`` shows the runtime where the CPU is not exhausted.

Anchor: the same number of trials through RANKS-1 processes sharing one Optuna journal file
(``JournalStorage(JournalFileBackend)``), each running ``study.optimize`` of the same sleep
objective in-process (no process start per trial), RandomSampler (the same search as ours; pass
``--anchor-sampler tpe`` for Optuna's default TPE). Overhead = (procs x wall - sum of objective
time) / trials.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
MPIEXEC = str(Path(PY).parent / "mpiexec")


# -- children ---------------------------------------------------------------------------------------
def _child_campaign(campaign: str, out: str, summary_path: str) -> None:
    """Runs on every rank under mpiexec."""
    from dataclasses import asdict

    from mpi4py import MPI

    from scheduler.runtime import run_campaign

    own0, kids0 = _cpu_s(resource.RUSAGE_SELF), _cpu_s(resource.RUSAGE_CHILDREN)
    summary = run_campaign(campaign, out, progress=False)
    cpu = {"own": _cpu_s(resource.RUSAGE_SELF) - own0, "children": _cpu_s(resource.RUSAGE_CHILDREN) - kids0}
    Path(f"{summary_path}.cpu{MPI.COMM_WORLD.Get_rank()}").write_text(json.dumps(cpu))
    if summary is not None:
        Path(summary_path).write_text(json.dumps(asdict(summary)))


def _child_optuna(storage_path: str, n_total: int, sleep_s: float, go: float, sampler: str,
                  seed: int, out: str) -> None:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from optuna.study import MaxTrialsCallback

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(storage_path))
    samp = optuna.samplers.RandomSampler(seed=seed) if sampler == "random" else optuna.samplers.TPESampler(seed=seed)
    study = optuna.load_study(study_name="bench", storage=storage, sampler=samp)
    inside = [0.0]

    def objective(trial: optuna.Trial) -> float:
        t = time.perf_counter()
        x = trial.suggest_float("x", 0.0, 1.0)
        time.sleep(sleep_s)
        inside[0] += time.perf_counter() - t
        return (x - 0.3) ** 2

    while time.time() < go:
        time.sleep(0.001)
    t0 = time.time()
    study.optimize(objective, callbacks=[MaxTrialsCallback(n_total, states=None)])
    t1 = time.time()
    Path(out).write_text(json.dumps({"t0": t0, "t1": t1, "inside": inside[0]}))


def _cpu_s(who: int) -> float:
    """User+system CPU seconds of this process (RUSAGE_SELF) or of its waited-for descendants."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _children_cpu_s() -> float:
    """CPU seconds of every waited-for descendant so far (mpiexec, ranks, trials)."""
    return _cpu_s(resource.RUSAGE_CHILDREN)


# -- drivers ----------------------------------------------------------------------------------------
def run_ours(tmp: Path, trials: int, ranks: int, sleep_s: float, placement: str = "load-aware",
             launcher: str = "fork-server", prefetch_below_s: float = 2.0) -> dict:
    import yaml

    tmp.mkdir(parents=True)
    (tmp / "base.json").write_text(json.dumps({"Sleep": {"seconds": sleep_s, "x": 0.5}}))
    (tmp / "data.bp").write_text("unused")
    campaign = {
        "dataset": "data.bp", "base_config": "base.json",
        "search_space": {"Sleep.x": {"type": "float", "low": 0.0, "high": 1.0}},
        "optimizer": {"name": "random"}, "max_trials": trials, "trial_time_limit_s": 60,
        "failure_threshold": 1.0, "trial_program": "bench.sleep_trainer", "seed": 0,
        "placement": placement, "trial_launcher": launcher, "prefetch_below_s": prefetch_below_s,
    }
    (tmp / "campaign.yaml").write_text(yaml.safe_dump(campaign))
    summary_path = tmp / "summary.json"
    cpu_before = _children_cpu_s()
    t_launch = time.perf_counter()
    subprocess.run([MPIEXEC, "-n", str(ranks), PY, __file__, "_campaign", str(tmp / "campaign.yaml"),
                    str(tmp / "out"), str(summary_path)], cwd=REPO, check=True)
    cpu_s = _children_cpu_s() - cpu_before
    mpiexec_s = time.perf_counter() - t_launch
    s = json.loads(summary_path.read_text())
    per_rank = [json.loads(Path(f"{summary_path}.cpu{r}").read_text()) for r in range(ranks)]
    from hpo.journal import read_journal
    from hpo.state import CampaignState

    state = CampaignState.replay(read_journal(tmp / "out" / "journal.jsonl").events)
    assert state.num_completed == trials, f"{state.num_completed} of {trials} trials completed"
    inside = sum(r.result.wall_time_s for r in state.finished)
    slots = ranks - 1
    slot_s = s["slot_seconds"]
    return {
        "wall_s": s["elapsed_s"],
        "startup_s": mpiexec_s - s["elapsed_s"],
        "total_overhead_ms": 1e3 * (slot_s - inside) / trials,
        "runtime_overhead_ms": 1e3 * (slot_s - s["trial_process_s"]) / trials,
        "startup_ms": 1e3 * (s["trial_process_s"] - inside) / trials,
        "rank0_ms": 1e3 * s["rank0_busy_s"] / trials,
        "fsyncs_per_trial": s["journal_fsyncs"] / trials,
        "idle_fraction": 1.0 - s["trial_process_s"] / slot_s,
        "useful_fraction": trials * sleep_s / slot_s,
        "slots": slots,
        "cpu_ms_per_trial": 1e3 * cpu_s / trials,
        "cpu_rank0_ms": 1e3 * per_rank[0]["own"] / trials,
        "cpu_agents_ms": 1e3 * sum(r["own"] for r in per_rank[1:]) / trials,
        "cpu_trials_ms": 1e3 * sum(r["children"] for r in per_rank[1:]) / trials,
        "cpu_load": cpu_s / mpiexec_s,
    }


def run_anchor(tmp: Path, trials: int, procs: int, sleep_s: float, sampler: str) -> dict:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    tmp.mkdir(parents=True)
    path = str(tmp / "optuna_journal.log")
    storage = JournalStorage(JournalFileBackend(path))
    optuna.create_study(study_name="bench", storage=storage, direction="minimize")
    go = time.time() + 8.0 + 0.5 * procs  # every worker has imported optuna and loaded the study
    outs = [tmp / f"w{i}.json" for i in range(procs)]
    workers = [subprocess.Popen([PY, __file__, "_optuna", path, str(trials), str(sleep_s), repr(go),
                                 sampler, str(i), str(outs[i])], cwd=REPO) for i in range(procs)]
    for w in workers:
        if w.wait() != 0:
            raise RuntimeError("an optuna worker failed")
    rec = [json.loads(o.read_text()) for o in outs]
    if min(r["t0"] for r in rec) - go > 1.0:
        print("warning: optuna workers started late (machine busy)", file=sys.stderr)
    study = optuna.load_study(study_name="bench", storage=JournalStorage(JournalFileBackend(path)))
    done = sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    wall = max(r["t1"] for r in rec) - min(r["t0"] for r in rec)
    inside = sum(r["inside"] for r in rec)
    return {
        "wall_s": wall, "trials": done,
        "total_overhead_ms": 1e3 * (wall * procs - inside) / done,
        "idle_fraction": 1.0 - inside / (wall * procs),
        "useful_fraction": done * sleep_s / (wall * procs),
    }


def interpreter_startup_ms(n: int = 10) -> float:
    """Median wall time of one sleep_trainer process with sleep 0, run alone (no campaign)."""
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "config.json"
        cfg.write_text(json.dumps({"Sleep": {"seconds": 0.0, "x": 0.5}}))
        times = []
        for _ in range(n):
            t = time.perf_counter()
            subprocess.run([PY, "-m", "bench.sleep_trainer", "train", str(cfg), "--data", "x", "-o", d],
                           cwd=REPO, check=True)
            times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_campaign":
        sys.path.insert(0, str(REPO))
        _child_campaign(*sys.argv[2:5])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_optuna":
        a = sys.argv[2:]
        _child_optuna(a[0], int(a[1]), float(a[2]), float(a[3]), a[4], int(a[5]), a[6])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--sleep", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--anchor-sampler", choices=("random", "tpe"), default="random")
    ap.add_argument("--placement", default="load-aware", help="placement policy of our campaign")
    ap.add_argument("--launcher", choices=("fork-server", "exec"), default="fork-server",
                    help="how agents start trial processes")
    ap.add_argument("--prefetch-below", type=float, default=2.0, metavar="S",
                    help="the campaign's prefetch_below_s (0: no trial is sent ahead to its slot)")
    args = ap.parse_args()
    procs = args.ranks - 1
    ours, anchor = [], []
    with tempfile.TemporaryDirectory(prefix="campaign_overhead_") as d:
        for rep in range(args.repeats):
            ours.append(run_ours(Path(d) / f"ours{rep}", args.trials, args.ranks, args.sleep, args.placement,
                                 args.launcher, args.prefetch_below))
            anchor.append(run_anchor(Path(d) / f"anchor{rep}", args.trials, procs, args.sleep, args.anchor_sampler))
            print(f"repeat {rep}: ours {json.dumps({k: round(v, 4) for k, v in ours[-1].items()})}")
            print(f"repeat {rep}: anchor {json.dumps({k: round(v, 4) for k, v in anchor[-1].items()})}")
    startup = interpreter_startup_ms()

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    print(f"\n{args.trials} trials of {1e3 * args.sleep:g} ms, {procs} slots/processes, "
          f"median of {args.repeats} repeats (machine: {os.cpu_count()} cores)")
    print(f"ours   (mpiexec -n {args.ranks}, one process per trial, {args.launcher} launcher, "
          f"prefetch_below_s {args.prefetch_below:g}):")
    print(f"  campaign wall {med(ours, 'wall_s'):.2f} s (start-up and shut-down before and after it: "
          f"{med(ours, 'startup_s'):.2f} s); total overhead {med(ours, 'total_overhead_ms'):.1f} ms/trial"
          f" = trial process start-up/teardown {med(ours, 'startup_ms'):.1f} ms"
          f" + runtime gap {med(ours, 'runtime_overhead_ms'):.1f} ms")
    print(f"  rank-0 decision+journal+messages {med(ours, 'rank0_ms'):.2f} ms/trial "
          f"(journal: {med(ours, 'fsyncs_per_trial'):.2f} fsyncs/trial in the writer thread); idle slot time "
          f"{100 * med(ours, 'idle_fraction'):.1f}%; slot time in the sleep itself {100 * med(ours, 'useful_fraction'):.1f}%")
    print(f"  CPU per trial: {med(ours, 'cpu_ms_per_trial'):.1f} ms in all (start-up of the ranks included) ="
          f" rank 0 {med(ours, 'cpu_rank0_ms'):.1f} + agents {med(ours, 'cpu_agents_ms'):.1f}"
          f" + trial processes (and fork servers) {med(ours, 'cpu_trials_ms'):.1f} + rest; mean busy cores "
          f"{med(ours, 'cpu_load'):.2f} of {os.cpu_count()} over the whole mpiexec")
    print(f"  (one sleep_trainer process alone, sleep 0: {startup:.1f} ms)")
    print(f"anchor ({procs} processes, one Optuna JournalFileBackend, {args.anchor_sampler} sampler, in-process objective):")
    print(f"  wall {med(anchor, 'wall_s'):.2f} s; overhead {med(anchor, 'total_overhead_ms'):.1f} ms/trial; "
          f"idle {100 * med(anchor, 'idle_fraction'):.1f}%; slot time in the sleep {100 * med(anchor, 'useful_fraction'):.1f}%")
    print(f"ratio anchor/ours, total overhead per trial: "
          f"{med(anchor, 'total_overhead_ms') / med(ours, 'total_overhead_ms'):.2f}x; "
          f"anchor overhead / our runtime gap: {med(anchor, 'total_overhead_ms') / med(ours, 'runtime_overhead_ms'):.2f}x; "
          f"campaign wall anchor/ours: {med(anchor, 'wall_s') / med(ours, 'wall_s'):.2f}x")


if __name__ == "__main__":
    main()
