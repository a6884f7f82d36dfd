"""What one event costs rank 0 at two machine sizes (issue #45): the project's own
:class:`scheduler.runtime.scheduler_rank.SchedulerRank` driven with its real message handlers, its
real journal (in a temporary directory), the random optimizer and the cost-model sizer; MPI is
replaced by a transport that pickles every message it sends (what mpi4py does) and hands back the
agents' reports the bench makes. CPU time of rank 0's thread per event:

- ``first wave``: the first turn on an idle machine (every slot gets a 1-slot trial), per start,
  and when its first start message left (wall);
- ``epoch report``: a running trial's epoch (handler, stopper, re-estimate, journal), per report;
- ``end + start``: a trial's exit and the next trial started on its slot, per trial.

Run: ``python -m bench.rank0_handlers`` (``--nodes 128 8192`` by default; about 3 minutes on 2
cores). The numbers are what the simulator charges rank 0 (``scheduler.simulator`` with
``--charge-rank0``): ``--out`` writes them as JSON. Medians of ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from hydragnn_ensemble.result import EpochReport, TrialResult

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "alloy"
SLOTS_PER_NODE = 8


class PicklingTransport:
    """MPI's part on rank 0: every message sent is pickled (and counted); reports come from the bench."""

    def __init__(self) -> None:
        self.inbox: list[Any] = []
        self.sent: list[Any] = []
        self.first_send: float | None = None  # perf_counter of the first message sent

    def send(self, dest: int, tag: int, message: Any) -> None:
        pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self.sent.append(message)
        if self.first_send is None:
            self.first_send = time.perf_counter()

    def receive(self) -> list[Any]:
        got, self.inbox = self.inbox, []
        return got

    def progress(self) -> None:
        pass

    def close(self) -> None:
        pass


def _campaign(tmp: Path, stopper: str, max_trials: int) -> Path:
    """The demo's campaign at ``max_trials``, one slot per trial, 8 slots per node."""
    data = yaml.safe_load((EXAMPLE / "campaign.yaml").read_text())
    (tmp / "data.bp").write_text("the bench reads no data")
    data.update(dataset=str(tmp / "data.bp"), base_config=str(EXAMPLE / "formation_energy.json"),
                max_trials=max_trials, max_time_s=None, optimizer={"name": "random"},
                resources={"slots_per_node": SLOTS_PER_NODE, "device": "gpu", "slots_per_trial": [1]},
                early_stopping={"method": stopper, "min_epochs": 3, "reduction_factor": 3} if stopper == "asha"
                else {"method": stopper})
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _rank0(tmp: Path, nodes: int, stopper: str):
    from hpo.campaign_dir import CampaignDir
    from hpo.session import CampaignSession
    from scheduler.campaign_file import load_checked_campaign
    from scheduler.placement.registry import make_policy
    from scheduler.runtime.layout import build_layout
    from scheduler.runtime.messages import AgentHello
    from scheduler.runtime.progress import ProgressLine
    from scheduler.runtime.run import trial_config_maker
    from scheduler.runtime.scheduler_rank import SchedulerRank
    from scheduler.sizing import runtime_sizer

    slots = nodes * SLOTS_PER_NODE
    checked = load_checked_campaign(_campaign(tmp, stopper, max_trials=10 * slots))
    cfg = checked.config
    cdir = CampaignDir(tmp / "campaign")
    session = CampaignSession.open(cfg, cdir, resume=False, ask_batch=64)
    hellos = [AgentHello(r, f"node{(r - 1) // SLOTS_PER_NODE}", {}) for r in range(1, slots + 1)]
    layout = build_layout(hellos, SLOTS_PER_NODE)
    make_config = trial_config_maker(cfg, cdir)
    stop = cfg.early_stopping.make()
    sizer = runtime_sizer(str(cfg.dataset), [1], SLOTS_PER_NODE, cfg.trial_time_limit_s, make_config, device="gpu",
                          work_fraction=None if stop is None else stop.expected_fraction)
    transport = PicklingTransport()
    clock = [1000.0]
    sched = SchedulerRank(transport, cfg, cdir, layout, make_policy(cfg.placement), sizer, session, make_config,
                          ProgressLine(enabled=False), clock=lambda: clock[0], stopper=stop,
                          sharing=checked.sharing(64.0))
    return sched, session, transport, clock


