"""A full training checkpoint every epoch (#46): what writing it costs, and what it saves when a
campaign is killed.

(a) **Write cost.** Configurations of the demo's search space (``examples/alloy/campaign.yaml``:
    for each mpnn_type its smallest model at the largest batch, whose epochs are the shortest, and
    its largest, whose state is the biggest; plus ``--configs`` drawn at random) train ``--epochs``
    epochs on the demo's alloy data in this process, one thread, as a trial process does. Per epoch:
    the seconds spent writing checkpoints (the training state, and the best checkpoint when the
    epoch improved; train.log's ``checkpoint_time``) as a share of the epoch's seconds, median and
    max over every epoch (goal: <= 5%), and the bytes a trial keeps on disk while it runs (training
    state + best checkpoint) and once it ended (the best checkpoint). Anchor: the best checkpoint
    alone, all a trial wrote before.
(b) **kill -9, then --resume.** A campaign of the built-in trainer (``trial_program:
    hydragnn_ensemble``, fork server) on the same data under ``mpiexec -n --ranks``, ``--trials``
    trials of the demo's space (its mpnn_type limited to ``--campaign-types``, by default GIN, the
    fastest, so that a few kills fit in minutes), ``--campaign-epochs`` epochs each, no early
    discarding, is killed
    (kill -9 of the whole job) ``--kills`` times at random moments (a uniform delay of up to
    ``--kill-window`` s after its first epoch report), each time resumed with ``--resume``, and at
    last resumed to its end. Per cut trial: the epochs it had finished that its re-run trained again
    (goal <= 1 on average and at most), and the share of the epoch in progress that was lost;
    trials lost or duplicated in the journal (goal 0); results.csv exact (one row per trial with its
    result.json's status and objective, its attempts as journaled); and each cut trial's final
    objective and weights against the same configuration trained uncut in this process (on one CPU
    thread they are bit-identical).

Run from the repository root (the campaign's processes import this checkout: PYTHONPATH is set to
it for them)::

    hydragnn-ensemble demo-data alloy --components 2-3 --num 800 --fractions 0.7,0.1,0.1,0.1 -o demo_out/alloy.bp
    .venv/bin/python -m bench.checkpoint_resume --data demo_out/alloy.bp [--configs 4] [--epochs 4]
        [--trials 4] [--campaign-epochs 10] [--campaign-types GIN] [--kills 5] [--kill-window 6]
        [--ranks 3] [--seed 0]

(the data as ``examples/demo.sh`` makes it, which ``make demo`` runs; making it takes minutes). The
default run takes about 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DEMO = REPO / "examples" / "alloy"
EPOCH_LINE = re.compile(r" epoch (\d+) .* epoch_time ([\d.]+)s checkpoint_time ([\d.]+)s \(state ([\d.]+)s\)")
RESUMED_LINE = re.compile(r"resumed from training_state\.pt after (\d+) epoch")


def child_env() -> dict[str, str]:
    """The environment of the campaign's processes: this checkout first on the import path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def demo_space() -> tuple[dict, dict]:
    """The demo campaign's search space (as written) and its base config."""
    campaign = yaml.safe_load((DEMO / "campaign.yaml").read_text())
    return campaign["search_space"], json.loads((DEMO / campaign["base_config"]).read_text())


def configurations(n_random: int, seed: int) -> list[dict]:
    """Per mpnn_type the smallest model at the largest batch and the largest one, then ``n_random``
    drawn from the space (parameters by dotted key)."""
    from hpo.space import SearchSpace

    spec, _ = demo_space()
    space = SearchSpace.from_dict(spec)
    arch, train = "NeuralNetwork.Architecture.", "NeuralNetwork.Training."
    out = []
    for mpnn in spec[arch + "mpnn_type"]["choices"]:
        for hidden, layers in ((spec[arch + "hidden_dim"]["low"], spec[arch + "num_conv_layers"]["low"]),
                               (spec[arch + "hidden_dim"]["high"], spec[arch + "num_conv_layers"]["high"])):
            out.append({arch + "mpnn_type": mpnn, arch + "hidden_dim": hidden, arch + "num_conv_layers": layers,
                        train + "Optimizer.learning_rate": 0.005, train + "batch_size": max(spec[train + "batch_size"]["choices"])})
    rng = np.random.default_rng(seed)
    return out + [space.sample_random(rng) for _ in range(n_random)]


