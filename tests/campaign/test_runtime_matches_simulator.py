"""The simulator and the MPI runtime decide alike: one small workload (sub-node and whole-node
trials, short ones sent ahead, some running longer than predicted so that trials sent ahead are
taken back) runs through the runtime's rank 0 (:class:`SchedulerRank`, with its journal, campaign
session and optimizer, agents replaced by virtual ones on a virtual clock) and through the
simulator, which writes its campaign directory too: the two journals must hold the same events in
the same order (the same trials suggested, started on the same slots at the same times, ended with
the same results), all but what names the run (``campaign_started``) and the suggested parameters
(the simulator's workload names its trials by number)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from campaign_testkit import most_at_once, write_campaign
from hpo.campaign import load_campaign
from hpo.campaign_dir import CampaignDir
from hpo.journal import read_journal
from hpo.session import CampaignSession
from hydragnn_ensemble.result import TrialResult
from scheduler.runtime.layout import build_layout
from scheduler.runtime.messages import TAG_START, TAG_UNQUEUE, AgentHello, PartExited, StartTrial, Unqueued
from scheduler.runtime.progress import ProgressLine
from scheduler.runtime.scheduler_rank import SchedulerRank
from scheduler.placement.registry import make_policy
from scheduler.simulator import SimConfig, SimTrial, simulate
from scheduler.simulator.cluster import EventQueue
from scheduler.sharing import ColocationCurve, GpuSharing
from scheduler.sizing import SizedTrial

NODES, SLOTS_PER_NODE = 2, 2


def sized(params: dict[str, Any]) -> SizedTrial:
    """Trial size and predicted seconds from its parameters: wide models take a whole node; the
    learning rate makes every duration distinct (no ties on the clock)."""
    slots = SLOTS_PER_NODE if params["NeuralNetwork.Architecture.hidden_dim"] > 52 else 1
    seconds = params["NeuralNetwork.Architecture.hidden_dim"] / 16 + params["NeuralNetwork.Training.learning_rate"]
    return SizedTrial(slots, seconds)


def true_seconds(params: dict[str, Any]) -> float:
    """Four-layer models run 1.7x longer than predicted."""
    return sized(params).predicted_seconds * (1.7 if params["NeuralNetwork.Architecture.num_conv_layers"] == 4 else 1.0)


class TableSizer:
    def choose(self, params):
        return sized(params)

    def size(self, params):
        s = sized(params)
        return s.slots, s.predicted_seconds

    def observe_epoch(self, params, slots, attempt, times, node=None):
        return False

    def observe(self, params, slots, wall_time_s, ok, epochs=None, node=None):
        pass

    def regrow(self, params, slots, epoch_s):
        return ()

    def larger_than(self, slots):
        return None


class VirtualAgents:
    """The agents of the layout on a virtual clock: a start runs for the true duration of the
    parameters its config carries; a start sent ahead begins when the trial it follows exits on
    that agent; an Unqueue drops a start that has not begun. Implements the rank-0 transport."""

    def __init__(self) -> None:
        self.now = 0.0
        self.events = EventQueue()
        self.waiting_behind: dict[tuple[int, tuple[int, int]], StartTrial] = {}  # (agent, after) -> start
        self.inbox: list = []
        self.taken_back = 0  # starts sent ahead that an Unqueue dropped

    def send(self, dest: int, tag: int, message: Any) -> None:
        if tag == TAG_START:
            if message.after is None:
                self._run(dest, message)
            else:
                self.waiting_behind[(dest, message.after)] = message
        elif tag == TAG_UNQUEUE:
            start = self.waiting_behind.pop((dest, message.after), None)
            if start is not None:
                self.taken_back += 1
                self.inbox.append(Unqueued(dest, start.trial_id, start.attempt, message.after))

    def _run(self, agent: int, start: StartTrial) -> None:
        seconds = true_seconds(json.loads(start.config_json))  # the trial config is its parameters here
        self.events.push(self.now + seconds, "exit", (agent, start, self.now))

    def advance(self) -> float:
        """Move the clock to the next exits and deliver them (starting what was sent ahead)."""
        self.now = self.events.next_time()
        while self.events and self.events.next_time() == self.now:
            _, (agent, start, began) = self.events.pop()
            result = None
            if start.read_result:
                result = TrialResult("completed", objective=self.now - began, wall_time_s=self.now - began, epochs=1)
            self.inbox.append(PartExited(agent, start.trial_id, start.attempt, start.rank, 0, began, self.now,
                                         result=result))
            successor = self.waiting_behind.pop((agent, (start.trial_id, start.attempt)), None)
            if successor is not None:
                self._run(agent, successor)
        return self.now

    def receive(self) -> list:
        got, self.inbox = self.inbox, []
        return got

    def progress(self) -> None:
        pass

    def close(self) -> None:
        pass


class SharingTableSizer(TableSizer):
    """The table's sizes, with 1 GB and 10% of a GPU predicted for every trial (so each single-slot
    trial may share a GPU)."""

    def choose(self, params):
        return replace(sized(params), memory_gb=1.0, utilisation=0.1)


def run_runtime(tmp_path: Path, max_trials: int, sizer=None, sharing: GpuSharing | None = None,
                prefetch_below_s: float = 2.0, start_batch: int | None = None,
                agents: "VirtualAgents | None" = None,
                **campaign_options: Any) -> tuple[list[tuple], list[dict], int, SchedulerRank]:
    """The runtime's rank 0 on virtual agents; returns its starts, the suggested parameters, how
    many trials sent ahead were taken back, and the rank itself (after its run)."""
    campaign = write_campaign(tmp_path / "in", max_trials=max_trials, optimizer={"name": "random"},
                              prefetch_below_s=prefetch_below_s,
                              resources={"slots_per_node": SLOTS_PER_NODE, "slots_per_trial": [1, 2]},
                              **campaign_options)
    cfg = load_campaign(campaign)
    cdir = CampaignDir(tmp_path / "campaign")
    session = CampaignSession.open(cfg, cdir, resume=False, ask_batch=4)
    hellos = [AgentHello(rank, f"node{(rank - 1) // SLOTS_PER_NODE}", {}) for rank in range(1, 1 + NODES * SLOTS_PER_NODE)]
    layout = build_layout(hellos, SLOTS_PER_NODE)
    agents = agents or VirtualAgents()
    sched = SchedulerRank(agents, cfg, cdir, layout, make_policy("load-aware"), sizer or TableSizer(), session,
                          lambda params: params, ProgressLine(enabled=False), clock=lambda: agents.now,
                          sharing=sharing)
    if start_batch is not None:
        sched.start_batch = start_batch
    try:
        now = 0.0
        while True:
            for _ in range(4):  # turns until one changes nothing, as the simulator does at each step
                before = (len(sched.loop.book.waiting), len(sched.loop.book.running), len(sched.loop.book.queued),
                          sched.loop.next_trial_id)
                sched.turn(now)
                if before == (len(sched.loop.book.waiting), len(sched.loop.book.running),
                              len(sched.loop.book.queued), sched.loop.next_trial_id) and not agents.inbox:
                    break
            if sched.loop.done():
                break
            now = agents.advance()
        sched.finish_run()
    finally:
        session.close()
    events = read_journal(cdir.journal).events
    starts = sorted((e["time"], e["trial_id"], e["attempt"], tuple(e["slots"]), e.get("queued_after"))
                    for e in events if e["event"] == "trial_started")
    suggested = [e["params"] for e in events if e["event"] == "trial_suggested"]
    return starts, suggested, agents.taken_back, sched


def comparable(journal: Path) -> list[dict]:
    """A journal's events but ``campaign_started``, without the suggested parameters."""
    return [{k: v for k, v in e.items() if k != "params"} for e in read_journal(journal).events
            if e["event"] != "campaign_started"]


