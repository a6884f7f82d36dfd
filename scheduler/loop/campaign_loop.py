"""The decisions of a campaign's rank 0, shared by the MPI runtime and the simulator.

One turn, in this order (the runtime commits between the two calls: the starts of the critical
path leave before the optimizer is asked for more)::

    start_waiting(now)   placement on the candidates already waiting -> starts
    fill(now, source)    top up the waiting candidates to pool_factor x max(free slots, slots per
                         node) from the source, within max_trials; placement again; send the next
                         trial ahead behind short single-slot ones (prefetch); take back trials sent
                         ahead when slots are idle with nothing waiting

and between turns, as they happen: :meth:`CampaignLoop.trial_progress` (a trial finished epochs:
the stopper, if the campaign has one, may ask it to stop), :meth:`CampaignLoop.trial_ended` (retry
on more slots after an out-of-memory kill, or on the same size up to ``retries``; outcome counts;
the failure threshold), :meth:`CampaignLoop.unqueued` (a trial sent ahead came back) and
:meth:`CampaignLoop.stop`.

The loop does no I/O and reads no clock: what its decisions do in the world is a
:class:`LoopActions` (the runtime journals and sends MPI messages; the simulator pushes events on
its virtual clock), and ``now`` is always an argument.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from hpo.objective import ObjectiveKey
from hpo.stoppers import Stopper
from hydragnn_ensemble.result import OOM_REASON, EpochReport, TrialResult, TrialStatus
from scheduler.loop.book import TrialBook
from scheduler.loop.outcomes import Outcomes
from scheduler.loop.trials import CandidateSource, QueuedTrial, RunningTrial, TrialSpec
from scheduler.placement.base import PlacementPolicy
from scheduler.resources import ResourcePool
from scheduler.sizing import TrialSizer


class PlacementStuckError(RuntimeError):
    """Trials wait on an idle cluster that placement will never start them on."""


@dataclass(frozen=True)
class LoopRules:
    """The campaign settings the loop decides by (a campaign's are :meth:`from_campaign`)."""

    max_trials: int
    slots_per_node: int
    pool_factor: float = 2.0
    prefetch_below_s: float = 2.0
    retries: int = 0
    retry_oom_on_more_slots: bool = True
    failure_threshold: float = 0.5
    min_trials_for_threshold: int = 8
    objective: ObjectiveKey = field(default_factory=lambda: ObjectiveKey.parse("objective"))
    max_pending: int | None = None  # a cap on the waiting candidates (the simulator's latency runs)

    @classmethod
    def from_campaign(cls, cfg, slots_per_node: int) -> "LoopRules":
        """From a :class:`hpo.campaign.CampaignConfig`."""
        return cls(max_trials=cfg.max_trials, slots_per_node=slots_per_node, pool_factor=cfg.pool_factor,
                   prefetch_below_s=cfg.prefetch_below_s, retries=cfg.retries,
                   retry_oom_on_more_slots=cfg.retry_oom_on_more_slots,
                   failure_threshold=cfg.failure_threshold,
                   min_trials_for_threshold=cfg.min_trials_for_threshold,
                   objective=ObjectiveKey.parse(cfg.objective))


class LoopActions(ABC):
    """What the loop's decisions do in the world. Each method is called once per event, in the
    order the events happen; none may call back into the loop."""

    @abstractmethod
    def suggested(self, spec: TrialSpec) -> None:
        """A new trial (attempt 0) was made from a candidate."""

    @abstractmethod
    def start(self, rt: RunningTrial) -> None:
        """A trial attempt holds ``rt.slots`` from ``rt.start_time`` on: start its processes."""

    @abstractmethod
    def send_ahead(self, queued: QueuedTrial, before: RunningTrial) -> None:
        """``queued`` is to start on ``queued.slot`` the moment ``before`` exits there."""

    @abstractmethod
    def promoted(self, queued: QueuedTrial, rt: RunningTrial, before: RunningTrial) -> None:
        """The trial sent ahead behind ``before`` started (at ``rt.start_time``)."""

    @abstractmethod
    def progressed(self, rt: RunningTrial, report: EpochReport, value: float | None) -> None:
        """``rt`` finished ``report.epoch`` epochs with the campaign objective ``value`` (None: not
        finite)."""

    @abstractmethod
    def stop_trial(self, rt: RunningTrial, reason: str) -> None:
        """Ask ``rt`` to stop after its current epoch (it then ends as ``stopped``)."""

    @abstractmethod
    def take_back(self, queued: QueuedTrial, reason: str) -> None:
        """Ask the slot's agent to drop a trial sent ahead; its answer, if it had not started it,
        comes back through :meth:`CampaignLoop.unqueued`."""

    @abstractmethod
    def ended(self, rt: RunningTrial, result: TrialResult, retry_size: int | None) -> None:
        """A trial attempt ended with ``result``; ``retry_size``: the slots of its next attempt,
        or None when this was its last."""

    @abstractmethod
    def finished(self, spec: TrialSpec, result: TrialResult, objective: float | None) -> None:
        """A trial's last attempt ended: tell the optimizer ``objective`` (None: it failed)."""


class CampaignLoop:
    """Rank 0's rules over a :class:`TrialBook`: which candidates wait, what starts, what is sent
    ahead or taken back, retries, outcomes and when the campaign stops.

    ``outcomes`` and ``next_trial_id`` carry the earlier runs of a resumed campaign, and
    ``progress_history`` (``(trial_id, epoch, value, seconds trained)`` in journal order) their
    learning curves, replayed into ``stopper`` (None: no early discarding) so that it decides as if
    never stopped."""

    def __init__(self, rules: LoopRules, pool: ResourcePool, policy: PlacementPolicy, sizer: TrialSizer,
                 actions: LoopActions, outcomes: Outcomes | None = None, next_trial_id: int = 0,
                 stopper: Stopper | None = None,
                 progress_history: Iterable[tuple[int, int, float | None, float | None]] = ()) -> None:
        self.rules = rules
        self.book = TrialBook(pool, policy, sizer, rules.prefetch_below_s)
        self.sizer = sizer
        self.actions = actions
        self.outcomes = outcomes if outcomes is not None else Outcomes()
        self.next_trial_id = next_trial_id
        self.stop_reason: str | None = None
        self.failure_message: str | None = None  # set when the failure threshold stopped the campaign
        self.stopper = stopper
        if stopper is not None:
            stopper.replay((t, epoch, self._stopper_value(value, elapsed))
                           for t, epoch, value, elapsed in progress_history)

    @property
    def stopped_by_failures(self) -> bool:
        return self.failure_message is not None

    def resubmit(self, specs: list[TrialSpec], now: float) -> None:
        """Trials of an earlier run to (re-)start first: running at its end, or suggested and not
        started yet."""
        for spec in specs:
            self.book.submit(spec, now)

    # -- a turn ------------------------------------------------------------------------------------
    def start_waiting(self, now: float) -> int:
        """Placement on the candidates already waiting; returns how many started."""
        if self.stop_reason is not None:
            return 0
        started = self.book.schedule(now)
        for rt in started:
            self.actions.start(rt)
        return len(started)

    def fill(self, now: float, source: CandidateSource) -> int:
        """Top up from ``source``, start, send ahead, take back from idle slots; returns how many
        trials started or were sent ahead. Raises :class:`PlacementStuckError` when trials wait on
        an idle cluster."""
        if self.stop_reason is not None:
            return 0
        self._top_up(now, source)
        busy = self.start_waiting(now)
        for queued, before in self.book.send_ahead(now):
            self.actions.send_ahead(queued, before)
            busy += 1
        for queued in self.book.take_back_idle():
            self.actions.take_back(queued, "a slot is idle")
        if not self.book.running and self.book.waiting:
            book = self.book
            sizes = sorted({spec.size for spec in book.waiting.values()})
            raise PlacementStuckError(
                f"placement {book.policy.name!r} starts none of {len(book.waiting)} waiting trials "
                f"(sizes {sizes}) on an idle cluster of {book.pool.num_nodes} nodes x "
                f"{book.pool.slots_per_node} slots ({book.pool.free_slots} free)")
        return busy

    def _top_up(self, now: float, source: CandidateSource) -> None:
        # never fewer than a node's worth even when every slot is busy: slots freed later are filled
        # from the waiting ones at once (before the optimizer is asked again), and placement still
        # has a choice of sizes to pack with
        rules = self.rules
        target = math.ceil(rules.pool_factor * max(self.book.pool.free_slots, rules.slots_per_node))
        if rules.max_pending is not None:
            target = min(target, rules.max_pending)
        budget = rules.max_trials - (self.outcomes.finished + self.book.open_trials)
        n = min(target - len(self.book.waiting), budget)
        if n <= 0:
            return
        for candidate in source.take(n):
            sized = self.sizer.choose(candidate.params)
            spec = TrialSpec(self.next_trial_id, dict(candidate.params), size=sized.slots,
                             suggestion_id=candidate.suggestion_id, sized=sized)
            self.next_trial_id += 1
            self.actions.suggested(spec)
            self.book.submit(spec, now)

    # -- events --------------------------------------------------------------------------------------
    def trial_progress(self, trial_id: int, attempt: int, epochs: Sequence[EpochReport]) -> None:
        """A running trial attempt finished ``epochs`` (its progress.jsonl lines); the stopper sees
        each one and may ask the trial to stop."""
        rt = self.book.running.get(trial_id)
        if rt is None or rt.spec.attempt != attempt:
            raise RuntimeError(f"progress of trial {trial_id} attempt {attempt}, which is not running")
        for report in epochs:
            epoch = report.epoch
            value = self.rules.objective.of_report(report)
            self.actions.progressed(rt, report, value)
            if value is not None and (rt.best_value is None or value < rt.best_value):
                rt.best_value, rt.best_report = value, report
            if self.stopper is None or rt.stopping is not None:
                continue
            if self.stopper.report(trial_id, epoch, self._stopper_value(value, report.elapsed_s)):
                shown = "not finite" if value is None else f"{value:.4g}"
                rt.stopping = (f"early stopping ({self.stopper.name}) after epoch {epoch}: "
                               f"{self.rules.objective.text} {shown}")
                self.actions.stop_trial(rt, rt.stopping)

    def _stopper_value(self, value: float | None, elapsed_s: float | None) -> float | tuple[float, float]:
        """What the stopper is told of one epoch (:attr:`hpo.stoppers.Stopper.objectives`): the
        campaign objective, or it and the seconds the trial has trained; NaN where not known."""
        objective = math.nan if value is None else value
        if self.stopper is not None and self.stopper.objectives == 2:
            return objective, math.nan if elapsed_s is None else float(elapsed_s)
        return objective

    def trial_ended(self, trial_id: int, result: TrialResult, now: float, ended_at: float | None = None) -> None:
        """A running trial attempt ended at ``ended_at`` (default ``now``) with ``result``."""
        rt = self.book.end(trial_id, now)
        spec = rt.spec
        self.sizer.observe(spec.params, len(rt.slots), result.wall_time_s, result.ok)
        retry_size = self._retry_size(spec, result)
        self.actions.ended(rt, result, retry_size)
        queued = self.book.promote(rt, now, min(now if ended_at is None else ended_at, now))
        if queued is not None:
            self.actions.promoted(queued, self.book.running[queued.spec.trial_id], rt)
        if retry_size is not None:
            self.book.submit(spec.next_attempt(retry_size), now)
            return
        objective = self.rules.objective.of_result(result)
        self.outcomes.record(spec.trial_id, result, objective)
        self.actions.finished(spec, result, objective)
        if self.stop_reason is None:
            message = self.outcomes.threshold_exceeded(self.rules.failure_threshold,
                                                       self.rules.min_trials_for_threshold)
            if message is not None:
                self.failure_message = message
                self.stop("failure threshold exceeded")

    def unqueued(self, after_id: int, trial_id: int, attempt: int, now: float) -> None:
        """The agent dropped a trial sent ahead before it started. At a stop it stays "suggested" (a
        later --resume with more budget starts it); otherwise it waits for a free slot again."""
        spec = self.book.unqueued(after_id, trial_id, attempt)
        if self.stop_reason is None:
            self.book.submit(spec, now)

    def stop(self, reason: str) -> None:
        """No new starts from now on: running trials finish, waiting ones are dropped (they stay
        suggested in the journal), trials sent ahead are taken back."""
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        for queued in self.book.close():
            self.actions.take_back(queued, f"campaign stopping: {reason}")

    def done(self) -> bool:
        """Nothing runs and the campaign stopped or finished ``max_trials`` trials."""
        if self.book.running:
            return False
        if self.stop_reason is None and self.outcomes.finished >= self.rules.max_trials:
            self.stop(f"max_trials ({self.rules.max_trials}) finished")
        return self.stop_reason is not None

    def _retry_size(self, spec: TrialSpec, result: TrialResult) -> int | None:
        """The size of the next attempt of a failed trial, or None for no retry."""
        if result.status != TrialStatus.FAILED or self.stop_reason is not None:
            return None
        if ((result.failure_reason or "").endswith(OOM_REASON) and self.rules.retry_oom_on_more_slots
                and not spec.oom_retried):
            bigger = self.sizer.larger_than(spec.size)
            if bigger is not None:
                spec.oom_retried = True
                return bigger
        if spec.retries_used < self.rules.retries:
            spec.retries_used += 1
            return spec.size
        return None
