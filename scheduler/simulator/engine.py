"""The discrete-event simulator: a virtual clock drives the real :class:`ResourcePool`, placement
policy, :class:`NodeHealth` and :class:`CostModel` exactly as the MPI runtime does (submit ->
schedule -> allocate; release -> finished), with trial ends as events."""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from scheduler.placement.base import PlacementPolicy, TrialRequest
from scheduler.placement.registry import make_policy
from scheduler.resources import NodeHealth, ResourcePool
from scheduler.simulator.results import SimResult, TrialRecord, summarise
from scheduler.simulator.workload import SimTrial, make_cost_model

NODE_FAILURE_REASON = "HIP error: device lost (injected node fault)"
TRIAL_FAILURE_REASON = "injected trial failure"


class SimulationError(RuntimeError):
    """The simulated campaign cannot finish (a trial that never fits the cluster)."""


@dataclass(frozen=True)
class SimConfig:
    """Cluster, policy and campaign-side knobs of one simulation."""

    nodes: int = 8192
    gpus_per_node: int = 8
    policy: str = "load-aware"
    block_nodes: int = 256
    node_group_size: int = 32
    pool_factor: float = 2.0  # pending candidates kept at pool_factor x free slots (as the runtime)
    max_pending: int | None = None
    ask_latency_s: float = 0.0  # virtual seconds per optimizer ask batch
    ask_batch: int = 64
    failure_rate: float = 0.0  # probability that an attempt fails part-way (trial's fault)
    bad_nodes: int = 0  # nodes whose trials die of a node-level error (drained by NodeHealth)
    retries: int = 2
    seed: int = 0
    estimate_error: float | None = None  # reported in sim.json (the workload carries the scatter)


@dataclass
class SimState:
    """What an invariant hook sees after every event."""

    now: float
    pool: ResourcePool
    policy: PlacementPolicy
    running: dict[int, tuple[int, ...]]  # trial id -> slots
    started: dict[int, int] = field(default_factory=dict)  # trial id -> attempts started


Hook = Callable[[SimState], None]