def test_runtime_and_simulator_write_the_same_journal(tmp_path):
    starts, suggested, taken_back, _ = run_runtime(tmp_path, max_trials=24)
    assert len(suggested) == 24 and len(starts) == 24
    workload = [SimTrial(i, sized(p).slots, sized(p).predicted_seconds, true_seconds(p)) for i, p in enumerate(suggested)]
    config = SimConfig(nodes=NODES, gpus_per_node=SLOTS_PER_NODE, policy="load-aware", pool_factor=2.0,
                       prefetch_below_s=2.0, retries=0)
    sim = simulate(workload, config, campaign_dir=tmp_path / "sim")
    runtime_events = comparable(tmp_path / "campaign" / "journal.jsonl")
    sim_events = comparable(tmp_path / "sim" / "journal.jsonl")
    assert len(runtime_events) == len(sim_events) == 24 * 3 + 1
    for i, (ours, theirs) in enumerate(zip(runtime_events, sim_events)):
        assert ours == theirs, f"event {i}"
    # the workload exercises what the two must agree on: trials sent ahead (and one taken back from
    # an idle slot), whole-node trials
    assert len([s for s in starts if s[4] is not None]) == 3 and taken_back == 1
    assert any(len(s[3]) == SLOTS_PER_NODE for s in starts)
    assert math.isclose(max(r.end for r in sim.records), sim.summary["makespan_s"])


