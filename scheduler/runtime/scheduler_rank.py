"""Rank 0 of a campaign: the MPI side of :class:`scheduler.loop.CampaignLoop` (which decides what
starts, waits, is sent ahead, retried or taken back, and makes the journal events of its decisions):
the message pump (start messages, the agents' reports), committing the loop's events to the
journal, trial directories, the progress line and results.csv.

One loop, single-threaded (a syncer thread only fsyncs the journal)::

    receive PartExited reports (finish a trial when all its processes reported; kill the rest of a
        multi-slot trial when one of its processes failed)
    policy.schedule(pool) on the candidates already waiting -> allocate slots, journal trial_started
    commit: write this turn's events to the journal, send the start messages (a new trial's agents
        write its config.json), tell the optimizer the outcomes
    top up the placement queue to pool_factor x max(free slots, slots per node) from the
        CandidatePool (never waits for the optimizer: the pool asks in batches); schedule
    prefetch: a single-slot trial predicted to take at most ``prefetch_below_s`` gets its slot's next
        trial sent ahead (``StartTrial.after``): its agent starts it the moment the first one exits
    commit again
    every few seconds: progress line, results.csv
    sleep a moment only when nothing happened (0.2 ms soon after activity, else 1 ms: polling.py)

A trial sent ahead is journaled as ``trial_started`` (with ``queued_after``) when rank 0 learns that
it started (the exit report of the trial it follows). A stop (time budget, failure threshold) takes
back the trials sent ahead that have not started (:class:`Unqueue`), and so does a slot left idle
with nothing waiting (the trial it would run sits behind one that runs longer than predicted): the
trial taken back waits for a free slot again. Only first attempts are sent
ahead: if a crash comes between such a start and its journal line, the trial is still "suggested" in
the journal and a resume starts it again as attempt 0 (its files set aside as ``*.lost.*``), as
for a directory a crashed run left behind. Every end event
carries ``started_at`` / ``ended_at``, when the trial's processes ran (the agents' clocks): what
reports and results.csv show, so a trial sent ahead does not seem to overlap the one it followed.

The journal lines are written before a turn's start messages leave and fsync'ed by a background
thread (see :mod:`hpo.journal_writer`): rank 0 never waits for the disk. A crash of
the machine loses at most the last unsynced lines, which after ``--resume`` looks exactly like a
crash a moment earlier (those trials are re-run).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from hpo.campaign_dir import CampaignDir
from hpo.failures import failure_counts
from hpo.events import CampaignFinished, JournalEvent, NodeDrained, TrialProgress
from hpo.results_table import ResultsTableError
from hpo.session import CampaignSession
from hpo.pbt import Exploit
from hpo.stoppers import Stopper
from hpo.time_budget import overrun_note
from hydragnn_ensemble.config import ConfigError, epoch_budget
from hydragnn_ensemble.result import HeadMetrics, TrialResult, TrialStatus
from hydragnn_ensemble.run_dir import CHECKPOINT_NAME, RunDir
from hydragnn_ensemble.untrusted_files import is_regular_file, move_aside, remove_any, write_atomic
from scheduler.budget_check import BudgetWatch
from scheduler.loop import (AttemptEnd, CampaignLoop, LoopActions, LoopRules, Outcomes, PlacementStuckError,
                            QueuedTrial, RunningTrial, TrialSpec)
from scheduler.placement.base import PlacementPolicy
from scheduler.runtime.layout import ClusterLayout
from scheduler.runtime.messages import (
    TAG_KILL,
    TAG_SHUTDOWN,
    TAG_START,
    TAG_STOP,
    TAG_UNQUEUE,
    GoOn,
    KillTrial,
    MoveTrial,
    PartExited,
    Shutdown,
    StartTrial,
    StopTrial,
    EpochsReported,
    Unqueue,
    Unqueued,
)
from scheduler.runtime.polling import Backoff
from scheduler.runtime.progress import ProgressLine, ProgressSnapshot
from scheduler.runtime.slot_usage import SlotUsage
from scheduler.runtime.state_link import link_state
from scheduler.runtime.faults import InfrastructureFault, infrastructure_cause, remedy
from scheduler.runtime.launch import kill_margin_s
from scheduler.runtime.outcome import merge_parts
from scheduler.runtime.trial_process import IGNORED_STOP
from scheduler.runtime.transport import Transport
from scheduler.sharing import GpuSharing
from scheduler.sizing import TrialSizer

RESULTS_CSV_EVERY_S = 5.0
# start messages that leave at once, with their journal lines, however many more the turn places: a
# first wave of 65,536 trials starts streaming after the first batch, not after the whole wave
START_BATCH = 512


@dataclass
class CampaignSummary:
    """How a run of a campaign ended."""

    reason: str
    finished: int
    failed: int
    statuses: dict[str, int]
    best_objective: float | None
    best_trial: int | None
    elapsed_s: float
    stopped_by_failures: bool = False
    failure_message: str | None = None
    cannot_place: str | None = None  # why trials waited that no node left in service could run
    rank0_busy_s: float = 0.0  # time rank 0 spent deciding, journaling and messaging (not sleeping)
    trial_process_s: float = 0.0  # sum of the wall times of all trial processes of this run
    slot_seconds: float = 0.0  # usable slots x elapsed
    journal_fsyncs: int = 0  # batches the journal writer fsync'ed during this run
    failure_reasons: list[tuple[str, int]] = field(default_factory=list)  # most common first, with counts
    without_objective: dict[str, int] = field(default_factory=dict)  # per status: finished without an objective
    campaign_time_s: float = 0.0  # campaign time of all runs so far (what max_time_s counts)
    max_time_s: float | None = None
    trial_time_limit_s: float | None = None
    running_at_limit: int | None = None  # trials running when max_time_s stopped new starts (None: not reached)

    @property
    def time_note(self) -> str | None:
        """Why the campaign ran past max_time_s (:func:`hpo.time_budget.overrun_note`), or None."""
        return overrun_note(self.max_time_s, self.campaign_time_s, self.trial_time_limit_s, self.running_at_limit)


def stopped_by_force(rt: RunningTrial, merged: TrialResult, run_dir: RunDir) -> TrialResult:
    """The result of a trial terminated after it ignored a stop request: ``stopped`` (the stopper's
    decision stands) with the best epoch it reported, its checkpoint if it wrote one, and a reason
    saying it did not stop by itself."""
    best = rt.best_report
    heads = {name: HeadMetrics(val_mae=m.val_mae, val_rmse=m.val_rmse) for name, m in best.heads.items()} if best else {}
    return TrialResult(
        status=TrialStatus.STOPPED, objective=best.objective if best else None, heads=heads,
        epochs=best.epoch if best else 0, best_epoch=best.epoch - 1 if best else None,
        wall_time_s=merged.wall_time_s, slots=merged.slots, device=merged.device,
        failure_reason=f"{rt.stopping}; {merged.failure_reason}", log_tail=merged.log_tail,
        checkpoint=CHECKPOINT_NAME if run_dir.checkpoint.is_file() else None)


class SchedulerRank(LoopActions):
    """The scheduler loop on rank 0. Built by :func:`scheduler.runtime.run.run_campaign`.

    ``clock`` (``time.time``) and ``transport`` are arguments so that a test can drive the same
    object on a virtual clock with virtual agents."""

    def __init__(
        self,
        transport: Transport,
        config: Any,
        cdir: CampaignDir,
        layout: ClusterLayout,
        policy: PlacementPolicy,
        sizer: TrialSizer,
        session: CampaignSession,
        make_trial_config: Callable[[dict[str, Any]], dict],
        progress: ProgressLine,
        clock: Callable[[], float] = time.time,
        stopper: Stopper | None = None,
        sharing: GpuSharing | None = None,
        budget_watch: BudgetWatch | None = None,
    ) -> None:
        self.transport = transport
        self.budget_watch = budget_watch  # checks the budgets again once the first epochs are measured
        self.cfg = config
        self.cdir = cdir
        self.layout = layout
        self.session = session
        self._make_trial_config = make_trial_config
        self.progress = progress
        self.clock = clock
        state = session.state
        rules = LoopRules.from_campaign(config, layout.slots_per_node, sharing or GpuSharing())
        self.loop = CampaignLoop(rules, layout.make_pool(),
                                 policy, sizer, self, Outcomes.from_state(state), state.next_trial_id,
                                 stopper=stopper, progress_history=state.progress)
        # trial ids from here on have no directory yet: their agents create it and write the config
        # (a crashed run may have left directories of trials it suggested but never journaled)
        self._new_dirs_from = max([state.next_trial_id, *(i + 1 for i in cdir.trial_ids_on_disk())])
        self.drained_again = self._drain_known_bad(state.drained)
        self.time_used_before_s = sum(end - start for start, end, _ in state.segments)
        self.t_start = clock()  # the budget (max_time_s) counts from here, like the journal
        self.t_go = self.t_start
        self._backoff = Backoff()  # sleep when a loop turn found nothing to do
        self._parts: dict[int, dict[int, PartExited]] = {}  # running trial -> its processes' reports
        self._kill_sent: set[int] = set()
        self._events: list[JournalEvent] = []
        self._pending_starts: list[tuple[int, StartTrial]] = []  # (agent rank, message) of this turn
        self._pending_stops: list[tuple[int, StopTrial | GoOn | MoveTrial]] = []  # sent after the progress is journaled
        self._to_tell: list[tuple[TrialSpec, float | tuple[float, ...] | None, int | None]] = []  # outcomes of this turn
        self.usage = SlotUsage()
        self.start_batch = START_BATCH  # start messages that leave at once, mid-turn (a test sets fewer)
        self._trial_process_s = 0.0
        self._rank0_busy_s = 0.0
        self._last_csv = time.monotonic()
        self._dirty_csv = False
        self._results_blocked = False  # results.csv's place is taken by no file: noted once, not retried
        self._running_at_limit: int | None = None  # trials running when max_time_s was reached

    @property
    def stop_reason(self) -> str | None:
        return self.loop.stop_reason

    def requeue(self, specs: list[TrialSpec]) -> None:
        """Trials of an earlier run to (re-)start first: running at the crash, or suggested and not
        started yet."""
        self.loop.resubmit(specs, self.clock())

    def elapsed_total_s(self, now: float) -> float:
        """Campaign time of all runs so far (what ``max_time_s`` counts)."""
        return self.time_used_before_s + (now - self.t_start)

    # -- LoopActions: what the loop's decisions do ------------------------------------------------
    def move_trial(self, rt: RunningTrial, slots: int, at_boundary: bool) -> None:
        """Ask the trial to stop after its current epoch keeping its training state; its exit
        (:meth:`_on_exit`) starts the continuation on ``slots`` slots. A trial that has not finished
        an epoch (``at_boundary`` False) also stops after its first one: stopping it sooner would
        throw its progress away."""
        msg = MoveTrial(rt.spec.trial_id, rt.spec.attempt, f"moving from {len(rt.slots)} to {slots} slots")
        self._pending_stops.append((self.layout.slot_to_rank[rt.slots[0]], msg))

    def exploit_trial(self, rt: RunningTrial, exploit: Exploit) -> None:
        """PBT: snapshot the donor's training state as it is now into the trial's directory (a hard
        link: the donor's next write replaces its file, not this one) and ask the trial to stop
        after its epoch; its exit (:meth:`_on_exit`) starts the continuation, which starts from the
        snapshot. A donor without a state leaves a note in its place: the trainer starts from
        scratch and says why in its log."""
        target = self.cdir.trial(rt.spec.trial_id).inherit_state
        link_state(self.cdir.trial(exploit.donor_id).training_state, target)
        msg = MoveTrial(rt.spec.trial_id, rt.spec.attempt,
                        f"PBT: exploiting trial {exploit.donor_id} after epoch {exploit.epoch}")
        self._pending_stops.append((self.layout.slot_to_rank[rt.slots[0]], msg))

    def start(self, rt: RunningTrial, sent_ahead: QueuedTrial | None = None) -> None:
        self._parts[rt.spec.trial_id] = {}
        self.usage.started(rt)
        if sent_ahead is not None:
            return  # its agent started it when the trial before it exited
        self._send_start(rt.spec, rt.slots, after=None)
        if len(self._pending_starts) >= self.start_batch:
            self._commit()  # this start's journal line (the loop made it first) goes with it

    def send_ahead(self, queued: QueuedTrial, before: RunningTrial) -> None:
        self._send_start(queued.spec, (queued.slot,), after=queued.after)

    def stop_trial(self, rt: RunningTrial, reason: str) -> None:
        msg = StopTrial(rt.spec.trial_id, rt.spec.attempt, reason)
        self._pending_stops.append((self.layout.slot_to_rank[rt.slots[0]], msg))

    def go_on(self, rt: RunningTrial, epoch: int) -> None:
        self._pending_stops.append((self.layout.slot_to_rank[rt.slots[0]],
                                    GoOn(rt.spec.trial_id, rt.spec.attempt, epoch)))

    def take_back(self, queued: QueuedTrial, reason: str) -> None:
        msg = Unqueue(queued.spec.trial_id, queued.spec.attempt, queued.after, reason)
        self.transport.send(self.layout.slot_to_rank[queued.slot], TAG_UNQUEUE, msg)

    def tell(self, spec: TrialSpec, result: TrialResult, objective: float | tuple[float, ...] | None) -> None:
        stopped_after = result.epochs if result.status == TrialStatus.STOPPED else None
        self._to_tell.append((spec, objective, stopped_after))  # told after this turn's journal flush

    def _drain_known_bad(self, drained: list[NodeDrained]) -> list[str]:
        """Nodes an earlier run drained stay out if this allocation has them (the same node number
        on the same host: the layout numbers nodes in rank order); returns their hostnames."""
        health = self.loop.health
        if health is None:
            return []
        pool = self.loop.book.pool
        again = []
        for event in drained:
            node = event.node
            if 0 <= node < pool.num_nodes and pool.hostname(node) == event.hostname and node not in pool.drained_nodes:
                health.drain(node, event.failures, event.reason)
                again.append(f"{event.hostname} (node {node})")
        return again

    # -- starts ------------------------------------------------------------------------------------
    def _send_start(self, spec: TrialSpec, slots: tuple[int, ...], after: tuple[int, int] | None) -> None:
        """Queue the start messages of a trial attempt (they leave in :meth:`_commit`)."""
        config = self._make_trial_config(spec.params)
        run_dir, config_text = self._prepare_dir(spec, config)
        verdict_epochs = self._verdict_epochs(spec, config)
        world = len(slots)
        init = None
        if world > 1:
            rdv = run_dir.root / f"rendezvous.{spec.attempt}"
            remove_any(rdv)
            init = f"file://{rdv.absolute()}"  # file://out/... would name a host "out"
        # one time limit over all of a trial's moves (each attempt after a failure gets it whole)
        limit = max(1.0, float(self.cfg.trial_time_limit_s) - spec.time_used_s)
        self._pending_starts.extend(
            (self.layout.slot_to_rank[slot], StartTrial(
                trial_id=spec.trial_id, attempt=spec.attempt, rank=r, world_size=world,
                program=self.cfg.trial_program, config_path=str(run_dir.config),
                data_path=str(self.cfg.dataset), run_dir=str(run_dir.root),
                log_path=str(run_dir.log(r)),
                time_budget_s=limit, kill_after_s=limit + kill_margin_s(limit), init_method=init,
                device=self.cfg.resources.device, read_result=(r == 0), config_json=config_text,
                after=after, log_max_bytes=int(self.cfg.trial_log_max_mb * 1024 * 1024),
                stop_grace_s=float(self.cfg.stop_grace_s), verdict_epochs=verdict_epochs,
                verdict_wait_s=float(self.cfg.early_stopping.verdict_wait_s)))
            for r, slot in enumerate(slots))

    def _verdict_epochs(self, spec: TrialSpec, config: dict[str, Any]) -> tuple[int, ...]:
        """The epochs after which the trial's trainer waits for the stopper's verdict (its rungs
        below the trial's epoch budget, ``config``'s ``num_epoch``, past the epoch it resumes from)."""
        stopper = self.loop.stopper
        if stopper is None or self.cfg.early_stopping.verdict_wait_s <= 0:
            return ()
        try:
            budget = spec.sized.epochs if spec.sized is not None and spec.sized.epochs else epoch_budget(config)
        except ConfigError:  # a custom trial program's own config: it gets no verdicts to wait for
            return ()
        return tuple(e for e in stopper.decision_epochs(budget) if e > spec.resume_epoch)

    def _prepare_dir(self, spec: TrialSpec, config: dict[str, Any]) -> tuple[RunDir, str | None]:
        """The run directory and, for a new trial, the text of its config.json (written by the
        agents, off rank 0's critical path). For a re-run, or a directory left by a crashed run, rank
        0 writes the config itself (if missing) and moves the earlier attempt's results aside."""
        run_dir = self.cdir.trial(spec.trial_id)
        text = json.dumps(config)  # compact: the C encoder, a quarter of indent's cost on rank 0
        if spec.attempt == 0 and spec.trial_id >= self._new_dirs_from:
            return run_dir, text
        run_dir.root.mkdir(parents=True, exist_ok=True)
        # the earlier attempt's program may have left anything under these names (a directory, a
        # pipe, a link): whatever it is goes; an earlier attempt's stop request is not this one's
        for planted in (run_dir.stop, run_dir.move, run_dir.go_on, run_dir.verdicts):
            remove_any(planted)
        if spec.inherit_from is None:  # a PBT snapshot is for the exploit's continuation only
            remove_any(run_dir.inherit_state)
        if spec.inherit_from is not None or not is_regular_file(run_dir.config):  # PBT: its new parameters
            remove_any(run_dir.config)
            write_atomic(run_dir.config, text)
        # an earlier attempt's result and logs are kept as <name>.attempt<k>.<ext>; files of an
        # attempt whose start never reached the journal (crash) as <name>.lost.<ext>; the training
        # state stays where it is: the re-run resumes from it (the trainer checks it is this trial's)
        tag = f"attempt{spec.attempt - 1}" if spec.attempt > 0 else "lost"
        for old in [run_dir.result, run_dir.progress, *run_dir.logs()]:
            stem, _, ext = old.name.rpartition(".")
            move_aside(old, run_dir.root / f"{stem}.{tag}.{ext}")
        return run_dir, None

    # -- reports -------------------------------------------------------------------------------------
    def _receive(self, now: float) -> bool:
        got = self.transport.receive()
        for msg in got:
            if isinstance(msg, Unqueued):  # same tag as the exits: MPI keeps one agent's order
                self.loop.unqueued(msg.after[0], msg.trial_id, msg.attempt, now)
            elif isinstance(msg, EpochsReported):
                self.loop.trial_progress(msg.trial_id, msg.attempt, msg.epochs, now)
            else:
                self._on_exit(msg, now)
        return bool(got)

    def _on_exit(self, msg: PartExited, now: float) -> None:
        rt = self.loop.book.running.get(msg.trial_id)
        if rt is None or rt.spec.attempt != msg.attempt:
            raise RuntimeError(f"report for trial {msg.trial_id} attempt {msg.attempt}, which is not running")
        parts = self._parts[msg.trial_id]
        parts[msg.rank] = msg
        self._trial_process_s += msg.wall_time_s
        if msg.fault is not None:  # the machine's fault: stop now; the trial is re-run on --resume
            raise InfrastructureFault(msg.fault, remedy(self.cdir.root, msg.fault))
        if len(parts) == len(rt.slots):
            del self._parts[msg.trial_id]
            self._kill_sent.discard(msg.trial_id)
            outcome = merge_parts(list(parts.values()), len(rt.slots), self.cfg.resources.device,
                                  float(self.cfg.trial_time_limit_s))
            result = outcome.result
            told_off = any(p.killed_reason and p.killed_reason.startswith(IGNORED_STOP) for p in parts.values())
            leaving = rt.moving_to is not None or rt.exploit is not None
            if leaving and rt.stopping is None and (result.status == TrialStatus.STOPPED or told_off):
                self._moved(rt, result, min(now, max(p.end_time for p in parts.values())), now)
                return
            if rt.exploit is not None:  # it ended by itself before its exploit: the snapshot goes unused
                remove_any(self.cdir.trial(rt.spec.trial_id).inherit_state)
            ignored = rt.stopping is not None and told_off
            if ignored:
                result = stopped_by_force(rt, result, self.cdir.trial(rt.spec.trial_id))
            if outcome.synthesised or result is not outcome.result:
                self._write_result(rt.spec.trial_id, result)
            end = AttemptEnd(min(p.start_time for p in parts.values()),  # the processes' own times
                             max(p.end_time for p in parts.values()), stop_ignored=ignored)
            self.loop.trial_ended(msg.trial_id, result, now, end)
            # busy until its processes ended (a trial sent ahead on its slot starts then, not when
            # rank 0 hears of it: counting to now would count that span twice, above 100%)
            self.usage.ended(rt, min(now, end.ended_at), rt.slots[0] in self.loop.book.shared)
        elif (msg.returncode != 0 or msg.timed_out) and msg.trial_id not in self._kill_sent:
            self._kill_sent.add(msg.trial_id)
            for r, slot in enumerate(rt.slots):
                if r not in parts:
                    kill = KillTrial(msg.trial_id, msg.attempt, f"rank {msg.rank} of the trial failed")
                    self.transport.send(self.layout.slot_to_rank[slot], TAG_KILL, kill)

    def _moved(self, rt: RunningTrial, result: TrialResult, ended: float, now: float) -> None:
        """A trial asked to move stopped (or was ended after ignoring the request): its
        continuation starts on its new slots from the epochs it finished (a trainer's result
        says; else its last report: the continuation's first report tells where it resumed)."""
        self.usage.ended(rt, ended, False)  # a trial on a shared GPU is never moved
        done = result.epochs if result.status == TrialStatus.STOPPED else (
            rt.best_report.epoch if rt.best_report is not None else rt.first_epoch)
        self.loop.trial_moved(rt.spec.trial_id, rt.spec.attempt, done, now)

    def _write_result(self, trial_id: int, result: TrialResult) -> None:
        """Write the result the runtime made for a trial; a trial directory that cannot take it
        (a trial may leave anything there) is noted in the trial's reason, never raised."""
        path = self.cdir.trial(trial_id).result
        try:
            result.write(path)
        except (OSError, ValueError) as exc:
            if infrastructure_cause(exc) is not None:
                raise
            result.failure_reason = f"{result.failure_reason or result.status} (could not write {path}: {exc})"

    # -- journal and optimizer ---------------------------------------------------------------------------
    def _log(self, event: JournalEvent) -> None:
        self._events.append(event)

    def _commit(self) -> None:
        """End of a loop turn: this turn's events (the loop's, then rank 0's own) go to the journal
        writer (one batch, one fsync), then the actions they record happen (start messages leave,
        the optimizer learns the outcomes)."""
        events = self.loop.take_events()
        if self._events:
            events += self._events
            self._events = []
        if events:
            self.session.record(events)
            self._dirty_csv = True
            self._watch(events)
        for dest, msg in self._pending_starts:
            self.transport.send(dest, TAG_START, msg)
        self._pending_starts = []
        for dest, msg in self._pending_stops:
            self.transport.send(dest, TAG_STOP, msg)
        self._pending_stops = []
        optimizer = self.session.pool.optimizer
        for spec, objective, stopped_after in self._to_tell:
            if spec.suggestion_id is not None:
                optimizer.tell(spec.suggestion_id, objective, stopped_after)
            else:
                optimizer.tell_past(spec.params, objective)
        self._to_tell = []

    def _watch(self, events: list[JournalEvent]) -> None:
        """What a person watching should hear of this turn's events: a budget that the first
        measured epochs show too short, a node drained."""
        for event in events:
            if isinstance(event, TrialProgress) and self.budget_watch is not None:
                warning = self.budget_watch.epoch_reported(event.trial_id, event.report.epoch)
                if warning is not None:
                    self.progress.note(f"warning: {warning}")
            elif isinstance(event, NodeDrained):
                self.progress.note(f"node {event.hostname} (node {event.node}) drained after {event.failures} "
                                   f"node-level failures in a row, the last: {event.reason[:200]}; no more trials "
                                   "go there")

    # -- loop ------------------------------------------------------------------------------------------
    def _snapshot(self, now: float) -> ProgressSnapshot:
        elapsed = now - self.t_go
        running = self.loop.book.running.values()
        busy, slots_used = self.usage.now(now)
        total = self.layout.usable_slots
        util = min(1.0, busy / (elapsed * total)) if elapsed > 0 else 0.0  # agents' clocks may run ahead
        out = self.loop.outcomes
        return ProgressSnapshot(out.finished, self.cfg.max_trials, len(running), out.failed, out.best_objective,
                                slots_used, total, util, self.elapsed_total_s(now))

    def _periodic(self, now: float) -> None:
        mono = time.monotonic()
        if self.progress.due(mono):
            self.progress.show(self._snapshot(now), mono)
        if self._dirty_csv and mono - self._last_csv >= RESULTS_CSV_EVERY_S:
            self._write_results()
            self._last_csv = mono
            self._dirty_csv = False
        self.transport.progress()

    def turn(self, now: float) -> bool:
        """One loop turn at ``now`` (see the module docstring); True when anything happened."""
        busy = self._receive(now)
        if (self.stop_reason is None and self.cfg.max_time_s is not None
                and self.elapsed_total_s(now) >= self.cfg.max_time_s):
            self.loop.stop(f"max_time_s ({self.cfg.max_time_s:g} s) reached")
            self._running_at_limit = len(self.loop.book.running)
        busy = self.loop.start_waiting(now) > 0 or busy  # the critical path first
        self._commit()
        try:
            busy = self.loop.fill(now, self.session.pool) > 0 or busy
        except PlacementStuckError as exc:  # nothing placeable on an idle machine: end, saying why
            self.loop.cannot_place = str(exc)
            self.loop.stop(str(exc))
        self._commit()
        return busy

    def run(self) -> CampaignSummary:
        """Run until the budget is spent, the failure threshold trips or the candidates run out."""
        self.t_go = self.clock()  # every agent is ready now: slot time counts from here
        try:
            while True:
                t0 = time.perf_counter()
                now = self.clock()
                busy = self.turn(now)
                self._periodic(now)
                if self.loop.done():
                    break
                if busy:
                    self._rank0_busy_s += time.perf_counter() - t0
                    self._backoff.activity()
                else:
                    self._backoff.sleep()
            return self.finish_run()
        except (OSError, RuntimeError) as exc:  # rank 0's own writes: a full disk is no bug of ours
            cause = infrastructure_cause(exc)
            if cause is None or isinstance(exc, InfrastructureFault):
                raise
            raise InfrastructureFault(f"rank 0: {cause}", remedy(self.cdir.root, cause)) from exc

    def finish_run(self) -> CampaignSummary:
        """Journal the end of this run, write results.csv, return the summary."""
        now = self.clock()
        self._log(CampaignFinished(time=now, reason=self.stop_reason or ""))
        self._commit()
        self._write_results(whole=True)
        self.progress.show(self._snapshot(now))
        self.progress.close()
        out = self.loop.outcomes
        return CampaignSummary(
            reason=self.stop_reason or "", finished=out.finished, failed=out.failed,
            statuses=dict(out.statuses), best_objective=out.best_objective, best_trial=out.best_trial,
            elapsed_s=now - self.t_go, stopped_by_failures=self.loop.stopped_by_failures,
            failure_message=self.loop.failure_message, cannot_place=self.loop.cannot_place,
            rank0_busy_s=self._rank0_busy_s,
            trial_process_s=self._trial_process_s, slot_seconds=self.layout.usable_slots * (now - self.t_go),
            failure_reasons=failure_counts(r for r, _ in out.failure_reasons),
            without_objective={str(k): v for k, v in out.without_objective.items() if v},
            campaign_time_s=self.elapsed_total_s(now), max_time_s=self.cfg.max_time_s,
            trial_time_limit_s=float(self.cfg.trial_time_limit_s), running_at_limit=self._running_at_limit)

    def _write_results(self, whole: bool = False) -> None:
        """results.csv from the live state (the trials gathered since the last write appended, or
        ``whole``); when something other than a file took its place, one line says so and the
        campaign goes on (the journal is the campaign's record)."""
        if self._results_blocked:
            return
        try:
            self.session.write_results(whole)
        except ResultsTableError as exc:
            self._results_blocked = True
            self.progress.note(f"warning: {exc}")

    def shutdown(self, reason: str) -> None:
        """Tell every agent to stop (kills whatever still runs there) and wait for the sends."""
        for rank in sorted(set(self.layout.slot_to_rank.values())):
            self.transport.send(rank, TAG_SHUTDOWN, Shutdown(reason))
        self.transport.close()
