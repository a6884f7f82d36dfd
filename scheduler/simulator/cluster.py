"""The simulated world the campaign loop acts on: a virtual clock's event queue, agents that run
each trial for its true duration (and start a trial sent ahead the moment the one before it ends),
report each epoch of a trial (its learning curve's value, and the epoch's true seconds) and stop it
after the next epoch when asked, an
optimizer that hands out the workload's trials in order, and the workload's own sizes."""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hydragnn_ensemble.result import TrialResult, TrialStatus
from hydragnn_ensemble.train.progress import PACE_AFTER_S
from scheduler.cost_model import CostModel, EpochTimes
from scheduler.loop import LoopActions, QueuedTrial, RunningTrial, TrialSpec
from scheduler.placement.base import PlacementPolicy
from scheduler.resources import ResourcePool
from scheduler.sharing import ColocationCurve
from scheduler.simulator.trial_state import TrialStateCosts
from scheduler.simulator.shared_clock import SharedClock
from scheduler.simulator.workload import SimTrial
from scheduler.sizing import SizedTrial, wider_epochs

NODE_FAILURE_REASON = "HIP error: device lost (injected node fault)"
TRAIN_SHARE = 0.85  # of a simulated epoch, training; the rest is its evaluation passes
TRIAL_FAILURE_REASON = "injected trial failure"
STOP_LATENCY_S = 1.0  # a stop request to the trainer's in-epoch stop (the demo's stop path: 0.2-0.5 s)
WORKLOAD_KEY = "workload_trial"  # the parameter a simulated candidate carries: its workload trial id


class EventQueue:
    """Events on the virtual clock, in time order (ties: the order they were pushed)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, Any]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, when: float, kind: str, payload: Any) -> None:
        heapq.heappush(self._heap, (when, self._seq, kind, payload))
        self._seq += 1

    def next_time(self) -> float:
        return self._heap[0][0]

    def pop(self) -> tuple[str, Any]:
        _, _, kind, payload = heapq.heappop(self._heap)
        return kind, payload


@dataclass(frozen=True)
class SimCandidate:
    """A workload trial handed out as an optimizer suggestion."""

    params: dict[str, Any]
    suggestion_id: int


class WorkloadSource:
    """The workload's trials in order, as an optimizer with ``latency_s`` per ask of ``batch``
    candidates: what is asked for arrives that much later (an ``arrive`` event)."""

    def __init__(self, trials: list[SimTrial], latency_s: float, batch: int, events: EventQueue) -> None:
        self.trials = trials
        self.by_id = {t.trial_id: t for t in trials}
        self.max_trials = len(trials)
        self.time_limit_s = max((t.time_limit_s for t in trials), default=math.inf)  # the longest any trial may run
        self.latency_s = latency_s
        self.batch = batch
        self.events = events
        self.now = 0.0
        self._next = 0  # the next trial not yet asked for
        self._arrived: list[SimTrial] = []
        self._in_flight = 0

    def take(self, n: int) -> list[SimCandidate]:
        got, self._arrived = self._arrived[:n], self._arrived[n:]
        if self.latency_s <= 0:
            got += self._ask(n - len(got))
        else:
            missing = n - len(got) - self._in_flight
            asked = self._ask(missing)
            for i in range(0, len(asked), self.batch):
                part = asked[i:i + self.batch]
                self._in_flight += len(part)
                self.events.push(self.now + self.latency_s * (i // self.batch + 1), "arrive", part)
        return [SimCandidate({WORKLOAD_KEY: t.trial_id}, t.trial_id) for t in got]

    def arrive(self, trials: list[SimTrial]) -> None:
        self._in_flight -= len(trials)
        self._arrived.extend(trials)

    def finished(self, spec: TrialSpec, result: TrialResult, objective: float | tuple[float, ...] | None) -> None:
        """Nothing to tell: the workload's order does not depend on the outcomes."""

    def _ask(self, n: int) -> list[SimTrial]:
        if n <= 0:
            return []
        asked = self.trials[self._next:self._next + n]
        self._next += len(asked)
        return asked