def test_with_gpu_sharing_too_and_rank_0_counts_a_shared_gpu_busy_once(tmp_path):
    """Two trials per GPU at no slowdown (aggregate(2) = 2: the virtual agents run shared trials at
    full speed): the runtime and the simulator start the same trials on the same slots at the same
    times. Rank 0's utilisation counts each slot busy while any trial runs there (the union of its
    trials' runs, from the journal), not once per trial."""
    curve = ColocationCurve({1: 1.0, 2: 2.0}, "no slowdown")
    sharing = GpuSharing.parse("2", 64.0, curve, time_limit_s=20.0)
    starts, suggested, _, sched = run_runtime(tmp_path, max_trials=24, sizer=SharingTableSizer(), sharing=sharing,
                                              prefetch_below_s=0.0)
    assert len(starts) == 24
    workload = [SimTrial(i, sized(p).slots, sized(p).predicted_seconds, true_seconds(p), memory_per_slot_gb=1.0)
                for i, p in enumerate(suggested)]
    sim = simulate(workload, SimConfig(nodes=NODES, gpus_per_node=SLOTS_PER_NODE, policy="load-aware",
                                       pool_factor=2.0, prefetch_below_s=0.0, retries=0, gpu_sharing=sharing,
                                       colocation=curve), campaign_dir=tmp_path / "sim")
    assert comparable(tmp_path / "campaign" / "journal.jsonl") == comparable(tmp_path / "sim" / "journal.jsonl")
    assert 0 < sim.summary["gpu_sharing"]["shared_attempts"] < 24  # shared single-slot and unshared whole-node trials
    events = read_journal(tmp_path / "campaign" / "journal.jsonl").events
    runs: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        if e["event"] == "trial_finished":
            start = next(s for s in events if s["event"] == "trial_started" and s["trial_id"] == e["trial_id"])
            for slot in start["slots"]:
                runs.setdefault(slot, []).append((start["time"], e["time"]))
    assert max(most_at_once(r) for r in runs.values()) == 2
    busy = sum(union_length(r) for r in runs.values())
    snap = sched._snapshot(sched.clock())
    assert snap.busy_slots == 0 and snap.utilisation == pytest.approx(busy / (snap.elapsed_s * NODES * SLOTS_PER_NODE))


def union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for s, e in sorted(intervals):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


class JournalFirstAgents(VirtualAgents):
    """Virtual agents that check, as each start message arrives, that its trial_started line is in
    the journal already (the journal writer has written it; rank 0 sends only what it journaled)."""

    journal: Path
    checked = 0

    def send(self, dest: int, tag: int, message: Any) -> None:
        if tag == TAG_START and message.after is None:
            started = {(e["trial_id"], e["attempt"]) for e in read_journal(self.journal).events
                       if e["event"] == "trial_started"}
            assert (message.trial_id, message.attempt) in started, f"trial {message.trial_id} sent before journaled"
            self.checked += 1
        super().send(dest, tag, message)


def test_starts_leave_in_batches_each_after_its_journal_line(tmp_path):
    """With a batch of one start message, every start leaves mid-turn, as it is placed: the
    decisions and the journal are those of whole turns, and no start leaves before its line."""
    agents = JournalFirstAgents()
    agents.journal = tmp_path / "batched" / "campaign" / "journal.jsonl"
    run_runtime(tmp_path / "batched", max_trials=24, start_batch=1, agents=agents)
    run_runtime(tmp_path / "whole", max_trials=24)
    assert agents.checked >= 20
    assert comparable(tmp_path / "batched" / "campaign" / "journal.jsonl") == \
        comparable(tmp_path / "whole" / "campaign" / "journal.jsonl")