def short(params: dict) -> str:
    p = {k.rsplit(".", 1)[1]: v for k, v in params.items()}
    return f"{p['mpnn_type']}-{p['hidden_dim']}x{p['num_conv_layers']} b{p['batch_size']}"


# (a) write cost -------------------------------------------------------------------------------------
@dataclass
class WriteCost:
    name: str
    params: int
    epoch_s: list[float]
    write_s: list[float]
    state_s: list[float]
    state_bytes: int
    best_bytes: int

    @property
    def shares(self) -> list[float]:
        return [w / e for w, e in zip(self.write_s, self.epoch_s)]

    @property
    def anchor_shares(self) -> list[float]:  # the best checkpoint alone
        return [(w - s) / e for w, s, e in zip(self.write_s, self.state_s, self.epoch_s)]


def measure_writes(data: Path, params: dict, epochs: int, work: Path) -> WriteCost:
    from hpo.space import apply_params
    from hydragnn_ensemble.config import config_from_dict
    from hydragnn_ensemble.train import train_trial

    _, base = demo_space()
    config = apply_params(base, params)
    config["NeuralNetwork"]["Training"]["num_epoch"] = epochs
    config["NeuralNetwork"]["Training"]["EarlyStopping"] = False
    run_dir = work / short(params).replace(" ", "_")
    result = train_trial(config_from_dict(config), data, run_dir, device="cpu", progress=False)
    if result.status != "completed":
        raise RuntimeError(f"{short(params)}: {result.status}: {result.failure_reason}")
    lines = [EPOCH_LINE.search(line) for line in (run_dir / "train.log").read_text().splitlines()]
    rows = [tuple(float(g) for g in m.groups()[1:]) for m in lines if m]
    return WriteCost(short(params), result.num_parameters, [r[0] for r in rows], [r[1] for r in rows],
                     [r[2] for r in rows], result.state_bytes, (run_dir / "checkpoint.pt").stat().st_size)


def report_writes(costs: list[WriteCost]) -> None:
    print("\n(a) checkpoint writes per epoch (training state + best checkpoint when improved), one thread")
    print(f"{'configuration':<22}{'params':>8}{'epoch s':>9}{'write ms med/max':>18}{'share med/max':>16}"
          f"{'state KB':>10}{'best KB':>9}")
    for c in costs:
        print(f"{c.name:<22}{c.params:>8}{statistics.median(c.epoch_s):>9.3f}"
              f"{1000 * statistics.median(c.write_s):>10.1f}/{1000 * max(c.write_s):<7.1f}"
              f"{100 * statistics.median(c.shares):>9.2f}%/{100 * max(c.shares):.2f}%"
              f"{c.state_bytes / 1024:>10.0f}{c.best_bytes / 1024:>9.0f}")
    shares = [s for c in costs for s in c.shares]
    anchor = [s for c in costs for s in c.anchor_shares]
    running = [c.state_bytes + c.best_bytes for c in costs]
    print(f"all {len(shares)} epochs of {len(costs)} trials: write share of the epoch median "
          f"{100 * statistics.median(shares):.2f}%, max {100 * max(shares):.2f}% (goal <= 5%: "
          f"{'met' if max(shares) <= 0.05 else 'NOT met'}); anchor, the best checkpoint alone: median "
          f"{100 * statistics.median(anchor):.2f}%, max {100 * max(anchor):.2f}%")
    print(f"bytes per trial on disk while it runs (state + best): median {statistics.median(running) / 1024:.0f} KB, "
          f"max {max(running) / 1024:.0f} KB; once it ended (best only): max {max(c.best_bytes for c in costs) / 1024:.0f} KB")


# (b) kill -9 then --resume ----------------------------------------------------------------------------
@dataclass
class Cut:
    """A trial attempt cut by a kill: the epochs it had finished, and the seconds since its last one."""

    trial_id: int
    attempt: int
    finished: int
    since_last_s: float | None
    epoch_s: float | None
    resumed: int | None = None  # the epochs the next attempt resumed after (0: from scratch)


