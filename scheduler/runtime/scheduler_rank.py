"""Rank 0 of a campaign: candidates -> size -> placement -> start messages; reports -> journal -> tell.

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
thread (see :mod:`scheduler.runtime.journal_writer`): rank 0 never waits for the disk. A crash of
the machine loses at most the last unsynced lines, which after ``--resume`` looks exactly like a
crash a moment earlier (those trials are re-run).
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hpo.failures import failure_group, most_common_failure
from hpo.objective import objective_value
from hydragnn_ensemble.result import TrialResult
from scheduler.placement.base import PlacementPolicy
from scheduler.resources import ResourcePool
from scheduler.runtime.campaign_dir import CampaignDir
from scheduler.runtime.layout import ClusterLayout
from scheduler.runtime.messages import (
    TAG_EXITED,
    TAG_KILL,
    TAG_SHUTDOWN,
    TAG_START,
    TAG_UNQUEUE,
    KillTrial,
    PartExited,
    Shutdown,
    StartTrial,
    Unqueue,
    Unqueued,
)
from scheduler.runtime.polling import Backoff
from scheduler.runtime.progress import ProgressLine, ProgressSnapshot
from scheduler.runtime.sizing import TrialSizer, trial_request
from scheduler.sizing import SizedTrial
from scheduler.runtime.trial_process import OOM_REASON, kill_margin_s, merge_parts

RESULTS_CSV_EVERY_S = 5.0
MIN_TRIALS_FOR_THRESHOLD = 8


@dataclass
class TrialSpec:
    """A trial attempt waiting for slots or running."""

    trial_id: int
    params: dict[str, Any]
    attempt: int = 0
    size: int = 1
    suggestion_id: int | None = None  # None: suggested in an earlier run -> tell_past when it ends
    retries_used: int = 0
    oom_retried: bool = False
    sized: SizedTrial | None = None  # the sizer's answer (size, prediction, wider sizes); None: ask it


@dataclass
class RunningTrial:
    """A trial attempt holding slots."""

    spec: TrialSpec
    slots: tuple[int, ...]
    start_time: float
    parts: dict[int, PartExited] = field(default_factory=dict)
    kill_sent: bool = False


@dataclass
class QueuedTrial:
    """A single-slot trial sent ahead to the agent of ``slot``, to start when the trial it follows exits."""

    spec: TrialSpec
    slot: int
    after: tuple[int, int]  # the trial attempt it follows
    taking_back: bool = False  # Unqueue sent, answer not in yet


@dataclass
class EarlierRuns:
    """What the journal of earlier runs of this campaign says (all zero for a new campaign)."""

    next_trial_id: int = 0
    finished: int = 0
    failed: int = 0  # finished without an objective
    statuses: dict[str, int] = field(default_factory=dict)
    best_objective: float | None = None
    best_trial: int | None = None
    time_used_s: float = 0.0  # campaign time summed over the earlier runs
    failure_reasons: list[tuple[str, str]] = field(default_factory=list)  # (reason, log tail)

    @classmethod
    def from_state(cls, state) -> "EarlierRuns":
        """From a replayed :class:`hpo.journal.CampaignState`."""
        best = state.best_trial
        return cls(
            next_trial_id=state.next_trial_id,
            finished=state.num_finished,
            failed=state.num_failed,
            statuses={k: v for k, v in state.counts.items()
                      if v and k in ("completed", "diverged", "timeout", "failed")},
            best_objective=state.best_objective,
            best_trial=best.trial_id if best is not None else None,
            time_used_s=sum(end - start for start, end, _ in state.segments),
            failure_reasons=[(r.last_attempt.reason or r.status, r.last_attempt.log_tail or "")
                             for r in state.finished if r.objective is None],
        )


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
    rank0_busy_s: float = 0.0  # time rank 0 spent deciding, journaling and messaging (not sleeping)
    trial_process_s: float = 0.0  # sum of the wall times of all trial processes of this run
    slot_seconds: float = 0.0  # usable slots x elapsed
    journal_fsyncs: int = 0  # batches the journal writer fsync'ed during this run


class SchedulerRank:
    """The scheduler loop. Built by :func:`scheduler.runtime.run.run_campaign` on rank 0."""

    def __init__(
        self,
        comm,
        config: Any,
        cdir: CampaignDir,
        layout: ClusterLayout,
        policy: PlacementPolicy,
        sizer: TrialSizer,
        pool,  # hpo.pool.CandidatePool
        journal_append: Callable[[list[dict]], None],
        write_results: Callable[[], None],
        make_trial_config: Callable[[dict[str, Any]], dict],
        progress: ProgressLine,
        history: "EarlierRuns",
    ) -> None:
        self.comm = comm
        self.cfg = config
        self.cdir = cdir
        self.layout = layout
        self.policy = policy
        self.sizer = sizer
        self.cpool = pool
        self._journal_append = journal_append
        self._write_results = write_results
        self._make_trial_config = make_trial_config
        self.progress = progress
        self.rpool: ResourcePool = layout.make_pool()
        self.next_trial_id = history.next_trial_id
        # trial ids from here on have no directory yet: their agents create it and write the config
        # (a crashed run may have left directories of trials it suggested but never journaled)
        leftovers = [int(n) for n in os.listdir(cdir.trials) if n.isdigit()] if cdir.trials.is_dir() else []
        self._new_dirs_from = max([self.next_trial_id, *(i + 1 for i in leftovers)])
        self.waiting: dict[int, TrialSpec] = {}  # submitted to placement
        self.running: dict[int, RunningTrial] = {}
        self.queued: dict[int, QueuedTrial] = {}  # by the id of the running trial each one follows
        self._needs_successor: dict[int, int] = {}  # short running trial -> its slot (no successor yet)
        self.finished = history.finished
        self.failed = history.failed
        self.statuses: Counter = Counter(history.statuses)
        self.best, self.best_trial = history.best_objective, history.best_trial
        self.failure_reasons: list[tuple[str, str]] = list(history.failure_reasons)  # (reason, log tail)
        self.time_used_before_s = history.time_used_s
        self.t_start = time.time()  # the budget (max_time_s) counts from here, like the journal
        self.t_go = self.t_start
        self._backoff = Backoff()  # sleep when a loop turn found nothing to do
        self.stop_reason: str | None = None
        self.stopped_by_failures = False
        self.failure_message: str | None = None
        self._events: list[dict] = []
        self._sends: list = []
        self._busy_slot_s = 0.0
        self._trial_process_s = 0.0
        self._rank0_busy_s = 0.0
        self._last_csv = time.monotonic()
        self._dirty_csv = False
        self.device = config.resources.device
        self._pending_starts: list[tuple[int, StartTrial]] = []  # (agent rank, message) of this turn
        self._to_tell: list[tuple[TrialSpec, float | None]] = []  # outcomes of this turn

    # -- journal -----------------------------------------------------------------------------------
    def _log(self, event: str, **fields: Any) -> None:
        self._events.append({"event": event, "time": time.time(), **fields})

    def _flush_journal(self) -> None:
        """Hand the events of this loop turn to the journal writer (one batch, one fsync)."""
        if self._events:
            events, self._events = self._events, []
            self._journal_append(events)
            self._dirty_csv = True

    # -- resume --------------------------------------------------------------------------------------
    def requeue(self, specs: list[TrialSpec]) -> None:
        """Trials of an earlier run to (re-)start first: running at the crash, or suggested and not
        started yet."""
        for spec in specs:
            self._submit(spec)

    # -- budget --------------------------------------------------------------------------------------
    def elapsed_total_s(self, now: float) -> float:
        return self.time_used_before_s + (now - self.t_start)

    def _budget_left(self) -> int:
        """New trial ids that may still be created (max_trials counts trials, not attempts)."""
        return self.cfg.max_trials - (self.finished + len(self.running) + len(self.queued) + len(self.waiting))

    def _check_time(self, now: float) -> None:
        if (self.stop_reason is None and self.cfg.max_time_s is not None
                and self.elapsed_total_s(now) >= self.cfg.max_time_s):
            self._stop(f"max_time_s ({self.cfg.max_time_s:g} s) reached")

    def _stop(self, reason: str) -> None:
        """No new starts from now on; running trials finish, waiting ones are dropped (they stay in
        the journal as suggested, so a later --resume with a larger budget starts them)."""
        self.stop_reason = reason
        self._needs_successor.clear()
        self._unqueue_all(f"campaign stopping: {reason}")
        for tid in list(self.waiting):
            self.policy.cancel(tid)
        self.waiting.clear()

    # -- candidates and placement ------------------------------------------------------------------
    def _submit(self, spec: TrialSpec) -> None:
        self.waiting[spec.trial_id] = spec
        if spec.sized is None:
            spec.sized = self.sizer.choose(spec.params)
        self.policy.submit(trial_request(spec.trial_id, spec.size, spec.sized, time.time()))

    def _top_up(self) -> None:
        # never fewer than a node's worth even when every slot is busy: slots freed later are
        # filled from the waiting ones at once (before the optimizer is asked again), and
        # placement still has a choice of sizes to pack with
        target = math.ceil(self.cfg.pool_factor * max(self.rpool.free_slots, self.layout.slots_per_node))
        n = min(target - len(self.waiting), self._budget_left())
        if n <= 0:
            return
        for sug in self.cpool.take(n):
            sized = self.sizer.choose(sug.params)
            spec = TrialSpec(self.next_trial_id, dict(sug.params), size=sized.slots,
                             suggestion_id=sug.suggestion_id, sized=sized)
            self.next_trial_id += 1
            self._log("trial_suggested", trial_id=spec.trial_id, params=spec.params, attempt=0)
            self._submit(spec)

    def _prepare_dir(self, spec: TrialSpec) -> tuple[Path, str | None]:
        """The run directory and, for a new trial, the text of its config.json (written by the
        agents, off rank 0's critical path). For a re-run, or a directory left by a crashed run, rank
        0 writes the config itself (if missing) and moves the earlier attempt's results aside."""
        import json

        run_dir = self.cdir.trial_dir(spec.trial_id)
        text = json.dumps(self._make_trial_config(spec.params), indent=2)
        if spec.attempt == 0 and spec.trial_id >= self._new_dirs_from:
            return run_dir, text
        run_dir.mkdir(parents=True, exist_ok=True)
        cfg_path = run_dir / "config.json"
        if not cfg_path.exists():
            tmp = run_dir / "config.json.tmp"
            tmp.write_text(text)
            os.replace(tmp, cfg_path)
        # an earlier attempt's result and logs are kept as <name>.attempt<k>.<ext>; files of an
        # attempt whose start never reached the journal (crash) as <name>.lost.<ext>
        tag = f"attempt{spec.attempt - 1}" if spec.attempt > 0 else "lost"
        for old in [run_dir / "result.json", *run_dir.glob("train.log"), *run_dir.glob("train.rank*.log")]:
            if old.exists():
                stem, _, ext = old.name.rpartition(".")
                os.replace(old, run_dir / f"{stem}.{tag}.{ext}")
        return run_dir, None

    def _start(self, spec: TrialSpec, slots: tuple[int, ...], now: float,
               after: TrialSpec | None = None) -> None:
        """Journal the start and queue its messages; ``after``: the single-slot trial running on
        ``slots`` that this one follows (prefetch: the agent starts it when that one exits)."""
        run_dir, config_text = self._prepare_dir(spec)
        world = len(slots)
        init = None
        if world > 1:
            rdv = run_dir / f"rendezvous.{spec.attempt}"
            rdv.unlink(missing_ok=True)
            init = f"file://{rdv}"
        after_key = None if after is None else (after.trial_id, after.attempt)
        if after_key is None:
            self._journal_start(spec, slots)
            self._running(spec, slots, now)
        else:
            self.queued[after_key[0]] = QueuedTrial(spec, slots[0], after_key)
        limit = float(self.cfg.trial_time_limit_s)
        self._pending_starts.extend(
            (self.layout.slot_to_rank[slot], StartTrial(
                trial_id=spec.trial_id, attempt=spec.attempt, rank=r, world_size=world,
                program=self.cfg.trial_program, config_path=str(run_dir / "config.json"),
                data_path=str(self.cfg.dataset), run_dir=str(run_dir),
                log_path=str(run_dir / ("train.log" if r == 0 else f"train.rank{r}.log")),
                time_budget_s=limit, kill_after_s=limit + kill_margin_s(limit), init_method=init,
                device=self.device, read_result=(r == 0), config_json=config_text,
                after=after_key, log_max_bytes=int(self.cfg.trial_log_max_mb * 1024 * 1024)))
            for r, slot in enumerate(slots))

    def _journal_start(self, spec: TrialSpec, slots: tuple[int, ...], **extra: Any) -> None:
        hosts = [self.rpool.hostname(self.rpool.node_of(s)) for s in slots]
        predicted = spec.sized.seconds_at(len(slots)) * len(slots) if spec.sized is not None else None
        self._log("trial_started", trial_id=spec.trial_id, attempt=spec.attempt, slots=list(slots),
                  hosts=hosts, size=len(slots), predicted_slot_s=predicted, **extra)

    def _running(self, spec: TrialSpec, slots: tuple[int, ...], start_time: float) -> None:
        self.running[spec.trial_id] = RunningTrial(spec, slots, start_time)
        if (len(slots) == 1 and self.stop_reason is None and spec.sized is not None
                and spec.sized.seconds_at(1) <= self.cfg.prefetch_below_s):
            self._needs_successor[spec.trial_id] = slots[0]

    def _prefetch(self, now: float) -> int:
        """Send the next trial ahead to the slots of short single-slot trials (see the module
        docstring); returns how many were sent."""
        sent = 0
        while self._needs_successor:
            tid = next(iter(self._needs_successor))
            req = self.policy.next_to_queue(now)
            if req is None:
                break
            spec = self.waiting[req.trial_id]
            if spec.attempt > 0:  # a re-run waits for a free slot (see the module docstring)
                self._submit(spec)  # back to placement
                break
            del self.waiting[req.trial_id]
            slot = self._needs_successor.pop(tid)
            spec.size = 1
            self._start(spec, (slot,), now, after=self.running[tid].spec)
            sent += 1
        return sent

    def _take_back(self, q: QueuedTrial, reason: str) -> None:
        """Ask the agent to drop a trial sent ahead; it answers :class:`Unqueued` if it had not
        started it (:meth:`_on_unqueued`); one that started already runs to its end."""
        if not q.taking_back:
            q.taking_back = True
            msg = Unqueue(q.spec.trial_id, q.spec.attempt, q.after, reason)
            self._sends.append(self.comm.isend(msg, dest=self.layout.slot_to_rank[q.slot], tag=TAG_UNQUEUE))

    def _unqueue_all(self, reason: str) -> None:
        for q in self.queued.values():
            self._take_back(q, reason)

    def _rebalance(self) -> None:
        """Slots idle with nothing waiting: take back the trials sent ahead behind the running
        trials predicted to end last (they run longer than predicted, or the campaign's tail)."""
        if self.waiting or not self.queued or self.rpool.free_slots == 0:  # the usual turn: O(1)
            return
        idle = self.rpool.free_slots - sum(q.taking_back for q in self.queued.values())
        if idle <= 0:
            return

        def predicted_end(before: int) -> float:
            rt = self.running[before]
            return rt.start_time + (rt.spec.sized.seconds_at(1) if rt.spec.sized is not None else 0.0)

        candidates = [b for b, q in self.queued.items() if not q.taking_back]
        for before in sorted(candidates, key=predicted_end, reverse=True)[:idle]:
            self._take_back(self.queued[before], "a slot is idle")

    def _on_unqueued(self, msg: Unqueued) -> None:
        """The agent dropped a trial sent ahead. At a stop it stays "suggested" in the journal, like
        the waiting ones a stop drops (a later --resume with more budget starts it); otherwise it
        waits for a free slot again."""
        q = self.queued.get(msg.after[0])
        if q is None or (q.spec.trial_id, q.spec.attempt) != (msg.trial_id, msg.attempt):
            raise RuntimeError(f"agent {msg.agent_rank} dropped trial {msg.trial_id}, which was not sent ahead")
        del self.queued[msg.after[0]]
        if self.stop_reason is None:
            self._submit(q.spec)

    def _promote(self, before: RunningTrial, now: float) -> None:
        """The trial sent ahead behind ``before`` (which just ended) holds the slot now."""
        q = self.queued.pop(before.spec.trial_id, None)
        if q is None:
            return
        slots = (q.slot,)
        self.rpool.allocate(q.spec.trial_id, slots)
        self.policy.queued_started(q.spec.trial_id, slots, now)
        self._journal_start(q.spec, slots, queued_after=before.spec.trial_id)
        ended = max((p.end_time for p in before.parts.values()), default=now)
        self._running(q.spec, slots, min(ended, now))

    def _schedule(self, now: float) -> int:
        """Allocate slots to what placement decides now and journal the starts (the messages leave
        in :meth:`_commit`); returns the number of trials started."""
        for d in self.policy.schedule(self.rpool, now):
            spec = self.waiting.pop(d.trial_id)
            spec.size = len(d.slots)  # a moldable trial may start wider than it was sized
            self.rpool.allocate(d.trial_id, d.slots)
            self._start(spec, d.slots, now)
        return len({m.trial_id for _, m in self._pending_starts})

    def _commit(self) -> None:
        """End of a loop turn: this turn's events go to the journal writer, then the actions they
        record happen (start messages leave, the optimizer learns the outcomes)."""
        self._flush_journal()
        for dest, msg in self._pending_starts:
            self._sends.append(self.comm.isend(msg, dest=dest, tag=TAG_START))
        self._pending_starts = []
        for spec, objective in self._to_tell:
            if spec.suggestion_id is not None:
                self.cpool.optimizer.tell(spec.suggestion_id, objective)
            else:
                self.cpool.optimizer.tell_past(spec.params, objective)
        self._to_tell = []

    # -- reports ---------------------------------------------------------------------------------------
    def _receive(self) -> bool:
        from mpi4py import MPI

        status = MPI.Status()
        got = False
        while self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=TAG_EXITED, status=status):
            msg = self.comm.recv(source=status.Get_source(), tag=TAG_EXITED)
            got = True
            if isinstance(msg, Unqueued):  # same tag as the exits: MPI keeps one agent's order
                self._on_unqueued(msg)
            else:
                self._on_exit(msg)
        return got

    def _on_exit(self, msg: PartExited) -> None:
        rt = self.running.get(msg.trial_id)
        if rt is None or rt.spec.attempt != msg.attempt:
            raise RuntimeError(f"report for trial {msg.trial_id} attempt {msg.attempt}, which is not running")
        rt.parts[msg.rank] = msg
        self._trial_process_s += msg.wall_time_s
        if len(rt.parts) == len(rt.slots):
            self._finish(rt)
        elif (msg.returncode != 0 or msg.timed_out) and not rt.kill_sent:
            rt.kill_sent = True
            for r, slot in enumerate(rt.slots):
                if r not in rt.parts:
                    kill = KillTrial(msg.trial_id, msg.attempt, f"rank {msg.rank} of the trial failed")
                    self._sends.append(self.comm.isend(kill, dest=self.layout.slot_to_rank[slot], tag=TAG_KILL))

    def _retry_size(self, spec: TrialSpec, result: TrialResult) -> int | None:
        """The size of the next attempt of a failed trial, or None for no retry."""
        if result.status != "failed" or self.stop_reason is not None:
            return None
        if (result.failure_reason or "").endswith(OOM_REASON) and self.cfg.retry_oom_on_more_slots \
                and not spec.oom_retried:
            bigger = self.sizer.larger_than(spec.size)
            if bigger is not None:
                spec.oom_retried = True
                return bigger
        if spec.retries_used < self.cfg.retries:
            spec.retries_used += 1
            return spec.size
        return None

    def _finish(self, rt: RunningTrial) -> None:
        now = time.time()
        spec = rt.spec
        del self.running[spec.trial_id]
        self._needs_successor.pop(spec.trial_id, None)
        ran = {"started_at": min(p.start_time for p in rt.parts.values()),  # the processes' times
               "ended_at": max(p.end_time for p in rt.parts.values())}
        self._busy_slot_s += len(rt.slots) * (now - rt.start_time)
        outcome = merge_parts(list(rt.parts.values()), len(rt.slots), self.device,
                              float(self.cfg.trial_time_limit_s))
        result = outcome.result
        if outcome.synthesised:
            self._write_result(spec.trial_id, result)
        self.rpool.release(spec.trial_id)
        self.policy.finished(spec.trial_id, now)
        self.sizer.observe(spec.params, len(rt.slots), result.wall_time_s, result.ok)
        retry_size = self._retry_size(spec, result)
        if result.status == "failed":
            self._log("trial_failed", trial_id=spec.trial_id, attempt=spec.attempt,
                      reason=result.failure_reason, log_tail=result.log_tail or "",
                      result=result.to_dict(), will_retry=retry_size is not None,
                      retry_size=retry_size, **ran)
        else:
            self._log("trial_finished", trial_id=spec.trial_id, attempt=spec.attempt,
                      result=result.to_dict(), **ran)
        self._promote(rt, now)  # the trial sent ahead on its slot (journaled after this end)
        if retry_size is not None:
            self._submit(TrialSpec(spec.trial_id, spec.params, spec.attempt + 1, retry_size,
                                   spec.suggestion_id, spec.retries_used, spec.oom_retried))
            return
        objective = objective_value(result.to_dict(), self.cfg.objective)
        self._to_tell.append((spec, objective))  # told after this turn's journal flush
        self.finished += 1
        self.statuses[result.status] += 1
        if objective is None:  # as hpo.journal counts failures: finished without an objective
            self.failed += 1
            self.failure_reasons.append((result.failure_reason or result.status, result.log_tail or ""))
        if objective is not None and (self.best is None or objective < self.best):
            self.best, self.best_trial = objective, spec.trial_id
        self._check_failures()

    def _write_result(self, trial_id: int, result: TrialResult) -> None:
        """Write the result the runtime made for a trial; a trial directory that cannot take it
        (a trial may leave anything there) is noted in the trial's reason, never raised."""
        path = self.cdir.trial_dir(trial_id) / "result.json"
        try:
            result.write(path)
        except (OSError, ValueError) as exc:
            result.failure_reason = f"{result.failure_reason or result.status} (could not write {path}: {exc})"

    def _check_failures(self) -> None:
        min_n = getattr(self.cfg, "min_trials_for_threshold", MIN_TRIALS_FOR_THRESHOLD)
        if self.stop_reason is not None or self.finished < min_n:
            return
        if self.failed / self.finished <= self.cfg.failure_threshold:
            return
        common, count = most_common_failure(r for r, _ in self.failure_reasons)
        tail = next(t for r, t in self.failure_reasons if failure_group(r) == common)
        self.failure_message = (
            f"stopping the campaign: {self.failed} of {self.finished} finished trials failed "
            f"(more than failure_threshold={self.cfg.failure_threshold:g}); this usually means a "
            f"configuration error (base config, dataset or search space), not bad hyperparameters.\n"
            f"Most common failure ({count}x): {common}\nExample log tail:\n{tail}")
        self.stopped_by_failures = True
        self._stop("failure threshold exceeded")

    # -- loop ------------------------------------------------------------------------------------------
    def _snapshot(self, now: float) -> ProgressSnapshot:
        elapsed = now - self.t_go
        busy_now = sum(len(rt.slots) * (now - rt.start_time) for rt in self.running.values())
        total = self.layout.usable_slots
        util = (self._busy_slot_s + busy_now) / (elapsed * total) if elapsed > 0 else 0.0
        return ProgressSnapshot(self.finished, self.cfg.max_trials, len(self.running), self.failed,
                                self.best, sum(len(rt.slots) for rt in self.running.values()), total,
                                util, self.elapsed_total_s(now))

    def _periodic(self, now: float) -> None:
        mono = time.monotonic()
        if self.progress.due(mono):
            self.progress.show(self._snapshot(now), mono)
        if self._dirty_csv and mono - self._last_csv >= RESULTS_CSV_EVERY_S:
            self._write_results()
            self._last_csv = mono
            self._dirty_csv = False
        if self._sends:
            self._sends = [r for r in self._sends if not r.Test()]

    def _done(self) -> bool:
        if self.running:
            return False
        if self.stop_reason is not None:
            return True
        if self.finished >= self.cfg.max_trials:
            self._stop(f"max_trials ({self.cfg.max_trials}) finished")
            return True
        return False

    def run(self) -> CampaignSummary:
        """Run until the budget is spent, the failure threshold trips or the candidates run out."""
        self.t_go = time.time()  # every agent is ready now: slot time counts from here
        while True:
            t0 = time.perf_counter()
            now = time.time()
            busy = self._receive()
            self._check_time(now)
            if self.stop_reason is None:  # the critical path first: free slots <- waiting candidates
                busy = self._schedule(now) > 0 or busy
                self._commit()
            if self.stop_reason is None:
                self._top_up()
                busy = self._schedule(now) > 0 or busy
                busy = self._prefetch(now) > 0 or busy
                self._rebalance()
                if not self.running and self.waiting:
                    sizes = sorted({spec.size for spec in self.waiting.values()})
                    raise RuntimeError(
                        f"placement {self.policy.name!r} starts none of {len(self.waiting)} waiting "
                        f"trials (sizes {sizes}) on an idle cluster of {self.layout.num_nodes} nodes x "
                        f"{self.layout.slots_per_node} slots ({self.layout.usable_slots} usable)")
            self._commit()
            self._periodic(now)
            if self._done():
                break
            spent = time.perf_counter() - t0
            if busy:
                self._rank0_busy_s += spent
                self._backoff.activity()
            else:
                self._backoff.sleep()
        now = time.time()
        self._log("campaign_finished", reason=self.stop_reason)
        self._flush_journal()
        self._write_results()
        self.progress.show(self._snapshot(now))
        self.progress.close()
        return CampaignSummary(
            reason=self.stop_reason or "", finished=self.finished, failed=self.failed,
            statuses=dict(self.statuses), best_objective=self.best, best_trial=self.best_trial,
            elapsed_s=now - self.t_go, stopped_by_failures=self.stopped_by_failures,
            failure_message=self.failure_message, rank0_busy_s=self._rank0_busy_s,
            trial_process_s=self._trial_process_s,
            slot_seconds=self.layout.usable_slots * (now - self.t_go))

    def shutdown(self, reason: str) -> None:
        """Tell every agent to stop (kills whatever still runs there) and wait for the sends."""
        reqs = [self.comm.isend(Shutdown(reason), dest=r, tag=TAG_SHUTDOWN)
                for r in sorted(set(self.layout.slot_to_rank.values()))]
        for r in reqs + self._sends:
            r.Wait()
