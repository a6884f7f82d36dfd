"""Malleable moves decided alike by the MPI runtime and the simulator (#46): the same workload of
multi-epoch trials runs through the runtime's rank 0 (:class:`SchedulerRank`, virtual agents that
report every epoch, stop after the epoch they are in when asked to move and whose continuation
resumes after the epochs its state holds) and through the simulator. At the campaign's tail the
long trials grow onto the slots the short ones leave; the two journals must hold the same events
in the same order (moves, the continuations' starts and their curves included)."""

from __future__ import annotations

import json
from typing import Any

from test_runtime_matches_simulator import (NODES, SLOTS_PER_NODE, TableSizer, VirtualAgents, comparable,
                                             run_runtime)

from hydragnn_ensemble.result import EpochReport, TrialResult
from scheduler.efficiency import ParallelEfficiency
from scheduler.runtime.messages import TAG_START, TAG_STOP, EpochsReported, MoveTrial, PartExited, StartTrial
from scheduler.simulator import SimConfig, SimTrial, simulate
from scheduler.simulator.cluster import TRAIN_SHARE
from scheduler.sizing import SizedTrial, wider_epochs

EFFICIENCY = ParallelEfficiency(alpha=0.1, slots_per_node=SLOTS_PER_NODE)
TIME_LIMIT_S = 200.0


def shape(params: dict[str, Any]) -> tuple[int, float, float]:
    """(epochs, seconds per epoch on one slot, start-up) of a trial, from its parameters: deeper
    models train more epochs, wider ones slower; every duration distinct (no ties on the clock)."""
    epochs = 3 + 8 * params["NeuralNetwork.Architecture.num_conv_layers"]
    epoch_s = params["NeuralNetwork.Architecture.hidden_dim"] / 16
    startup = 0.2 + 10 * params["NeuralNetwork.Training.learning_rate"]
    return epochs, epoch_s, startup


class ShapeSizer(TableSizer):
    """The runtime's sizer for the table: one slot, the trial's true duration, its epoch budget;
    wider sizes as the simulator's workload sizer offers them."""

    def choose(self, params):
        epochs, epoch_s, startup = shape(params)
        return SizedTrial(1, startup + epochs * epoch_s, (), epochs=epochs, memory_gb=0.0)

    def size(self, params):
        s = self.choose(params)
        return s.slots, s.predicted_seconds

    def regrow(self, params, slots, epoch_s):
        return wider_epochs([n for n in (2,) if n > slots], slots, epoch_s, EFFICIENCY)


class EpochAgents(VirtualAgents):
    """Virtual agents whose trials report each epoch (from the epochs their training state holds),
    and stop after the epoch they are in when asked to move, keeping their state."""

    def __init__(self) -> None:
        super().__init__()
        self.state: dict[int, int] = {}  # trial -> epochs its training state holds
        self.running: dict[tuple[int, int], dict] = {}  # (trial, attempt) -> its plan

    def send(self, dest: int, tag: int, message: Any) -> None:
        if tag == TAG_START and message.rank == 0:
            self._begin(message)
        elif tag == TAG_START:
            self.running[(message.trial_id, message.attempt)]["agents"].append((dest, message.rank))
        elif tag == TAG_STOP and isinstance(message, MoveTrial):
            self.running[(message.trial_id, message.attempt)]["move"] = True

    def _begin(self, start: StartTrial) -> None:
        epochs, epoch_s, startup = shape(json.loads(start.config_json or _config_of(start)))
        width = start.world_size
        per_epoch = epoch_s if width == 1 else epoch_s * 1 * EFFICIENCY(1) / (width * EFFICIENCY(width))
        done = self.state.get(start.trial_id, 0)
        plan = {"start": start, "began": self.now, "done": done, "per_epoch": per_epoch, "epochs": epochs,
                "startup": startup, "agents": [], "move": False}
        self.running[(start.trial_id, start.attempt)] = plan
        for epoch in range(done + 1, epochs):  # as the simulator times them: epochs, then the end
            self.events.push(self.now + startup + (epoch - done) * per_epoch, "epoch", (start.trial_id, start.attempt, epoch))
        self.events.push(self.now + (startup + (epochs - done) * per_epoch), "epoch", (start.trial_id, start.attempt, epochs))

    def advance(self) -> float:
        self.now = self.events.next_time()
        while self.events and self.events.next_time() == self.now:
            _, (trial_id, attempt, epoch) = self.events.pop()
            plan = self.running.get((trial_id, attempt))
            if plan is None:
                continue  # it moved before this epoch
            self._epoch(plan, epoch)
        return self.now

    def _epoch(self, plan: dict, epoch: int) -> None:
        start: StartTrial = plan["start"]
        key = (start.trial_id, start.attempt)
        per_epoch = plan["per_epoch"]
        last = epoch == plan["epochs"]
        if not last:  # the last epoch's report comes with the end (as the simulator's end event)
            report = EpochReport(epoch, None, elapsed_s=self.now - plan["began"], epoch_s=per_epoch,
                                 train_s=per_epoch * TRAIN_SHARE)
            self.inbox.append(EpochsReported(1, start.trial_id, start.attempt, (report,)))
        if not (last or plan["move"]):
            return
        del self.running[key]
        wall = self.now - plan["began"]
        status = "completed" if last else "stopped"
        self.state[start.trial_id] = 0 if last else epoch
        result = TrialResult(status, objective=wall, epochs=epoch, wall_time_s=wall, slots=start.world_size,
                             resumed_from=plan["done"] or None,
                             failure_reason=None if last else "moving to more slots")
        ranks = [(1, 0), *plan["agents"]]
        for agent, rank in ranks:
            self.inbox.append(PartExited(agent, start.trial_id, start.attempt, rank, 0, plan["began"], self.now,
                                         result=result if rank == 0 else None))


def _config_of(start: StartTrial) -> str:
    with open(start.config_path) as fh:
        return fh.read()


def test_moves_at_the_tail_are_decided_alike(tmp_path):
    agents = EpochAgents()
    starts, suggested, _, _ = run_runtime(tmp_path, max_trials=6, sizer=ShapeSizer(), prefetch_below_s=0.0,
                                          agents=agents, malleable=True, trial_time_limit_s=TIME_LIMIT_S)
    workload = []
    for i, p in enumerate(suggested):
        epochs, epoch_s, startup = shape(p)
        workload.append(SimTrial(i, 1, startup + epochs * epoch_s, startup + epochs * epoch_s, epochs=epochs,
                                 epoch_s=epoch_s, startup_s=startup, wider_sizes=(2,), efficiency=EFFICIENCY,
                                 time_limit_s=TIME_LIMIT_S))
    config = SimConfig(nodes=NODES, gpus_per_node=SLOTS_PER_NODE, policy="load-aware", pool_factor=2.0,
                       prefetch_below_s=0.0, retries=0, malleable=True)
    simulate(workload, config, campaign_dir=tmp_path / "sim")
    ours = comparable(tmp_path / "campaign" / "journal.jsonl")
    theirs = comparable(tmp_path / "sim" / "journal.jsonl")
    moves = [e for e in ours if e["event"] == "trial_moved"]
    assert moves and all(e["size"] == 2 for e in moves)
    for move in moves:  # each continuation reports the epoch after the ones its state holds first
        after = [e for e in ours if e["event"] == "trial_progress" and e["trial_id"] == move["trial_id"]
                 and e["attempt"] == move["attempt"] + 1]
        assert after and after[0]["epoch"] == move["epochs_done"] + 1
    assert [e["event"] for e in ours] == [e["event"] for e in theirs]
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"event {i}"