class WorkloadSizer:
    """The sizer protocol over the workload's own sizes (the workload was sized by the real cost
    model and sizer); finished trials still teach ``model`` (its error goes into sim.json).

    Learning is modelled by the workload: once the epochs of ``learn_after`` attempts were learnt
    from, a trial sized (or sized again, :meth:`scheduler.loop.TrialBook.reprice`) gets its
    ``learnt_seconds`` prediction at its own size and wider ones scaled alike (the simulator keeps
    each trial's width: its truth is defined there)."""

    def __init__(self, by_id: dict[int, SimTrial], model: CostModel, width_of: Callable[[int], int],
                 work_fraction: Callable[[int], float] | None = None, learn_after: int = 10) -> None:
        self.by_id = by_id
        self.model = model
        self.width_of = width_of  # slots a trial's last attempt used
        self.work_fraction = work_fraction  # expected share of its epochs a trial trains (a stopper's)
        self.learn_after = learn_after
        self._taught: set[tuple[int, int]] = set()  # attempts whose epochs were learnt from

    def choose(self, params: dict[str, Any]) -> SizedTrial:
        t = self.by_id[params[WORKLOAD_KEY]]
        budget = t.features.num_epoch if t.features is not None else t.epochs  # what its config says
        scale = 1.0
        if t.learnt_seconds is not None and len(self._taught) >= self.learn_after:
            scale = t.learnt_seconds / t.predicted_seconds
        if self.work_fraction is not None and t.curve is not None:
            scale *= self.work_fraction(budget)
        return SizedTrial(t.slots, t.predicted_seconds * scale, tuple((n, sec * scale) for n, sec in t.alternatives),
                          epochs=budget, memory_gb=t.memory_per_slot_gb,
                          utilisation=None if t.features is None else self.model.utilisation_alone(t.features))

    def size(self, params: dict[str, Any]) -> tuple[int, float]:
        t = self.by_id[params[WORKLOAD_KEY]]
        return t.slots, t.predicted_seconds

    def observe_epoch(self, params: dict[str, Any], slots: int, attempt: tuple[int, int], times: EpochTimes,
                      node: int | None = None) -> bool:
        """Count the attempt as learnt from when the workload models learning (True: predictions
        may have changed); ``model`` itself learns from finished trials only, so its recorded error
        is each whole trial's."""
        if self.by_id[params[WORKLOAD_KEY]].learnt_seconds is None:
            return False
        self._taught.add(attempt)
        return True

    def observe(self, params: dict[str, Any], slots: int, wall_time_s: float, ok: bool,
                epochs: int | None = None, node: int | None = None) -> None:
        t = self.by_id[params[WORKLOAD_KEY]]
        if ok and t.features is not None:
            self.model.update(t.features, self.width_of(t.trial_id), wall_time_s, node=node)

    def larger_than(self, slots: int) -> int | None:
        return None  # no out-of-memory kills in the simulator

    def regrow(self, params: dict[str, Any], slots: int, epoch_s: float) -> tuple[tuple[int, float], ...]:
        t = self.by_id[params[WORKLOAD_KEY]]
        if t.efficiency is None:
            return ()
        return wider_epochs([n for n in t.wider_sizes if n > slots], slots, epoch_s, t.efficiency)


class TimedPolicy:
    """A placement policy whose ``schedule`` calls are timed (wall clock and CPU); every other
    attribute is the policy's own."""

    def __init__(self, policy: PlacementPolicy) -> None:
        self.policy = policy
        self.latencies: list[float] = []
        self.cpu_times: list[float] = []

    def schedule(self, pool: ResourcePool, now: float):
        c0, t0 = time.thread_time(), time.perf_counter()
        decisions = self.policy.schedule(pool, now)
        self.latencies.append(time.perf_counter() - t0)
        self.cpu_times.append(time.thread_time() - c0)
        return decisions

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)


