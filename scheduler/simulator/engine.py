"""The discrete-event simulator: a virtual clock drives the campaign runtime's own decision logic
(:class:`scheduler.loop.CampaignLoop`: top-up, placement through the real :class:`ResourcePool`
and policy, prefetch, retries, failure threshold, the :class:`NodeHealth` that drains nodes that keep
failing) with trial ends as events; the :class:`CostModel` learns from the trials' epochs."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hpo.stoppers import discarding_stopper
from hydragnn_ensemble.result import EpochPace, EpochReport, TrialResult
from hydragnn_ensemble.train.progress import PACE_AFTER_S
from scheduler.loop import AttemptEnd, CampaignLoop, LoopRules, PlacementStuckError, TrialSpec
from scheduler.placement.base import PlacementPolicy
from scheduler.placement.registry import make_policy
from scheduler.resources import ResourcePool
from scheduler.sharing import ColocationCurve, GpuSharing
from scheduler.simulator.cluster import (TRAIN_SHARE, EventQueue, SimulatedCluster, TimedPolicy, WorkloadSizer,
                                        WorkloadSource)
from scheduler.simulator.rank0 import Rank0Clock, Rank0Costs
from scheduler.simulator.trial_state import TrialStateCosts
from scheduler.simulator.record import SimRecord, sim_attempts
from scheduler.simulator.results import SimResult, summarise
from scheduler.simulator.search import OptimizerSource
from scheduler.simulator.workload import MULTIDATASET_STATS, SimTrial, make_cost_model


MAX_TURNS_PER_STEP = 4  # a turn's starts free nothing: the state settles in two


class SimulationError(RuntimeError):
    """The simulated campaign cannot finish (a trial that never fits the cluster)."""


@dataclass(frozen=True)
class SimConfig:
    """Cluster, policy and campaign-side knobs of one simulation."""

    nodes: int = 8192
    gpus_per_node: int = 8
    graphs: int = MULTIDATASET_STATS.num_graphs  # training graphs per trial epoch (the cost model's data)
    policy: str = "load-aware"
    block_nodes: int = 256
    node_group_size: int = 32
    pool_factor: float = 2.0  # waiting candidates: pool_factor x max(free slots, slots per node)
    max_pending: int | None = None
    ask_latency_s: float = 0.0  # virtual seconds per optimizer ask batch
    ask_batch: int = 64
    failure_rate: float = 0.0  # probability that an attempt fails part-way (trial's fault)
    bad_nodes: int = 0  # nodes whose trials die of a node-level error (drained by NodeHealth)
    retries: int = 2
    prefetch_below_s: float = 2.0  # as the campaign setting (trials of seconds only)
    early_stopping: str = "none"  # a stopper of hpo.stoppers (trials need learning curves)
    early_stopping_options: dict = field(default_factory=dict)
    verdict_wait: bool = True  # trials wait for the verdict at the stopper's rungs (early_stopping.verdict_wait_s > 0)
    failure_threshold: float = 0.5
    min_trials_for_threshold: int = 8
    seed: int = 0
    estimate_error: float | None = None  # reported in sim.json (the workload carries the scatter)
    reveal_epochs: bool = True  # trials report each epoch: running trials are re-estimated (the runtime does)
    malleable: bool = False  # running trials moved to more slots at an epoch boundary (campaign option malleable)
    learn_after: int = 10  # attempts learnt from before trials get their learnt prediction (the demo: 10)
    max_time_s: float | None = None  # as the campaign option: no new starts after it, running trials finish
    fill_tail: bool = False  # as the campaign option: extra trials on the slots the campaign's tail leaves idle
    max_trials: int | None = None  # the campaign's (None: every trial of the workload); fewer leaves extra ones for the tail
    gpu_sharing: GpuSharing = field(default_factory=GpuSharing)  # several small trials per GPU
    colocation: ColocationCurve | None = None  # measured aggregate throughput of k trials on one GPU
    rank0_costs: Rank0Costs | None = None  # charge rank 0's time per event (scheduler.simulator.rank0); None: free
    # the training state's write cost per epoch, restarts from it, retries that resume
    # (scheduler.simulator.trial_state; TrialStateCosts.measured() is the demo's measurement); default: free
    trial_state: TrialStateCosts = field(default_factory=TrialStateCosts)

    def __post_init__(self) -> None:
        if self.gpu_sharing.enabled and self.colocation is None:
            raise ValueError("gpu_sharing needs a co-location curve: what k trials on one GPU cost is measured, "
                             "not assumed")


@dataclass
class SimState:
    """What an invariant hook sees after every event."""

    now: float
    pool: ResourcePool
    policy: PlacementPolicy
    running: dict[int, tuple[int, ...]]  # trial id -> slots
    started: dict[int, int] = field(default_factory=dict)  # trial id -> attempts started


Hook = Callable[[SimState], None]


def simulate(trials: list[SimTrial] | OptimizerSource, config: SimConfig, hook: Hook | None = None,
             policy: PlacementPolicy | None = None, progress: bool = False,
             campaign_dir: Path | None = None) -> SimResult:
    """Run the campaign ``trials`` (ids 0..n-1, in the order the optimizer hands them out) on the
    simulated cluster; returns the measured result. ``trials`` may instead be an
    :class:`OptimizerSource`: a real optimizer suggests the trials as the campaign runs and is told
    their outcomes (its ``max_trials`` of them).

    ``hook`` is called with a :class:`SimState` after every step of the virtual clock (tests check
    invariants there); ``policy`` overrides ``config.policy`` (an instance, e.g. with non-default
    options); ``progress`` shows a tqdm bar of finished trials; ``campaign_dir``: write the campaign
    there as a campaign directory that ``report`` reads (:mod:`scheduler.simulator.record`)."""
    from tqdm import tqdm

    events = EventQueue()
    if not isinstance(trials, OptimizerSource):
        _check_workload(trials, config)
    source = trials if isinstance(trials, OptimizerSource) else \
        WorkloadSource(trials, config.ask_latency_s, config.ask_batch, events)
    by_id = source.by_id
    rng = np.random.default_rng(config.seed + 7919)
    pool = ResourcePool(config.nodes, config.gpus_per_node, node_group_size=min(config.node_group_size, config.nodes))
    timed = TimedPolicy(policy if policy is not None else make_policy(config.policy, block_nodes=config.block_nodes))
    model = make_cost_model(config.gpus_per_node, config.graphs)
    bad = set(rng.choice(config.nodes, size=min(config.bad_nodes, config.nodes), replace=False).tolist()) \
        if config.bad_nodes else set()
    stopper = discarding_stopper(config.early_stopping, dict(config.early_stopping_options))
    bar = tqdm(total=source.max_trials, desc=f"simulate {timed.name}", unit="trial", disable=not progress)

    def finished(spec: TrialSpec, result: TrialResult, objective: float | tuple[float, ...] | None) -> None:
        bar.update(1)
        source.finished(spec, result, objective)

    cluster = SimulatedCluster(by_id, events, config.gpus_per_node, timed.name == "fixed-block", bad,
                               config.failure_rate, rng, on_finished=finished,
                               report_epochs=config.reveal_epochs,
                               decision_epochs=stopper.decision_epochs if stopper and config.verdict_wait else lambda n: (),
                               colocation=config.colocation if config.gpu_sharing.enabled else None,
                               state_costs=config.trial_state)
    sizer = WorkloadSizer(by_id, model, cluster.width.__getitem__,
                          work_fraction=None if stopper is None else stopper.expected_fraction,
                          learn_after=config.learn_after)
    max_trials = source.max_trials if config.max_trials is None else min(config.max_trials, source.max_trials)
    loop = CampaignLoop(_rules(config, max_trials, source.time_limit_s), pool, timed, sizer, cluster, stopper=stopper)
    record = SimRecord(_recorded_campaign(config, timed.name, max_trials), pool.total_slots, campaign_dir)
    t_wall = time.perf_counter()
    clock = Rank0Clock(config.rank0_costs) if config.rank0_costs is not None else None
    max_pending, now = _run(loop, source, cluster, events, SimState(0.0, pool, timed.policy, {}, cluster.started), hook,
                            config.max_time_s, record, clock)
    record.close(loop.stop_reason or "", now)
    bar.close()
    attempts = sim_attempts(record.state, by_id, timed.name == "fixed-block")
    result = summarise(list(by_id.values()), attempts, timed.latencies, timed.cpu_times, config, timed.name, pool,
                       record.state.drained, model, max_pending, time.perf_counter() - t_wall, loop.repriced,
                       cluster.shared_attempts)
    result.state = record.state
    result.summary["rank0"] = clock.summary(result.summary["makespan_s"]) if clock is not None else {"charged": False}
    if record.cdir is not None:
        result.write_json(record.cdir.root / "sim.json")
    return result


def _recorded_campaign(config: SimConfig, policy: str, max_trials: int) -> dict[str, Any]:
    """What a simulated campaign's ``campaign_started`` records: the simulation's settings (not a
    campaign file: ``report`` shows what it can without one)."""
    settings = {k: v for k, v in asdict(config).items() if k not in ("gpu_sharing", "colocation")}
    settings["gpu_sharing"] = config.gpu_sharing.mode.value if config.gpu_sharing.enabled else "off"
    return {"simulated": {**settings, "policy": policy}, "max_trials": max_trials, "objective": "objective"}


def _run(loop: CampaignLoop, source: WorkloadSource | OptimizerSource, cluster: SimulatedCluster,
         events: EventQueue, state: SimState, hook: Hook | None, max_time_s: float | None,
         record: SimRecord, clock: Rank0Clock | None = None) -> tuple[int, float]:
    """Advance the virtual clock event by event until the campaign is over (after ``max_time_s``
    nothing new starts, as in the runtime), the loop's journal events into ``record``; the most
    candidates that waited at once, and the time it ended."""
    max_pending = 0
    now = 0.0
    while True:
        cluster.now = source.now = state.now = now
        if max_time_s is not None and now >= max_time_s:
            loop.stop(f"max_time_s ({max_time_s:g} s) reached")
        _settle(loop, source, now)
        _take(loop, record, clock, now)
        max_pending = max(max_pending, len(loop.book.waiting))
        if hook is not None:
            state.running = {tid: rt.slots for tid, rt in loop.book.running.items()}
            hook(state)
        if loop.done():
            return max_pending, now
        if not events:
            raise SimulationError(f"nothing runs and nothing will arrive, but the campaign is not over "
                                  f"({loop.outcomes.finished} of {source.max_trials} trials finished)")
        now = events.next_time() if clock is None else max(events.next_time(), clock.free_at)
        cluster.now = now
        while events and events.next_time() <= now:  # what arrived while rank 0 was busy: one batch
            at = events.next_time()
            if clock is not None:
                clock.waited(at, now)
            _dispatch(events.pop(), loop, cluster, source, now, at)
        _take(loop, record, clock, now)


def _take(loop: CampaignLoop, record: SimRecord, clock: Rank0Clock | None, now: float) -> None:
    """The journal events of the decisions made at ``now`` into the record (and rank 0's time)."""
    taken = loop.take_events()
    record.take(taken)
    if clock is not None:
        clock.charge(taken, now)


def _settle(loop: CampaignLoop, source: WorkloadSource | OptimizerSource, now: float) -> None:
    """Loop turns at ``now`` until one changes nothing (the runtime turns again at once after a
    turn that started or asked for something; its clock has hardly moved)."""
    def book_state() -> tuple[int, ...]:
        book = loop.book
        return len(book.waiting), len(book.running), len(book.queued), loop.next_trial_id

    for _ in range(MAX_TURNS_PER_STEP):
        before = book_state()
        try:
            loop.start_waiting(now)
            loop.fill(now, source)
        except PlacementStuckError as exc:
            raise SimulationError(str(exc)) from None
        if book_state() == before:
            return


def _check_workload(trials: list[SimTrial], config: SimConfig) -> None:
    if [t.trial_id for t in trials] != list(range(len(trials))):
        raise SimulationError("workload trial ids must be 0, 1, 2, ... in order (the loop numbers trials so)")
    spn = config.gpus_per_node
    for t in trials:
        if t.slots > spn and (t.slots % spn or t.slots // spn > config.nodes):
            raise SimulationError(f"trial {t.trial_id}: {t.slots} slots does not fit {config.nodes} nodes x {spn}")


def _rules(config: SimConfig, num_trials: int, time_limit_s: float) -> LoopRules:
    return LoopRules(max_trials=num_trials, slots_per_node=config.gpus_per_node, pool_factor=config.pool_factor,
                     prefetch_below_s=config.prefetch_below_s, retries=config.retries,
                     retry_oom_on_more_slots=False, failure_threshold=config.failure_threshold,
                     min_trials_for_threshold=config.min_trials_for_threshold, max_pending=config.max_pending,
                     trial_time_limit_s=time_limit_s, malleable=config.malleable, fill_tail=config.fill_tail,
                     gpu_sharing=config.gpu_sharing)


def _dispatch(event: tuple[str, object], loop: CampaignLoop, cluster: SimulatedCluster,
              source: WorkloadSource | OptimizerSource, now: float, at: float) -> None:
    """One event that happened at ``at``, handled by rank 0 at ``now`` (later when rank 0 was busy,
    :mod:`scheduler.simulator.rank0`)."""
    kind, payload = event
    if kind == "arrive":
        source.arrive(payload)  # type: ignore[arg-type]
        return
    if kind == "unqueued":
        loop.unqueued(*payload, now)  # type: ignore[misc]
        return
    trial_id, attempt, detail = payload  # type: ignore[misc]
    rt = loop.book.running.get(trial_id)
    if rt is None or rt.spec.attempt != attempt:
        return  # the attempt ended already (stopped, failed): its later events are void
    if kind == "pace":
        loop.trial_pace(trial_id, attempt, EpochPace(rt.spec.resume_epoch + 1, detail, PACE_AFTER_S,
                                                     at - rt.start_time), now)
    elif kind == "move":
        loop.trial_moved(trial_id, attempt, detail, now)
    elif kind == "cut":  # a stop inside an epoch: it ends with the epochs it finished
        _end(loop, cluster, rt, at, now, stopped_after=cluster.epochs_finished(rt, at)[0])
    elif kind == "epoch":
        curve = cluster.by_id[trial_id].curve
        epoch_s = cluster.epoch_s[trial_id]
        report = EpochReport(detail, curve[detail - 1] if curve else None, elapsed_s=at - rt.start_time,
                             epoch_s=epoch_s, train_s=epoch_s * TRAIN_SHARE)
        loop.trial_progress(trial_id, attempt, [report], now)
        if cluster.cut_after.get(trial_id) == detail:
            _end(loop, cluster, rt, at, now, stopped_after=detail)
        elif cluster.move_after.get(trial_id) == detail:
            loop.trial_moved(trial_id, attempt, detail, now)
    elif kind == "shared_limit":
        cluster.limit_shared(rt)
    elif kind == "shared_end":  # detail: the shared clock's version of the prediction
        if cluster.shared_clock is not None and cluster.shared_clock.is_current(trial_id, detail):
            _end(loop, cluster, rt, at, now)
    else:  # "end" or "fail" (detail: the failure reason)
        _end(loop, cluster, rt, at, now, reason=detail)


def _end(loop: CampaignLoop, cluster: SimulatedCluster, rt, at: float, now: float, reason: str | None = None,
         stopped_after: int | None = None) -> None:
    """``rt``'s processes ended at ``at`` (failed for ``reason``, or stopped after ``stopped_after``
    epochs); rank 0 learns it at ``now``."""
    cluster.leave(rt, at, failed=reason is not None)
    result = cluster.result_of(rt.spec.trial_id, reason, rt.start_time, at, stopped_after=stopped_after)
    loop.trial_ended(rt.spec.trial_id, result, now, AttemptEnd(rt.start_time, at))