@dataclass
class KillRun:
    cuts: list[Cut] = field(default_factory=list)
    kills: int = 0
    runs: int = 0


def write_campaign(tmp: Path, data: Path, trials: int, epochs: int, types: list[str], seed: int) -> Path:
    spec, base = demo_space()
    spec["NeuralNetwork.Architecture.mpnn_type"]["choices"] = types
    base["NeuralNetwork"]["Training"]["num_epoch"] = epochs
    (tmp / "base.json").write_text(json.dumps(base))
    campaign = {
        "dataset": str(data), "base_config": "base.json", "objective": "objective", "search_space": spec,
        "optimizer": {"name": "random"}, "max_trials": trials, "trial_time_limit_s": 300, "seed": seed,
        "resources": {"slots_per_node": 1, "device": "cpu", "slots_per_trial": [1]},
        "trial_program": "hydragnn_ensemble", "trial_launcher": "fork-server", "retries": 0,
    }
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    return path


def hpo_argv(campaign: Path, out: Path, ranks: int, resume: bool) -> list[str]:
    return [str(BIN / "mpiexec"), "-n", str(ranks), str(BIN / "hydragnn-ensemble"), "hpo", str(campaign), "-o",
            str(out), "--no-progress", *(["--resume"] if resume else [])]


def processes() -> dict[int, tuple[int, str]]:
    """Every live process: pid -> (parent pid, state letter)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(entry)] = (int(fields[1]), fields[0])
    return out


def descendants(pid: int) -> set[int]:
    """The processes below ``pid`` now (the job's ranks, the agents' fork servers and their trials,
    which start sessions of their own and die with their agent through PDEATHSIG)."""
    children: dict[int, list[int]] = {}
    for child, (parent, _) in processes().items():
        children.setdefault(parent, []).append(child)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def wait_gone(pids: set[int]) -> None:
    """Until none of ``pids`` is alive (zombies count as gone)."""
    while any(p in pids and state != "Z" for p, (_, state) in processes().items()):
        time.sleep(0.02)


def journal_state(out: Path):
    from hpo.journal import read_journal
    from hpo.state import CampaignState

    return CampaignState.replay(read_journal(out / "journal.jsonl").events)


def run_until_killed(argv: list[str], out: Path, delay_s: float) -> tuple[float, float | None]:
    """Run a campaign and kill -9 the whole job ``delay_s`` after its first epoch report of this
    run; the moments of its start and of the kill (None: it ended first)."""
    from hpo.journal import read_journal

    before = len(read_journal(out / "journal.jsonl").events) if (out / "journal.jsonl").exists() else 0
    started = time.time()
    job = subprocess.Popen(argv, cwd=REPO, env=child_env(), start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        first = None
        while job.poll() is None:
            if first is None and (out / "journal.jsonl").exists():
                events = read_journal(out / "journal.jsonl").events[before:]
                if any(e["event"] == "trial_progress" for e in events):
                    first = time.monotonic()
            if first is not None and time.monotonic() - first >= delay_s:
                tree = descendants(job.pid)
                os.killpg(job.pid, signal.SIGKILL)  # the whole job: mpiexec, its proxy, every rank
                killed = time.time()
                job.wait()
                wait_gone(tree)  # trials die with their agents a moment later: read their files after
                return started, killed
            time.sleep(0.02)
        return started, None
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def cuts_at(out: Path, started_at: float, killed_at: float) -> list[Cut]:
    """The attempts the kill cut: what each had finished (its progress lines, its training state,
    the epochs it resumed after) and how long before the kill its last epoch of this run ended."""
    from hydragnn_ensemble.train.training_state import TrainingStateError, read_training_state

    cuts = []
    for record in journal_state(out).running_at_crash:
        attempt = record.last_attempt.attempt
        run_dir = out / "trials" / str(record.trial_id)
        lines = [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()] \
            if (run_dir / "progress.jsonl").exists() else []
        log = (run_dir / "train.log").read_text() if (run_dir / "train.log").exists() else ""
        resumed = RESUMED_LINE.search(log)
        finished, last_end = int(resumed.group(1)) if resumed else 0, None
        try:
            state = read_training_state(run_dir / "training_state.pt")
            finished = max(finished, state.epoch)
            mtime = (run_dir / "training_state.pt").stat().st_mtime
            last_end = mtime if mtime >= started_at else None
        except (FileNotFoundError, TrainingStateError):
            pass
        if lines:
            finished = max(finished, lines[-1]["epoch"])
        epoch_s = lines[-1].get("epoch_s") if lines else None
        cuts.append(Cut(record.trial_id, attempt, finished, None if last_end is None else killed_at - last_end, epoch_s))
    return cuts


def resumed_after(out: Path, trial_id: int, attempt: int, last: int) -> int:
    """The epochs attempt ``attempt`` of a trial resumed after (0: from scratch), from its log."""
    run_dir = out / "trials" / str(trial_id)
    log = run_dir / ("train.log" if attempt == last else f"train.attempt{attempt}.log")
    found = RESUMED_LINE.search(log.read_text()) if log.exists() else None
    return int(found.group(1)) if found else 0


def kill_and_resume(data: Path, args, work: Path) -> tuple[KillRun, Path]:
    campaign = write_campaign(work, data, args.trials, args.campaign_epochs, args.campaign_types, args.seed)
    out = work / "out"
    rng = np.random.default_rng(args.seed)
    run = KillRun()
    for k in range(args.kills):
        started, killed = run_until_killed(hpo_argv(campaign, out, args.ranks, resume=k > 0), out,
                                           float(rng.uniform(0.0, args.kill_window)))
        run.runs += 1
        if killed is None:
            break
        run.kills += 1
        run.cuts += cuts_at(out, started, killed)
    else:
        proc = subprocess.run(hpo_argv(campaign, out, args.ranks, resume=True), cwd=REPO, env=child_env(),
                              capture_output=True, text=True, timeout=1800)
        run.runs += 1
        if proc.returncode != 0:
            raise RuntimeError(f"the final --resume failed: {proc.stderr[-3000:]}")
    state = journal_state(out)
    for cut in run.cuts:
        cut.resumed = resumed_after(out, cut.trial_id, cut.attempt + 1, max(state.trials[cut.trial_id].attempts))
    return run, out


def check_campaign(out: Path, trials: int) -> dict:
    """Trials lost / duplicated in the journal, and whether results.csv is exact."""
    from hpo.journal import read_journal
    from hydragnn_ensemble.result import TrialResult

    events = read_journal(out / "journal.jsonl").events
    ends = Counter(e["trial_id"] for e in events if e["event"] in ("trial_finished", "trial_failed"))
    state = journal_state(out)
    with open(out / "results.csv", newline="") as fh:
        rows = {int(r["job_id"]): r for r in csv.DictReader(fh)}
    exact = sorted(rows) == list(range(trials))
    for tid, row in rows.items():
        result = TrialResult.read(out / "trials" / str(tid) / "result.json")
        loss = float(row["loss"]) if row["loss"] else None
        exact &= (row["m:status"] == result.status.value and loss == result.objective
                  and int(row["m:epochs"]) == result.epochs and int(row["m:attempts"]) == len(state.trials[tid].attempts))
    return {"lost": sum(1 for t in range(trials) if ends[t] == 0), "duplicated": sum(n - 1 for n in ends.values() if n > 1),
            "exact": exact, "statuses": Counter(r.status.value for r in state.finished)}


def identical_to_uncut(out: Path, trial_ids: set[int], work: Path) -> tuple[int, int]:
    """How many of ``trial_ids`` ended with the objective and weights of their configuration trained
    uncut here (one thread, as the trial processes), of how many."""
    import torch

    from hydragnn_ensemble.config import load_config
    from hydragnn_ensemble.result import TrialResult
    from hydragnn_ensemble.train import train_trial

    same = 0
    for tid in sorted(trial_ids):
        run_dir = out / "trials" / str(tid)
        cut = TrialResult.read(run_dir / "result.json")
        data = yaml.safe_load((out / "campaign.yaml").read_text())["dataset"]
        uncut = train_trial(load_config(run_dir / "config.json"), data, work / f"uncut{tid}", device="cpu",
                            progress=False)
        a = torch.load(run_dir / "checkpoint.pt", weights_only=True)["state_dict"]
        b = torch.load(work / f"uncut{tid}" / "checkpoint.pt", weights_only=True)["state_dict"]
        same += cut.objective == uncut.objective and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return same, len(trial_ids)


def report_kills(run: KillRun, checks: dict, identical: tuple[int, int], args) -> None:
    print(f"\n(b) kill -9 of the whole campaign, then --resume: {args.trials} trials x {args.campaign_epochs} epochs, "
          f"mpiexec -n {args.ranks}, {run.kills} kill(s) in {run.runs} run(s)")
    lost = [max(0, c.finished - (c.resumed or 0)) for c in run.cuts]
    # the share of the epoch in progress at the kill (known where the attempt wrote a state in that run)
    shares = [min(1.0, c.since_last_s / c.epoch_s) if c.since_last_s is not None and c.epoch_s else None
              for c in run.cuts]
    partial = [s for s in shares if s is not None]
    print(f"{'trial':>6}{'attempt':>8}{'finished':>9}{'resumed after':>14}{'epochs lost':>12}{'+ in progress':>14}")
    for c, n, share in zip(run.cuts, lost, shares):
        print(f"{c.trial_id:>6}{c.attempt:>8}{c.finished:>9}{c.resumed:>14}{n:>12}"
              f"{'' if share is None else f'{share:.2f}':>14}")
    if run.cuts:
        print(f"epochs lost per cut trial: mean {statistics.mean(lost):.2f}, max {max(lost)} over {len(lost)} cut "
              f"attempt(s) (goal <= 1: {'met' if max(lost) <= 1 else 'NOT met'}); before #46 every finished epoch "
              f"was lost: mean {statistics.mean(c.finished for c in run.cuts):.2f}")
        if partial:
            work = [n + s for n, s in zip(lost, shares) if s is not None]
            print(f"the epoch in progress at the kill, share lost: mean {statistics.mean(partial):.2f}, max "
                  f"{max(partial):.2f}; with it, epochs of work lost: mean {statistics.mean(work):.2f}, max {max(work):.2f}")
    print(f"trials lost {checks['lost']}, duplicated {checks['duplicated']} (goal 0); results.csv exact: "
          f"{checks['exact']}; statuses {dict(checks['statuses'])}")
    print(f"cut trials ending bit-identical to the same configuration trained uncut: {identical[0]} of {identical[1]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="the demo's alloy.bp (see above)")
    ap.add_argument("--configs", type=int, default=2, help="random configurations besides the corners, (a)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per configuration, (a)")
    ap.add_argument("--trials", type=int, default=4, help="trials of the killed campaign, (b)")
    ap.add_argument("--campaign-epochs", type=int, default=10, help="epochs per trial of the killed campaign, (b)")
    ap.add_argument("--campaign-types", nargs="+", default=["GIN"], help="its mpnn_type choices, (b)")
    ap.add_argument("--kills", type=int, default=5, help="kill -9 of the campaign, each followed by --resume, (b)")
    ap.add_argument("--kill-window", type=float, default=6.0, help="seconds after the first epoch report of a run "
                    "within which it is killed, uniformly, (b)")
    ap.add_argument("--ranks", type=int, default=3, help="mpiexec -n of the campaign (1 scheduler + agents), (b)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip", choices=("writes", "kills"), default=None, help="leave out (a) or (b)")
    args = ap.parse_args(argv)
    import torch

    from hydragnn_ensemble.train.allocator import keep_freed_memory

    torch.set_num_threads(1)  # as in a trial process (hydragnn_ensemble.cli.commands.train)
    keep_freed_memory()
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        t0 = time.perf_counter()
        data = args.data.resolve()
        if args.skip != "writes":
            (work / "a").mkdir()
            report_writes([measure_writes(data, p, args.epochs, work / "a") for p in configurations(args.configs, args.seed)])
        if args.skip != "kills":
            (work / "b").mkdir()
            run, out = kill_and_resume(data, args, work / "b")
            checks = check_campaign(out, args.trials)
            resumed = {c.trial_id for c in run.cuts if c.resumed}
            identical = identical_to_uncut(out, resumed, work / "b")
            report_kills(run, checks, identical, args)
        print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