def simulate(trials: list[SimTrial], config: SimConfig, hook: Hook | None = None,
             policy: PlacementPolicy | None = None, progress: bool = False) -> SimResult:
    """Run the campaign ``trials`` on the simulated cluster; returns the measured result.

    ``hook`` is called with a :class:`SimState` after every event (tests check invariants there);
    ``policy`` overrides ``config.policy`` (an instance, e.g. with non-default options);
    ``progress`` shows a tqdm bar of finished trials."""
    rng = np.random.default_rng(config.seed + 7919)
    pool = ResourcePool(config.nodes, config.gpus_per_node, node_group_size=min(config.node_group_size, config.nodes))
    health = NodeHealth(pool, threshold=3)
    if policy is None:
        policy = make_policy(config.policy, block_nodes=config.block_nodes)
    model = make_cost_model(config.gpus_per_node)
    bad = set(rng.choice(config.nodes, size=min(config.bad_nodes, config.nodes), replace=False).tolist()) \
        if config.bad_nodes else set()
    spn = config.gpus_per_node
    for t in trials:
        if t.slots > spn and (t.slots % spn or t.slots // spn > config.nodes):
            raise SimulationError(f"trial {t.trial_id}: {t.slots} slots does not fit {config.nodes} nodes x {spn}")

    by_id = {t.trial_id: t for t in trials}
    queue = list(trials)  # not yet asked for, in optimizer order
    next_ask = 0
    in_flight = 0
    events: list[tuple[float, int, str, object]] = []
    seq = 0
    state = SimState(0.0, pool, policy, {})
    attempts: dict[int, int] = {}
    start_of: dict[int, float] = {}
    submit_of: dict[int, float] = {}
    size_of: dict[int, int] = {}
    records: list[TrialRecord] = []
    latencies: list[float] = []  # wall clock of each schedule() call
    cpu_times: list[float] = []  # CPU time of the same calls (robust to a shared, loaded machine)
    max_pending = 0

    def push(when: float, kind: str, payload: object) -> None:
        nonlocal seq
        heapq.heappush(events, (when, seq, kind, payload))
        seq += 1

    def top_up(now: float) -> None:
        nonlocal next_ask, in_flight
        target = math.ceil(config.pool_factor * pool.free_slots)
        if config.max_pending is not None:
            target = min(target, config.max_pending)
        n = min(target - len(policy) - in_flight, len(queue) - next_ask)
        if n <= 0:
            return
        batch = queue[next_ask: next_ask + n]
        next_ask += n
        if config.ask_latency_s > 0:
            for i in range(0, n, config.ask_batch):
                part = batch[i: i + config.ask_batch]
                in_flight += len(part)
                push(now + config.ask_latency_s * (i // config.ask_batch + 1), "arrive", part)
        else:
            for t in batch:
                submit(t, now)

    def submit(t: SimTrial, now: float) -> None:
        submit_of.setdefault(t.trial_id, now)
        policy.submit(TrialRequest(t.trial_id, t.slots, predicted_seconds=t.predicted_seconds,
                                   submit_time=now, memory_per_slot_gb=t.memory_per_slot_gb,
                                   alternatives=t.alternatives))

    from tqdm import tqdm

    bar = tqdm(total=len(trials), desc=f"simulate {policy.name}", unit="trial", disable=not progress)
    now = 0.0
    top_up(now)
    t_wall = time.perf_counter()
    while True:
        if len(policy) and pool.free_slots:
            c0, t0 = time.thread_time(), time.perf_counter()
            decisions = policy.schedule(pool, now)
            latencies.append(time.perf_counter() - t0)
            cpu_times.append(time.thread_time() - c0)
            for d in decisions:
                t = by_id[d.trial_id]
                pool.allocate(d.trial_id, d.slots)
                # a fixed block holds more slots than the trial uses; otherwise the width is the size
                width = t.slots if len(d.slots) > t.slots and policy.name == "fixed-block" else len(d.slots)
                size_of[d.trial_id] = width
                duration = t.true_seconds_at(width)
                state.running[d.trial_id] = d.slots
                attempts[d.trial_id] = attempts.get(d.trial_id, 0) + 1
                state.started[d.trial_id] = attempts[d.trial_id]
                start_of[d.trial_id] = now
                nodes = set(map(config.gpus_per_node.__rfloordiv__, d.slots))
                if nodes & bad:
                    push(now + 0.05 * duration, "fail", (d.trial_id, NODE_FAILURE_REASON))
                elif config.failure_rate and rng.random() < config.failure_rate:
                    push(now + rng.random() * duration, "fail", (d.trial_id, TRIAL_FAILURE_REASON))
                else:
                    push(now + duration, "end", d.trial_id)
        max_pending = max(max_pending, len(policy))
        state.now = now
        if hook is not None:
            hook(state)
        if not events:
            if len(policy) or next_ask < len(queue):
                raise SimulationError(
                    f"{len(policy)} trials wait on an idle cluster under {policy.name!r}: "
                    f"sizes {sorted({r.slots for r in policy.pending})}, free slots {pool.free_slots}")
            break
        now = events[0][0]
        while events and events[0][0] == now:
            _, _, kind, payload = heapq.heappop(events)
            if kind == "arrive":
                for t in payload:  # type: ignore[union-attr]
                    in_flight -= 1
                    submit(t, now)
                continue
            tid, reason = (payload, None) if kind == "end" else payload  # type: ignore[misc]
            t = by_id[tid]
            slots = pool.release(tid)
            del state.running[tid]
            policy.finished(tid, now)
            ok = kind == "end"
            health.record(slots, ok, reason)
            duration = now - start_of[tid]
            records.append(TrialRecord(tid, attempts[tid], size_of[tid], slots, submit_of[tid], start_of[tid], now, ok))
            if ok and t.features is not None:
                model.update(t.features, size_of[tid], duration)
            if not ok and attempts[tid] <= config.retries:
                submit(t, now)
            else:
                bar.update(1)
        top_up(now)
    bar.close()
    return summarise(trials, records, latencies, cpu_times, config, policy.name, pool, health, model,
                     max_pending, time.perf_counter() - t_wall)