class SimulatedCluster(LoopActions):
    """The loop's actions on the virtual clock: a started attempt ends (or fails: a bad node, an
    injected failure) after its true duration; a trial sent ahead starts when the one before it
    ends; a trial asked back is always dropped (it had not started). What happened is the loop's
    journal events (:mod:`scheduler.simulator.record`), as in the runtime."""

    def __init__(self, by_id: dict[int, SimTrial], events: EventQueue, slots_per_node: int, fixed_block: bool, bad_nodes: set[int], failure_rate: float,
                 rng: np.random.Generator, on_finished: Callable[[TrialSpec, TrialResult, Any], None],
                 report_epochs: bool = True,
                 decision_epochs: Callable[[int], tuple[int, ...]] = lambda max_epochs: (),
                 colocation: ColocationCurve | None = None, state_costs: TrialStateCosts = TrialStateCosts()) -> None:
        self.by_id = by_id
        self.state_costs = state_costs  # the training state's write cost, restarts, resumed retries
        self.events = events
        self.slots_per_node = slots_per_node
        self.fixed_block = fixed_block
        self.bad_nodes = bad_nodes
        self.failure_rate = failure_rate
        self.rng = rng
        self.on_finished = on_finished
        self.report_epochs = report_epochs  # push an event per epoch (the stopper and the re-estimation listen)
        self.decision_epochs = decision_epochs  # a trial's budget -> the epochs where its trainer waits for the verdict
        # trials on shared GPUs progress at the co-location curve's rate for their GPU's residents
        self.shared_clock = None if colocation is None else SharedClock(colocation, self._push_shared_end)
        self.shared_attempts = 0  # attempts started on a shared GPU
        self.now = 0.0
        self.epoch_s: dict[int, float] = {}  # seconds per epoch of each trial's current attempt
        self.last_epoch: dict[int, int] = {}  # the epoch its current attempt ends after, if not stopped
        self.cut_after: dict[int, int] = {}  # a stopped trial ends after this many epochs
        self.move_after: dict[int, int] = {}  # a trial moving to more slots exits after this many
        self.stopped: set[int] = set()
        self.width: dict[int, int] = {}  # slots each trial's current attempt uses
        self.started: dict[int, int] = {}  # attempts started per trial
        self.began_after: dict[int, int] = {}  # epochs done before each trial's current attempt (its state's)
        self.startup: dict[int, float] = {}  # start-up of each trial's current attempt
        self.state_epochs: dict[int, int] = {}  # epochs in the state a failed attempt left (resumed retries)

    def _push_shared_end(self, when: float, trial_id: int, version: int) -> None:
        self.events.push(when, "shared_end", (trial_id, self.started[trial_id] - 1, version))

    def start(self, rt: RunningTrial, sent_ahead: QueuedTrial | None = None) -> None:
        """The attempt runs for its true duration from ``rt.start_time`` (a trial sent ahead: from
        the end of the one before it, when the slot's virtual agent started it)."""
        t = self.by_id[rt.spec.trial_id]
        # a fixed block holds more slots than the trial uses; otherwise the width is its size
        width = t.slots if self.fixed_block and len(rt.slots) > t.slots else len(rt.slots)
        self.width[t.trial_id] = width
        self.started[t.trial_id] = rt.spec.attempt + 1
        # a moved trial continues from its state (start-up paid again), and so does a retry where
        # the failed attempt left one
        done = rt.spec.resume_epoch or self.state_epochs.pop(t.trial_id, 0)
        costs = self.state_costs
        startup = self.startup[t.trial_id] = t.startup_s + (costs.restart_extra_s if done else 0.0)
        factor = 1.0 + costs.checkpoint_share
        duration, self.last_epoch[t.trial_id] = t.attempt(width, done, rt.spec.time_used_s, factor,
                                                          startup if done else None)
        self.began_after[t.trial_id] = done
        begin = rt.start_time
        key = (t.trial_id, rt.spec.attempt)
        self.cut_after.pop(t.trial_id, None)
        self.move_after.pop(t.trial_id, None)
        self.epoch_s[t.trial_id] = epoch_s = t.true_epoch_s(width) * factor
        if rt.on_shared_gpu:
            self._start_shared(rt, duration)
            return
        if self.report_epochs and PACE_AFTER_S < 0.5 * epoch_s * TRAIN_SHARE:
            at = begin + startup + PACE_AFTER_S  # a long first epoch tells its pace early
            if at < begin + duration:
                self.events.push(at, "pace", (*key, PACE_AFTER_S / (epoch_s * TRAIN_SHARE)))
        if self.report_epochs and t.epochs > 1:  # every epoch is reported: the campaign re-estimates it
            for epoch in range(done + 1, self.last_epoch[t.trial_id] + 1):
                at = begin + startup + (epoch - done) * epoch_s
                if at >= begin + duration:
                    break  # its last epoch: its end event says so
                self.events.push(at, "epoch", (*key, epoch))
        if not self._push_failure(rt, duration):
            self.events.push(begin + duration, "end", (*key, None))

    def _push_failure(self, rt: RunningTrial, duration: float) -> bool:
        """Whether the attempt fails (a bad node, an injected failure): its fail event is pushed."""
        key, begin = (rt.spec.trial_id, rt.spec.attempt), rt.start_time
        if {s // self.slots_per_node for s in rt.slots} & self.bad_nodes:
            self.events.push(begin + 0.05 * duration, "fail", (*key, NODE_FAILURE_REASON))
        elif self.failure_rate and self.rng.random() < self.failure_rate:
            self.events.push(begin + self.rng.random() * duration, "fail", (*key, TRIAL_FAILURE_REASON))
        else:
            return False
        return True

    def _start_shared(self, rt: RunningTrial, duration: float) -> None:
        """A trial on a shared GPU: its end from the shared clock, or a failure (no epoch events)."""
        assert self.shared_clock is not None, "a trial on a shared GPU needs the co-location curve"
        self.shared_attempts += 1
        self._push_failure(rt, duration)
        self.shared_clock.join(rt.spec.trial_id, rt.slots[0], duration, rt.start_time)
        limit = self.by_id[rt.spec.trial_id].time_limit_s - rt.spec.time_used_s
        if math.isfinite(limit):
            self.events.push(rt.start_time + max(limit, 0.0), "shared_limit", (rt.spec.trial_id, rt.spec.attempt, None))

    def limit_shared(self, rt: RunningTrial) -> None:
        """A trial on a shared GPU reached its time limit (sharing stretched it): like the trainer,
        it ends after the epoch in progress, a timeout with fewer epochs (unless it ends by then)."""
        assert self.shared_clock is not None
        tid = rt.spec.trial_id
        t = self.by_id[tid]
        per_epoch = t.true_epoch_s(1)
        done = self.shared_clock.work_done(tid, self.now)
        in_progress = math.floor(max(done - t.startup_s, 0.0) / per_epoch) + 1 if per_epoch > 0 else t.epochs
        if in_progress < self.last_epoch[tid]:
            self.last_epoch[tid] = in_progress
            self.shared_clock.end_after(tid, t.startup_s + in_progress * per_epoch, self.now)

    def send_ahead(self, queued: QueuedTrial, before: RunningTrial) -> None:
        pass  # the slot's virtual agent starts it when ``before`` ends (start with ``sent_ahead``)

    def go_on(self, rt: RunningTrial, epoch: int) -> None:
        """Nothing to do: the verdict's round trip (milliseconds to rank 0 and back) is not modelled."""

    def stop_trial(self, rt: RunningTrial, reason: str) -> None:
        """At one of the stopper's decision epochs the trainer waited for this verdict: it ends at
        the epoch. Elsewhere (a stopper that decides anywhere, or no wait; the end of the campaign's
        tail) the trainer ends inside the epoch it is in, ``STOP_LATENCY_S`` later, with the epochs
        it finished (the part of the epoch it trained is held, not needed)."""
        t = self.by_id[rt.spec.trial_id]
        done, at_boundary = self.epochs_finished(rt)
        self.stopped.add(t.trial_id)
        if at_boundary and done in self.decision_epochs(t.epochs):
            self.cut_after[t.trial_id] = done
        else:
            self.events.push(self.now + STOP_LATENCY_S, "cut", (t.trial_id, rt.spec.attempt, None))

    def epochs_finished(self, rt: RunningTrial, at: float | None = None) -> tuple[int, bool]:
        """Epochs a running trial has finished by ``at`` (default now), and whether that is the end
        of one."""
        t = self.by_id[rt.spec.trial_id]
        tid = t.trial_id
        x = max((self.now if at is None else at) - rt.start_time - self.startup[tid], 0.0) / self.epoch_s[tid] if self.epoch_s[tid] > 0 else 0.0
        done = math.floor(x + 1e-9)
        return min(self.began_after[tid] + done, self.last_epoch[tid]), abs(x - round(x)) < 1e-9 and x > 0

    def move_trial(self, rt: RunningTrial, slots: int, at_boundary: bool) -> None:
        """The trainer checkpoints after its next epoch and exits (unless that was its last), or
        exits now (it restarts from scratch)."""
        t = self.by_id[rt.spec.trial_id]
        if at_boundary:
            # the epoch in progress is finished first (a trainer reads the request after its epoch)
            self.move_after[t.trial_id] = min(self.epochs_finished(rt)[0] + 1, t.epochs)
        else:
            self.events.push(self.now, "move", (t.trial_id, rt.spec.attempt, rt.spec.resume_epoch))

    def take_back(self, queued: QueuedTrial, reason: str) -> None:
        self.events.push(self.now, "unqueued", (queued.after[0], queued.spec.trial_id, queued.spec.attempt))

    def leave(self, rt: RunningTrial, at: float, failed: bool = False) -> None:
        """An attempt ended at ``at``: a shared GPU's other residents speed up. One that ``failed``
        leaves its state after the epochs it finished for its retry (``resume_retries``)."""
        if rt.on_shared_gpu and self.shared_clock is not None:
            self.shared_clock.leave(rt.spec.trial_id, at)
        elif failed and self.state_costs.resume_retries:
            self.state_epochs[rt.spec.trial_id] = self.epochs_finished(rt, at)[0]

    def tell(self, spec: TrialSpec, result: TrialResult, objective: float | tuple[float, ...] | None) -> None:
        self.on_finished(spec, result, objective)

    def result_of(self, trial_id: int, reason: str | None, start_time: float, end_time: float,
                  stopped_after: int | None = None) -> TrialResult:
        """What a simulated attempt reports: ``stopped`` after ``stopped_after`` epochs, else
        ``completed`` (``timeout`` when its time limit ended it first); for a trial with a learning
        curve its best value over the epochs it trained, otherwise its run time (the simulator
        trains nothing)."""
        wall = end_time - start_time
        width = self.width[trial_id]
        if reason is not None:
            return TrialResult(status=TrialStatus.FAILED, failure_reason=reason, wall_time_s=wall, slots=width)
        t = self.by_id[trial_id]
        trained = self.last_epoch[trial_id] if stopped_after is None else stopped_after
        if stopped_after is not None:
            status = TrialStatus.STOPPED
        else:
            status = TrialStatus.COMPLETED if trained >= t.epochs else TrialStatus.TIMEOUT
        if t.curve is None:
            objective = wall
        else:
            objective = min(t.curve[:trained]) if trained else None
        return TrialResult(status=status, objective=objective, epochs=trained, wall_time_s=wall, slots=width,
                           resumed_from=self.began_after.get(trial_id) or None)
