"""A campaign that runs past ``max_time_s`` says why in its closing lines: the budget stops new
starts and the trials running then finish within their own time limit. Rank 0
(:class:`SchedulerRank`) runs on virtual agents and a virtual clock (as in
``test_runtime_matches_simulator``); the count of trials running at the limit is checked against the
journal."""

from __future__ import annotations

from pathlib import Path

from campaign_testkit import write_campaign
from test_runtime_matches_simulator import NODES, SLOTS_PER_NODE, TableSizer, VirtualAgents

from hpo.campaign import load_campaign
from hpo.campaign_dir import CampaignDir
from hpo.journal import read_journal
from hpo.session import CampaignSession
from hydragnn_ensemble.cli.commands.hpo import _summary_lines
from scheduler.placement.registry import make_policy
from scheduler.runtime.layout import build_layout
from scheduler.runtime.messages import AgentHello
from scheduler.runtime.progress import ProgressLine
from scheduler.runtime.scheduler_rank import CampaignSummary, SchedulerRank

MAX_TIME_S = 3.0


def run_to_the_end(tmp_path: Path, prefetch_below_s: float = 0.0,
                   max_time_s: float = MAX_TIME_S) -> tuple[CampaignSummary, list[dict], int]:
    """The campaign on virtual agents until it stops: its summary, its journal and how many trials
    sent ahead the agents were told to drop."""
    campaign = write_campaign(tmp_path / "in", max_trials=50, max_time_s=max_time_s, trial_time_limit_s=20,
                              optimizer={"name": "random"}, prefetch_below_s=prefetch_below_s,
                              resources={"slots_per_node": SLOTS_PER_NODE, "slots_per_trial": [1, 2]})
    cfg = load_campaign(campaign)
    cdir = CampaignDir(tmp_path / "campaign")
    session = CampaignSession.open(cfg, cdir, resume=False, ask_batch=4)
    hellos = [AgentHello(rank, f"node{(rank - 1) // SLOTS_PER_NODE}", {})
              for rank in range(1, 1 + NODES * SLOTS_PER_NODE)]
    agents = VirtualAgents()
    sched = SchedulerRank(agents, cfg, cdir, build_layout(hellos, SLOTS_PER_NODE), make_policy("load-aware"),
                          TableSizer(), session, lambda params: params, ProgressLine(enabled=False),
                          clock=lambda: agents.now)
    try:
        now = 0.0
        while True:
            for _ in range(4):
                sched.turn(now)
            if sched.loop.done():
                break
            if now < max_time_s < agents.events.next_time():  # rank 0 polls: it turns at the budget too
                now = agents.now = max_time_s
                continue
            now = agents.advance()
        summary = sched.finish_run()
    finally:
        session.close()
    return summary, read_journal(cdir.journal).events, agents.taken_back


def test_the_closing_lines_say_why_the_campaign_ran_past_max_time_s(tmp_path):
    summary, events, _ = run_to_the_end(tmp_path)
    starts = {(e["trial_id"], e["attempt"]): e["time"] for e in events if e["event"] == "trial_started"}
    ends = {(e["trial_id"], e["attempt"]): e["time"] for e in events if e["event"] == "trial_finished"}
    running_at_limit = sum(1 for key, t in starts.items() if t <= MAX_TIME_S < ends[key])
    assert running_at_limit > 0 and max(starts.values()) <= MAX_TIME_S  # nothing started after the budget
    last_end = max(ends.values())
    assert last_end > MAX_TIME_S + 0.5
    assert summary.campaign_time_s == last_end and summary.running_at_limit == running_at_limit
    lines = _summary_lines(summary)
    assert lines[0] == f"campaign finished: max_time_s ({MAX_TIME_S:g} s) reached"
    assert lines[1] == (f"  campaign time {last_end:.0f} s, {last_end - MAX_TIME_S:.0f} s past max_time_s (3 s): "
                        f"max_time_s stops new trials from starting; the {running_at_limit} trials running then "
                        "were left to finish within their own time limit (trial_time_limit_s 20 s)")


def test_no_note_when_the_campaign_ended_within_max_time_s():
    summary = CampaignSummary(reason="max_trials (4) finished", finished=4, failed=0, statuses={"completed": 4},
                              best_objective=0.1, best_trial=2, elapsed_s=100.0, campaign_time_s=100.0,
                              max_time_s=420.0, trial_time_limit_s=60.0)
    assert summary.time_note is None
    assert _summary_lines(summary)[1] == "  trials finished: 4 (4 completed)"


def test_the_budget_takes_back_the_trials_sent_ahead(tmp_path):
    """With trials sent ahead (prefetch), max_time_s drops those not started: none starts after the
    budget (one not taken back would start when the trial before it ends, past the budget)."""
    _, events, taken_back = run_to_the_end(tmp_path, prefetch_below_s=100.0, max_time_s=15.0)
    started = [e for e in events if e["event"] == "trial_started"]
    assert any("queued_after" in e for e in started) and taken_back > 0
    assert max(e["time"] for e in started) <= 15.0
