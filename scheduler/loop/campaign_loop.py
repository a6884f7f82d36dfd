"""The decisions of a campaign's rank 0, shared by the MPI runtime and the simulator.

One turn, in this order (the runtime commits between the two calls: the starts of the critical
path leave before the optimizer is asked for more)::

    start_waiting(now)   placement on the candidates already waiting -> starts
    fill(now, source)    top up the waiting candidates to pool_factor x max(free slots, slots per
                         node) (at most 8,192 beyond the free slots) from the source, within
                         max_trials; placement again; send the next
                         trial ahead behind short single-slot ones (prefetch); take back trials sent
                         ahead when slots are idle with nothing waiting

and between turns, as they happen: :meth:`CampaignLoop.trial_progress` (a trial finished epochs:
the stopper, if the campaign has one, may ask it to stop; placement re-estimates its end; the
sizer learns from it and, after its 1st, 2nd, 4th, ... lesson, the waiting trials are sized again),
:meth:`CampaignLoop.trial_ended` (retry on more slots after an out-of-memory kill, or on the same
size up to ``retries``; outcome counts; the failure threshold; a node with ``drain_after_node_failures``
node-level failures in a row is drained, :class:`scheduler.node_health.NodeHealth`), :meth:`CampaignLoop.trial_moved` (a
trial placement grew checkpointed at an epoch boundary and continues on more slots),
:meth:`CampaignLoop.unqueued` (a trial sent ahead came back) and :meth:`CampaignLoop.stop`.

A re-run of a trial (after a restart of the campaign, or a retry) may resume from the trial's
training state (:mod:`hydragnn_ensemble.train.resume`): its epochs keep counting, so its first
report tells where it resumed (:attr:`RunningTrial.first_epoch`), and its start-up and the epochs
the sizer learns from count from there. A resumed attempt of a trial the stopper had told to stop
is stopped again at its first report, without telling the stopper epochs that
:meth:`hpo.stoppers.Stopper.replay` would not tell it (a re-run from scratch is judged afresh).

Malleable trials (``LoopRules.malleable``): after each epoch a running trial is re-estimated
(its remaining epochs times its last epoch's seconds) with the wider sizes it could move to
(:meth:`TrialSizer.regrow`, the start-up it showed paid again); at the campaign's tail (nothing
waits and every trial of ``max_trials`` is out), the policy's :meth:`PlacementPolicy.grow` picks
trials to move onto the slots that would idle, which stop after their current epoch keeping their
training state and are started again, first, on that many slots.

The loop does no I/O and reads no clock; ``now`` is always an argument. Each decision gives the
typed journal events it implies (:mod:`hpo.events`: suggested, started, progress, stop requested,
ended, moved, node drained; :meth:`CampaignLoop.take_events`), so the runtime's journal and the
simulator's are written by this one author; what only the world knows of an attempt's end (its
processes' times, whether it ignored a stop) comes in with :meth:`CampaignLoop.trial_ended`. What
its decisions do in the world is a :class:`LoopActions`, I/O only (the runtime sends MPI messages
and tells the optimizer; the simulator pushes events on its virtual clock).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from hpo.events import (JournalEvent, NodeDrained, TrialExploited, TrialMoved, TrialProgress, TrialStopRequested,
                        TrialSuggested)
from hpo.objective import ObjectiveKey, Objectives
from hpo.pbt import Exploit, Exploiter, Member
from hpo.stoppers import Stopper
from hydragnn_ensemble.result import OOM_REASON, EpochPace, EpochReport, TrialResult, TrialStatus
from scheduler.cost_model import MAX_EVAL_FACTOR, EpochTimes
from scheduler.loop.book import TrialBook
from scheduler.loop.outcomes import Outcomes
from scheduler.loop.records import AttemptEnd, ended_event, started_event
from scheduler.loop.trials import Candidate, CandidateSource, QueuedTrial, RunningTrial, TrialSpec
from scheduler.node_health import NodeHealth, is_node_level_failure
from scheduler.placement.base import PlacementPolicy, RunningEstimate
from scheduler.resources import ResourcePool
from scheduler.sharing import GpuSharing
from scheduler.sizing import SizedTrial, TrialSizer


#: waiting trials sized again per turn after the cost model learnt (a whole pass at 65,536 waiting
#: trials is seconds of rank 0's time: spread over turns, it never stalls the message pump)
REPRICE_PER_TURN = 512
#: candidates taken and sized before placement runs again within one fill: the first starts of a
#: 65,536-slot wave leave after about a thousand candidates are sized, not after all of them
TOP_UP_CHUNK = 1024


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
    # what the campaign minimises: the first key orders trials and the stopper's rungs; with
    # several, the optimizer is told each trial's every objective
    objectives: Objectives = field(default_factory=lambda: Objectives.parse(["objective"]))
    max_pending: int | None = None  # a cap on the waiting candidates (the simulator's latency runs)
    # no more waiting candidates than the free slots and this many: placement chooses well among
    # 8,192, and a first wave on 65,536 GCDs then sizes 73,728 candidates, not 131,072
    max_waiting_beyond_free: int = 8192
    trial_time_limit_s: float = math.inf  # no trial runs longer (re-estimated ends stay within it)
    # running trials may be moved to more slots at an epoch boundary (campaign option ``malleable``)
    malleable: bool = False
    max_moves: int = 2  # a trial moves at most this many times (each pays its start-up again)
    # a node whose trials failed this many times in a row for a node-level reason (device,
    # interconnect, local disk) gets no more trials; 0: never drain
    drain_after_node_failures: int = 3
    # once max_trials are out, idle slots run extra trials (each predicted to reach its first
    # decision before the last regular trial ends); when no regular trial is left they are stopped
    fill_tail: bool = False
    # several small trials per GPU (scheduler.sharing; a campaign's resources.gpu_sharing)
    gpu_sharing: GpuSharing = field(default_factory=GpuSharing)
    # population-based training (optimizer ``pbt``): the exploit rule applied at each trial's epochs
    pbt: Exploiter | None = None

    @property
    def objective(self) -> ObjectiveKey:
        """The (first) objective: it orders trials and the stopper's rungs."""
        return self.objectives.primary

    @classmethod
    def from_campaign(cls, cfg, slots_per_node: int, gpu_sharing: GpuSharing | None = None) -> "LoopRules":
        """From a :class:`hpo.campaign.CampaignConfig` and its sharing rule, read from its
        ``resources`` (:meth:`scheduler.campaign_file.CheckedCampaign.sharing`; None: off)."""
        return cls(max_trials=cfg.max_trials, slots_per_node=slots_per_node, pool_factor=cfg.pool_factor,
                   prefetch_below_s=cfg.prefetch_below_s, retries=cfg.retries,
                   retry_oom_on_more_slots=cfg.retry_oom_on_more_slots,
                   failure_threshold=cfg.failure_threshold,
                   min_trials_for_threshold=cfg.min_trials_for_threshold,
                   objectives=cfg.objective_set, trial_time_limit_s=cfg.trial_time_limit_s,
                   drain_after_node_failures=cfg.drain_after_node_failures, fill_tail=cfg.fill_tail,
                   malleable=cfg.moves_trials, gpu_sharing=gpu_sharing or GpuSharing(), pbt=cfg.pbt)