def _cpu(fn) -> float:
    c0 = time.thread_time()
    fn()
    return time.thread_time() - c0


def measure(nodes: int, stopper: str, reports: int, ends: int, rounds: int) -> dict[str, float]:
    """Per-event CPU seconds at ``nodes`` x 8 slots (medians over ``rounds``)."""
    with tempfile.TemporaryDirectory() as tmp:
        sched, session, transport, clock = _rank0(Path(tmp), nodes, stopper)
        try:
            t0 = time.perf_counter()
            first = _cpu(lambda: sched.turn(clock[0]))
            first_message_s = (transport.first_send or t0) - t0
            running = list(sched.loop.book.running.values())
            starts = len(running)
            epoch = {rt.spec.trial_id: 0 for rt in running}
            per_report, per_end = [], []
            from scheduler.runtime.messages import EpochsReported, PartExited

            for r in range(rounds):
                clock[0] += 30.0
                batch = running[(r * reports) % len(running):][:reports]
                for rt in batch:
                    tid = rt.spec.trial_id
                    epoch[tid] += 1
                    transport.inbox.append(EpochsReported(1, tid, rt.spec.attempt, (
                        EpochReport(epoch[tid], 1.0 / (1 + tid % 97 + epoch[tid]), elapsed_s=30.0 * epoch[tid],
                                    epoch_s=30.0, train_s=25.0),)))
                per_report.append(_cpu(lambda: sched.turn(clock[0])) / len(batch))
                clock[0] += 1.0
                done = list(sched.loop.book.running.values())[:ends]
                for rt in done:
                    result = TrialResult("completed", objective=0.5, epochs=epoch.get(rt.spec.trial_id, 1),
                                         wall_time_s=clock[0] - rt.start_time, slots=1)
                    transport.inbox.append(PartExited(1, rt.spec.trial_id, rt.spec.attempt, 0, 0, rt.start_time,
                                                      clock[0], result=result))
                per_end.append(_cpu(lambda: sched.turn(clock[0])) / len(done))
                running = list(sched.loop.book.running.values())
                epoch.update({rt.spec.trial_id: epoch.get(rt.spec.trial_id, 0) for rt in running})
        finally:
            session.close()
    return {"slots": nodes * SLOTS_PER_NODE, "first_wave_per_start_s": first / max(1, starts), "first_wave_s": first,
            "first_message_s": first_message_s,
            "epoch_report_s": statistics.median(per_report), "end_and_start_s": statistics.median(per_end)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[128, 8192])
    parser.add_argument("--stopper", default="asha", help="the campaign's early_stopping method (default asha)")
    parser.add_argument("--reports", type=int, default=256, help="epoch reports per round")
    parser.add_argument("--ends", type=int, default=64, help="trial ends per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    rows = [measure(n, args.stopper, args.reports, args.ends, args.rounds) for n in args.nodes]
    print(f"rank 0's CPU per event ({args.stopper}; medians of {args.rounds} rounds)")
    print(f"{'slots':>7} {'first wave':>11} {'first sent':>11} {'per start':>10} {'epoch report':>13} {'end + start':>12}")
    for row in rows:
        print(f"{row['slots']:>7,} {row['first_wave_s']:>10.1f}s {row['first_message_s']:>10.2f}s "
              f"{1e6 * row['first_wave_per_start_s']:>8.0f}us "
              f"{1e6 * row['epoch_report_s']:>11.0f}us {1e6 * row['end_and_start_s']:>10.0f}us")
    if args.out is not None:
        args.out.write_text(json.dumps({"stopper": args.stopper, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