class LoopActions(ABC):
    """What the loop's decisions do in the world: I/O only (the journal events they imply the loop
    makes itself, :meth:`CampaignLoop.take_events`). Each method is called once per decision, in
    the order they are made; none may call back into the loop."""

    @abstractmethod
    def start(self, rt: RunningTrial, sent_ahead: QueuedTrial | None = None) -> None:
        """A trial attempt holds ``rt.slots`` from ``rt.start_time`` on: start its processes. With
        ``sent_ahead``, it was sent ahead and its slot's agent started it when the trial it
        followed exited (nothing to launch)."""

    @abstractmethod
    def send_ahead(self, queued: QueuedTrial, before: RunningTrial) -> None:
        """``queued`` is to start on ``queued.slot`` the moment ``before`` exits there."""

    @abstractmethod
    def stop_trial(self, rt: RunningTrial, reason: str) -> None:
        """Ask ``rt`` to stop after its current epoch (it then ends as ``stopped``)."""

    @abstractmethod
    def go_on(self, rt: RunningTrial, epoch: int) -> None:
        """The stopper let ``rt`` go on after ``epoch``, one of its decision epochs (where the
        trainer waits a bounded moment for the verdict)."""

    @abstractmethod
    def move_trial(self, rt: RunningTrial, slots: int, at_boundary: bool) -> None:
        """Ask ``rt`` to checkpoint after its current epoch and exit (``at_boundary``), or to exit
        now (it has no epoch to keep and restarts from scratch): it continues on ``slots`` slots
        (its exit comes back through :meth:`CampaignLoop.trial_moved`)."""

    def exploit_trial(self, rt: RunningTrial, exploit: Exploit) -> None:
        """PBT: ask ``rt`` to stop after its current epoch; its continuation starts from trial
        ``exploit.donor_id``'s training state as it is now, with ``exploit.params`` (its exit comes
        back through :meth:`CampaignLoop.trial_moved`). A world that cannot (the simulator) keeps
        this refusal; campaigns are checked before they get here."""
        raise RuntimeError(f"{type(self).__name__} does not run population-based training (optimizer 'pbt')")

    @abstractmethod
    def take_back(self, queued: QueuedTrial, reason: str) -> None:
        """Ask the slot's agent to drop a trial sent ahead; its answer, if it had not started it,
        comes back through :meth:`CampaignLoop.unqueued`."""

    @abstractmethod
    def tell(self, spec: TrialSpec, result: TrialResult, objective: float | tuple[float, ...] | None) -> None:
        """A trial's last attempt ended: tell the optimizer ``objective`` (several for a
        multi-objective campaign; None: it failed)."""


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
        self.book = TrialBook(pool, policy, sizer, rules.prefetch_below_s, rules.gpu_sharing)
        self.sizer = sizer
        self.actions = actions
        self.outcomes = outcomes if outcomes is not None else Outcomes()
        self.next_trial_id = next_trial_id
        self.stop_reason: str | None = None
        self.failure_message: str | None = None  # set when the failure threshold stopped the campaign
        self.cannot_place: str | None = None  # set when trials wait that no node left in service can run
        self.stopper = stopper
        self._epoch_per_train = 1.2  # an epoch's seconds over its training's (evaluation adds the rest)
        self.lessons = 0  # epochs the sizer learnt from
        self.repriced = 0  # waiting trials whose size or prediction changed when they were sized again
        self.tail_closed = False  # the tail's first misfit: no more extra trials (LoopRules.fill_tail)
        self.health = NodeHealth(pool, rules.drain_after_node_failures) if rules.drain_after_node_failures else None
        self._events: list[JournalEvent] = []  # what the decisions since the last take_events() imply
        # as Stopper.replay: each trial's last reported epoch, and the trials told to stop (with the
        # epoch) since their last restart from scratch; an attempt that resumed after such an epoch
        # is stopped again, without telling the stopper epochs a replay would not tell it
        self._last_epoch: dict[int, int] = {}
        self._decided: dict[int, int] = {}
        self._latest: dict[int, tuple[int, float | None]] = {}  # PBT: each trial's last (epoch, objective)
        if stopper is not None:
            history = list(progress_history)
            self._decided = stopper.replay((t, epoch, self._stopper_value(value, elapsed))
                                           for t, epoch, value, elapsed in history)
            self._last_epoch = {t: epoch for t, epoch, _, _ in history}
        if rules.pbt is not None:  # a resumed PBT campaign ranks with the reports of its earlier runs
            self._latest = {t: (epoch, value) for t, epoch, value, _ in progress_history}

    @property
    def stopped_by_failures(self) -> bool:
        return self.failure_message is not None

    def take_events(self) -> list[JournalEvent]:
        """The journal events of the decisions made since the last call, in order (the runtime
        journals them before their messages leave; the simulator folds them into its state)."""
        events, self._events = self._events, []
        return events

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
        if self.book.repricing:  # a pass started by what the cost model learnt: the next part of it
            self.repriced += self.book.reprice(now, REPRICE_PER_TURN)
        if self.rules.malleable and self.book.pool.free_slots and self._at_tail():
            for rt in self.book.grow(now):  # trials that would end the campaign late go first
                self.actions.move_trial(rt, len(rt.moving_to.slots), at_boundary=rt.last_epoch_s is not None)
        started = self.book.schedule(now)
        for rt in started:
            self._events.append(started_event(rt, self.book.pool, now))
            self.actions.start(rt)
        return len(started)

    def _at_tail(self) -> bool:
        """Nothing waits and every trial of ``max_trials`` is out: slots freed now would idle (only
        then does a running trial grow: a slot a waiting trial could use is never taken from it on
        predictions of the waiting work, which are least sure before anything like it ran)."""
        return not self.book.waiting and self.outcomes.finished + self.book.open_trials >= self.rules.max_trials

    def fill(self, now: float, source: CandidateSource) -> int:
        """Top up from ``source``, start, send ahead, take back from idle slots; returns how many
        trials started or were sent ahead. Raises :class:`PlacementStuckError` when trials wait on
        an idle cluster."""
        if self.stop_reason is not None:
            return 0
        busy = 0
        while True:
            added = self._top_up(now, source, TOP_UP_CHUNK)
            busy += self.start_waiting(now)
            if added < TOP_UP_CHUNK or self.stop_reason is not None:
                break
        for queued, before in self.book.send_ahead(now):
            self.actions.send_ahead(queued, before)
            busy += 1
        for queued in self.book.take_back_idle():
            self.actions.take_back(queued, "a slot is idle")
        if not self.book.running and self.book.waiting:
            book = self.book
            sizes = sorted({spec.size for spec in book.waiting.values()})
            if book.pool.drained_nodes:  # the machine's fault, not placement's: stop, --resume re-runs them
                self.cannot_place = (
                    f"{len(book.waiting)} waiting trials (sizes {sizes}) do not fit the "
                    f"{book.pool.num_nodes - len(book.pool.drained_nodes)} of {book.pool.num_nodes} nodes "
                    f"left in service ({len(book.pool.drained_nodes)} drained after node-level failures)")
                self.stop(self.cannot_place)
                return busy
            raise PlacementStuckError(
                f"placement {book.policy.name!r} starts none of {len(book.waiting)} waiting trials "
                f"(sizes {sizes}) on an idle cluster of {book.pool.num_nodes} nodes x "
                f"{book.pool.slots_per_node} slots ({book.pool.free_slots} free)")
        return busy

    def _top_up(self, now: float, source: CandidateSource, limit: int) -> int:
        """Take and size up to ``limit`` candidates toward the waiting target; returns how many."""
        # never fewer than a node's worth even when every slot is busy: slots freed later are filled
        # from the waiting ones at once (before the optimizer is asked again), and placement still
        # has a choice of sizes to pack with
        rules = self.rules
        free = self.book.pool.free_slots
        target = min(math.ceil(rules.pool_factor * max(free, rules.slots_per_node)), free + rules.max_waiting_beyond_free)
        if rules.max_pending is not None:
            target = min(target, rules.max_pending)
        budget = rules.max_trials - (self.outcomes.finished + self.book.open_trials)
        if budget <= 0 and rules.fill_tail:
            self._fill_tail(now, source)
            return 0
        n = min(target - len(self.book.waiting), budget, limit)
        if n <= 0:
            return 0
        taken = source.take(n)
        for candidate in taken:
            self._submit(candidate, self.sizer.choose(candidate.params), now)
        return len(taken)

    def _submit(self, candidate: Candidate, sized: SizedTrial, now: float, extra: bool = False) -> None:
        spec = TrialSpec(self.next_trial_id, dict(candidate.params), size=sized.slots,
                         suggestion_id=candidate.suggestion_id, sized=sized, extra=extra)
        self.next_trial_id += 1
        self._events.append(TrialSuggested(time=now, trial_id=spec.trial_id, params=spec.params))
        self.book.submit(spec, now)

    def _fill_tail(self, now: float, source: CandidateSource) -> None:
        """The campaign's tail (:attr:`LoopRules.fill_tail`): while regular trials run, idle slots
        get extra trials predicted to reach their first decision before the last regular trial's
        predicted end (the first that would not closes the tail); once no regular trial is left,
        the extra ones still running are asked to stop."""
        book = self.book
        regular = [rt for rt in book.running.values() if not rt.spec.extra]
        if not regular and all(spec.extra for spec in (*book.waiting.values(), *(q.spec for q in book.queued.values()))):
            self.stop(f"max_trials ({self.rules.max_trials}) finished")  # nothing extra starts any more
            for rt in book.running.values():
                if rt.stopping is None:
                    self._stop_trial(rt, "the campaign's tail is over: its last regular trial ended", now)
            return
        free = book.pool.free_slots - sum(spec.size for spec in book.waiting.values())
        if self.tail_closed or not regular or free <= 0:
            return
        horizon = max(rt.predicted_end() for rt in regular)
        while free > 0:
            taken = source.take(1)
            if not taken:
                return
            sized = self.sizer.choose(taken[0].params)
            if now + self._first_decision_s(sized) > horizon:
                self.tail_closed = True  # this candidate is dropped: it stays an unanswered ask
                return
            self._submit(taken[0], sized, now, extra=True)
            free -= sized.slots

    def _first_decision_s(self, sized: SizedTrial) -> float:
        """Predicted seconds from a trial's start to the first epoch its stopper decides at (its
        first epoch without a stopper)."""
        epochs = sized.epochs or 1
        first = next(iter(self.stopper.decision_epochs(epochs)), 1) if self.stopper is not None else 1
        per_epoch = sized.epoch_s_at(sized.slots)
        if per_epoch is not None:
            return (sized.startup_s or 0.0) + first * per_epoch
        share = self.stopper.expected_fraction(epochs) if self.stopper is not None else 1.0
        return sized.predicted_seconds / share * min(first, epochs) / epochs  # the whole budget's share

    # -- events --------------------------------------------------------------------------------------
    def trial_progress(self, trial_id: int, attempt: int, epochs: Sequence[EpochReport], now: float) -> None:
        """A running trial attempt finished ``epochs`` (its progress.jsonl lines); the stopper sees
        each one and may ask the trial to stop; placement plans with its re-estimated end."""
        rt = self.book.running.get(trial_id)
        if rt is None or rt.spec.attempt != attempt:
            raise RuntimeError(f"progress of trial {trial_id} attempt {attempt}, which is not running")
        if epochs:
            if rt.resumed_from is None:  # its first report: a re-run that resumed reports the epoch after its state's
                rt.resumed_from = max(rt.spec.resume_epoch, epochs[0].epoch - 1)
            self._revise(rt, epochs[-1], len(epochs), now)
            last = epochs[-1]
            done = last.epoch - rt.first_epoch
            # the model learns at the attempt's epochs 1, 2, 4, 8, ... (each replaces the one before):
            # its rate early, then better measured, at log(epochs) cost to rank 0
            if last.epoch_s is not None and any(d >= 1 and d & (d - 1) == 0 for d in range(done - len(epochs) + 1, done + 1)):
                if self.sizer.observe_epoch(rt.spec.params, len(rt.slots), (trial_id, attempt),
                                            EpochTimes(rt.startup_s, last.epoch_s, last.train_s), self._node_of(rt)):
                    self._learnt(now)
        for report in epochs:
            epoch = report.epoch
            value = self.rules.objective.of_report(report)
            self._events.append(TrialProgress(time=now, trial_id=trial_id, attempt=attempt, report=report))
            if value is not None and (rt.best_value is None or value < rt.best_value):
                rt.best_value, rt.best_report = value, report
            if epoch <= self._last_epoch.get(trial_id, 0):  # a re-run from scratch: judged afresh
                self._decided.pop(trial_id, None)
            self._last_epoch[trial_id] = epoch
            if self.rules.pbt is not None:
                self._latest[trial_id] = (epoch, value)
                self._exploit(rt, epoch, now)
            if self.stopper is None or rt.stopping is not None:
                continue
            if trial_id in self._decided:  # resumed after the epoch its stop was decided at: it stands
                self._stop_trial(rt, f"early stopping ({self.stopper.name}) after epoch {self._decided[trial_id]}, "
                                     "decided before the attempt resumed", now)
                self.book.revised(RunningEstimate(trial_id, len(rt.slots), rt.predicted_end(), now), now)
            elif self.stopper.report(trial_id, epoch, self._stopper_value(value, report.elapsed_s)):
                self._decided[trial_id] = epoch
                shown = "not finite" if value is None else f"{value:.4g}"
                self._stop_trial(rt, f"early stopping ({self.stopper.name}) after epoch {epoch}: "
                                     f"{self.rules.objective.text} {shown}", now)
                self.book.revised(RunningEstimate(trial_id, len(rt.slots), rt.predicted_end(), now), now)
            elif epoch in self.stopper.decision_epochs(epoch + 1):
                self.actions.go_on(rt, epoch)

    def _exploit(self, rt: RunningTrial, epoch: int, now: float) -> None:
        """PBT after ``rt``'s ``epoch``: the exploit rule over the live population (running trials
        that are neither stopping nor leaving their slots, and not on a shared GPU); an exploited
        trial stops after this epoch and goes on from its donor's state (:meth:`trial_moved`)."""
        spec = rt.spec
        budget = spec.sized.epochs if spec.sized is not None else None
        if (rt.stopping is not None or rt.moving_to is not None or rt.exploit is not None or rt.on_shared_gpu
                or spec.trial_id in self.book.queued or (budget is not None and epoch >= budget)):
            return
        population = [Member(t, other.spec.params, *self._latest[t]) for t, other in self.book.running.items()
                      if t in self._latest and other.stopping is None and other.moving_to is None
                      and other.exploit is None]
        assert self.rules.pbt is not None
        exploit = self.rules.pbt.decide(spec.trial_id, epoch, population)
        if exploit is not None:
            rt.exploit = exploit
            self.actions.exploit_trial(rt, exploit)

    def _stop_trial(self, rt: RunningTrial, reason: str, now: float) -> None:
        """Ask ``rt`` to stop after its current epoch, for ``reason``."""
        rt.stopping = reason
        self._events.append(TrialStopRequested(time=now, trial_id=rt.spec.trial_id, attempt=rt.spec.attempt,
                                               reason=reason))
        self.actions.stop_trial(rt, reason)

    def _node_of(self, rt: RunningTrial) -> int | None:
        """The node ``rt`` runs on, None when it spans several (the cost model's per-node factors)."""
        pool = self.book.pool
        node = pool.node_of(rt.slots[0])
        return node if pool.node_of(rt.slots[-1]) == node else None

    def _learnt(self, now: float) -> None:
        """The sizer learnt from an epoch: after the 1st, 2nd, 4th, 8th, ... such lesson the
        waiting trials are sized and predicted again (:meth:`TrialBook.reprice`), so that a campaign
        whose candidates were all sized before anything ran places them on what it has learnt since,
        at log(lessons) x waiting trials' cost to rank 0."""
        self.lessons += 1
        if self.lessons & (self.lessons - 1) == 0 and self.book.waiting:
            self.book.request_reprice()
            self.repriced += self.book.reprice(now, REPRICE_PER_TURN)

    def trial_pace(self, trial_id: int, attempt: int, pace: EpochPace, now: float) -> None:
        """A running trial attempt told how fast its first epoch trains, before that epoch ends:
        placement re-estimates it (and may restart it wider at once, see ``malleable``)."""
        rt = self.book.running.get(trial_id)
        if rt is None or rt.spec.attempt != attempt:
            raise RuntimeError(f"pace of trial {trial_id} attempt {attempt}, which is not running")
        if rt.last_epoch_s is not None or not 0 < pace.done < 1 or pace.train_s <= 0:
            return  # an epoch told more already, or nothing to learn
        per_train = pace.train_s / pace.done  # the whole epoch's training
        epoch_s = rt.paced_epoch_s = min(per_train * self._epoch_per_train, self.rules.trial_time_limit_s)
        if rt.startup_s is None:
            rt.startup_s = max(0.0, now - rt.start_time - pace.train_s)
        if rt.resumed_from is None:  # the epoch in progress tells where the attempt began
            rt.resumed_from = max(rt.spec.resume_epoch, pace.epoch - 1)
        self._estimate(rt, now, epoch_s, finished=pace.epoch, to_boundary=epoch_s - pace.train_s,
                       from_scratch=rt.first_epoch == 0)

    def _revise(self, rt: RunningTrial, report: EpochReport, new_epochs: int, now: float) -> None:
        """Re-estimate a running trial from its last epoch (see :meth:`_estimate`)."""
        epoch_s = report.epoch_s
        if epoch_s is None:
            return
        epoch_s = min(epoch_s, self.rules.trial_time_limit_s)  # no epoch outlasts the limit
        if report.train_s is not None and report.train_s > 0:  # learn how much evaluation adds
            share = min(MAX_EVAL_FACTOR, max(1.0, epoch_s / report.train_s))
            self._epoch_per_train += (share - self._epoch_per_train) / 16.0
        if rt.startup_s is None and report.epoch - rt.first_epoch == new_epochs:  # its first report
            rt.startup_s = max(0.0, now - rt.start_time - epoch_s * (report.epoch - rt.first_epoch))
        rt.last_epoch_s = epoch_s
        self._estimate(rt, now, epoch_s, finished=report.epoch + 1, to_boundary=epoch_s, from_scratch=False)

    def _estimate(self, rt: RunningTrial, now: float, epoch_s: float, finished: int, to_boundary: float,
                  from_scratch: bool) -> None:
        """Tell placement a running trial's re-estimated end: the epochs it is expected to train
        (its budget, or under the stopper its expected share of it) at ``epoch_s`` seconds each,
        ``finished`` of them done ``to_boundary`` seconds from now; within its time limit. Under
        ``malleable`` with the sizes it could move to, paying its start-up again: at that epoch
        boundary from its checkpoint, or (``from_scratch``, no epoch done yet) now, from the start."""
        spec = rt.spec
        epochs = spec.sized.epochs if spec.sized is not None else None
        if epochs is None or rt.stopping is not None or rt.moving_to is not None or rt.exploit is not None:
            return
        growable = (self.rules.malleable and rt.startup_s is not None and spec.moves < self.rules.max_moves
                    and spec.trial_id not in self.book.queued)
        planned = epochs if self.stopper is None else self._planned_epochs(epochs, finished)
        after = max(planned - finished, 0.0)  # epochs left after the boundary
        limit_at = rt.start_time - spec.time_used_s + self.rules.trial_time_limit_s
        rt.revised_end = min(now + to_boundary + after * epoch_s, limit_at)
        wider: tuple[tuple[int, float], ...] = ()
        boundary = now + to_boundary
        if growable:
            restart = rt.startup_s
            options = self.sizer.regrow(spec.params, len(rt.slots), epoch_s)
            if from_scratch:
                boundary = now
                wider = tuple((n, min(now + restart + planned * seconds, limit_at)) for n, seconds in options)
            elif after >= 1:
                wider = tuple((n, min(boundary + restart + after * seconds, limit_at)) for n, seconds in options)
        self.book.revised(RunningEstimate(spec.trial_id, len(rt.slots), rt.revised_end, boundary, wider), now)

    def _planned_epochs(self, epochs: int, finished: float) -> float:
        """Epochs a running trial is expected to train under the stopper: its expected share of
        ``epochs``, but at least up to its next decision epoch (all of them past the last one)."""
        assert self.stopper is not None
        ahead = [e for e in self.stopper.decision_epochs(epochs) if e >= finished]
        return max(1.0, epochs * self.stopper.expected_fraction(epochs), ahead[0] if ahead else epochs)

    def _stopper_value(self, value: float | None, elapsed_s: float | None) -> float | tuple[float, float]:
        """What the stopper is told of one epoch (:attr:`hpo.stoppers.Stopper.objectives`): the
        campaign objective, or it and the seconds the trial has trained; NaN where not known."""
        objective = math.nan if value is None else value
        if self.stopper is not None and self.stopper.objectives == 2:
            return objective, math.nan if elapsed_s is None else float(elapsed_s)
        return objective

    def trial_ended(self, trial_id: int, result: TrialResult, now: float, end: AttemptEnd | None = None) -> None:
        """A running trial attempt ended with ``result``; ``end``: how its processes ended (default:
        they ran from its start to ``now`` and obeyed any stop request)."""
        rt = self.book.end(trial_id, now)
        spec = rt.spec
        end = end if end is not None else AttemptEnd(rt.start_time, now)
        resumed = result.resumed_from or 0  # an attempt that resumed trained the epochs after its state's
        trained = result.epochs - resumed
        self.sizer.observe(spec.params, len(rt.slots), result.wall_time_s, result.ok and (trained > 0 or not resumed),
                           trained or None, self._node_of(rt))
        retry_size = self._retry_size(spec, result)
        self._events.append(ended_event(rt, result, retry_size, end, now))
        if self.health is not None:  # a stopped trial did what was asked of it
            for report in self.health.record(rt.slots, result.status != TrialStatus.FAILED,
                                             result.failure_reason):
                self._events.append(NodeDrained(time=now, node=report.node, hostname=report.hostname,
                                                failures=report.failures, reason=report.last_reason))
        queued = self.book.promote(rt, now, min(end.ended_at, now))
        if queued is not None:
            started = self.book.running[queued.spec.trial_id]
            self._events.append(started_event(started, self.book.pool, now, queued_after=spec.trial_id))
            self.actions.start(started, sent_ahead=queued)
        if retry_size is not None:  # after a node-level failure, elsewhere where it fits
            bad = {self.book.pool.node_of(s) for s in rt.slots} if is_node_level_failure(result.failure_reason) else ()
            self.book.submit(spec.next_attempt(retry_size, frozenset(bad)), now)
            return
        self.outcomes.record(spec.trial_id, result, self.rules.objective.of_result(result))
        self.actions.tell(spec, result, self.rules.objectives.of_result(result))
        if self.stop_reason is None:
            message = self.outcomes.threshold_exceeded(self.rules.failure_threshold,
                                                       self.rules.min_trials_for_threshold)
            if message is not None:
                self.failure_message = message
                self.stop("failure threshold exceeded")

    def trial_moved(self, trial_id: int, attempt: int, epochs_done: int, now: float) -> None:
        """A trial asked to move (:meth:`LoopActions.move_trial`) left its slots after
        ``epochs_done`` epochs (from its checkpoint; 0: from scratch): it starts again at once on the
        slots it was given. A trial whose epochs were all done ends through :meth:`trial_ended`."""
        rt = self.book.running.get(trial_id)
        if rt is not None and rt.spec.attempt == attempt and rt.exploit is not None:
            self._exploited(rt, now)
            return
        if rt is None or rt.spec.attempt != attempt or rt.moving_to is None:
            raise RuntimeError(f"trial {trial_id} attempt {attempt} moved, but no move was asked of it")
        spec, size = rt.spec, len(rt.moving_to.slots)
        per_epoch = rt.last_epoch_s or rt.paced_epoch_s or 0.0
        there = dict(self.sizer.regrow(spec.params, len(rt.slots), per_epoch)).get(size, per_epoch)
        sized = self._continuation(rt, size, epochs_done, there)
        next_spec = spec.moved(size, epochs_done, now - rt.start_time, sized)  # one time limit for all moves
        self._events.append(TrialMoved(time=now, trial_id=trial_id, attempt=attempt, epochs_done=epochs_done,
                                       size=size))
        started = self.book.move(next_spec, now)
        self._events.append(started_event(started, self.book.pool, now))
        self.actions.start(started)

    def _exploited(self, rt: RunningTrial, now: float) -> None:
        """PBT: ``rt`` stopped for its exploit; its continuation (same slots, the donor's state and
        the exploit's parameters) starts at once."""
        spec, exploit = rt.spec, rt.exploit
        assert exploit is not None
        sized = self._continuation(rt, len(rt.slots), exploit.donor_epoch, rt.last_epoch_s or rt.paced_epoch_s or 0.0)
        next_spec = spec.exploited(exploit, now - rt.start_time, sized)
        self._events.append(TrialExploited(time=now, trial_id=spec.trial_id, attempt=spec.attempt, epoch=exploit.epoch,
                                           donor_id=exploit.donor_id, donor_epoch=exploit.donor_epoch,
                                           params=dict(exploit.params)))
        self._latest.pop(spec.trial_id, None)  # ranked again from its continuation's first report
        started = self.book.restart(next_spec, now)
        self._events.append(started_event(started, self.book.pool, now))
        self.actions.start(started)

    @staticmethod
    def _continuation(rt: RunningTrial, size: int, epochs_done: int, epoch_s: float) -> SizedTrial:
        """What ``rt``'s continuation after ``epochs_done`` epochs is predicted to take on ``size``
        slots at ``epoch_s`` seconds per epoch: the start-up it showed, again, and its epochs left."""
        budget = rt.spec.sized.epochs if rt.spec.sized is not None else None
        left = max(1, (budget or epochs_done + 1) - epochs_done)
        return SizedTrial(size, (rt.startup_s or 0.0) + left * epoch_s, epochs=budget)

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
