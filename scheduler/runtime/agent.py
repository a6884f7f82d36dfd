"""An agent rank: owns one slot, starts the trial processes rank 0 sends it, watches and kills them.

Model (documented in :mod:`scheduler.runtime`): one agent rank per slot. This is what
``srun --ntasks-per-node=8 --gpus-per-task=1`` gives on Frontier (each rank sees its own GCD) and what
``mpiexec -n N`` gives on a workstation; ``resources.slots_per_node`` groups the agents of one host
into nodes for placement. With GPU sharing (``resources.gpu_sharing``) rank 0 sends a slot several
trials at once; the agent runs and watches them side by side (``procs`` holds every running one).

Trials are forked from the agent's fork server (:mod:`scheduler.runtime.fork_server`, torch already
imported) or exec'd as new interpreters (campaign option ``trial_launcher``). The loop never blocks
for long: it waits on its processes (pidfds, or the fork server's exit reports, so an exit is seen at
once) with a short timeout, then probes for messages from rank 0. Nothing a trial does (exception,
segfault, OOM kill, hang) can take the agent down: the trial is a separate process in its own
session, and every way it can end becomes a :class:`PartExited` report.

Learning curves: while a trial runs, the agent of its rank 0 reads the new lines of its
``progress.jsonl`` every :data:`PROGRESS_EVERY_S` and forwards them (:class:`EpochsReported`, in
order with the exit report, which follows the last of them); a :class:`StopTrial` from rank 0
becomes the trial's ``RUN_DIR/stop`` file, which the trainer reads after its epoch; a
:class:`MoveTrial` its ``RUN_DIR/move`` file (stop after the epoch, keep the training state).

Prefetch: a start with ``after`` set names the trial running on this slot; the agent writes its
config at once and starts it the moment that trial's process exits, before it reports the exit, so
the slot does not wait for the round trip to rank 0 (which matters for trials of a second or less).
"""

from __future__ import annotations

import os
import time

from pathlib import Path

from hydragnn_ensemble.infrastructure import infrastructure_cause
from hydragnn_ensemble.run_dir import RunDir
from hydragnn_ensemble.untrusted_files import write_atomic
from scheduler.runtime.launchers import make_launcher
from scheduler.runtime.messages import (
    TAG_EXITED,
    TAG_KILL,
    TAG_SHUTDOWN,
    TAG_START,
    TAG_STOP,
    TAG_UNQUEUE,
    AgentAssignment,
    AgentHello,
    GoOn,
    MoveTrial,
    KillTrial,
    LauncherSettings,
    PartExited,
    Shutdown,
    StartTrial,
    StopTrial,
    EpochsReported,
    Unqueue,
    Unqueued,
)
from scheduler.runtime.progress_tail import ProgressTail
from scheduler.runtime.polling import Backoff
from scheduler.runtime.launch import (
    GPU_VISIBILITY_VARS,
    device_binding,
    mps_control_found,
    write_config,
    write_verdicts,
)
from scheduler.runtime.outcome import part_exited
from scheduler.runtime.process_tree import become_subreaper
from scheduler.runtime.trial_process import TrialProcess

RUNNING_WAIT_S = 0.05  # a trial running: its exit wakes the agent at once (pidfd); MPI is probed
#                        this often (only KillTrial/StopTrial/Shutdown can arrive while the slot is busy)
CLOCK_SLACK_S = 1.0  # a reported time may exceed how long the agent saw the trial run by this much
PROGRESS_EVERY_S = 0.05  # how often a running trial's progress.jsonl is read (one fstat when unchanged)


def hello(comm) -> AgentHello:
    """This agent's start-up report (rank, host, the GPU variables the launcher set)."""
    from mpi4py import MPI

    inherited = {v: os.environ[v] for v in GPU_VISIBILITY_VARS if os.environ.get(v)}
    return AgentHello(rank=comm.Get_rank(), host=MPI.Get_processor_name(), inherited_devices=inherited,
                      mps_control=mps_control_found(dict(os.environ)))


class Agent:
    """The agent loop of one rank. ``run()`` returns when rank 0 sends :class:`Shutdown`."""

    def __init__(self, comm, assignment: AgentAssignment, me: AgentHello, device: str,
                 launcher: LauncherSettings) -> None:
        self.comm = comm
        self.rank = comm.Get_rank()
        self.assignment = assignment
        binding = device_binding(device, me.inherited_devices, assignment.local_index)
        become_subreaper()  # an exec'd trial's leftovers come here when it ends (process_tree)
        self.launcher = make_launcher(launcher.kind, binding, list(launcher.preload))
        self.procs: dict[tuple[int, int], TrialProcess] = {}
        self.queued: dict[tuple[int, int], StartTrial] = {}  # the start waiting for each running key
        self.backoff = Backoff()  # idle: poll fast right after a trial ended (a start follows)
        self._sends: list = []
        self.tails: dict[tuple[int, int], ProgressTail] = {}  # the learning curves this agent forwards
        self._progress_read_at = 0.0

    # -- messages ----------------------------------------------------------------------------------
    def _report(self, report: PartExited | Unqueued | EpochsReported) -> None:
        self._sends.append(self.comm.isend(report, dest=0, tag=TAG_EXITED))
        self._sends = [r for r in self._sends if not r.Test()]

    def _handle_start(self, msg: StartTrial) -> None:
        if msg.after is not None and msg.after in self.procs:
            try:
                write_config(msg)
            except OSError:
                pass  # reported when the start is tried (write_config runs again there)
            self.queued[msg.after] = msg
            return
        failed = self._launch(msg)
        if failed is not None:
            self._report(failed)

    def _launch(self, msg: StartTrial) -> PartExited | None:
        """Start the process; if it cannot start, the report of that (for the caller to send: a
        trial sent ahead is reported after the exit of the one it followed)."""
        try:
            write_config(msg)
            write_verdicts(msg)
        except OSError as exc:  # a full disk is the machine's fault; a run directory a trial wrecked is its own
            reason = f"could not write the trial's config {msg.config_path}: {exc}"
            return self._not_started(msg, reason, infrastructure=infrastructure_cause(exc) is not None)
        try:
            proc = self.launcher.launch(msg)
        except OSError as exc:  # no process could be made (no fork, no interpreter...): the machine's
            return self._not_started(msg, f"could not start the trial process: {exc}", infrastructure=True)
        self.procs[proc.key] = proc
        if msg.read_result:
            self.tails[proc.key] = ProgressTail(RunDir(Path(msg.run_dir)).progress)
        return None

    def _not_started(self, msg: StartTrial, reason: str, infrastructure: bool) -> PartExited:
        now = time.time()
        return PartExited(self.rank, msg.trial_id, msg.attempt, msg.rank, returncode=127, start_time=now,
                          end_time=now, killed_reason=reason,
                          fault=f"agent rank {self.rank}: {reason}" if infrastructure else None)

    def _handle_kill(self, msg: KillTrial) -> None:
        proc = self.procs.get((msg.trial_id, msg.attempt))
        if proc is not None:
            proc.terminate(msg.reason, time.time())

    def _handle_stop(self, msg: StopTrial | MoveTrial) -> None:
        """Write the trial's stop file (its trainer stops after the epoch), or for a move its move
        file (it stops after the epoch keeping its training state); a trial that ended already is
        left alone (its exit report is on its way)."""
        proc = self.procs.get((msg.trial_id, msg.attempt))
        if proc is None:
            return
        run_dir = RunDir(Path(proc.start.run_dir))
        path = run_dir.move if isinstance(msg, MoveTrial) else run_dir.stop
        try:
            write_atomic(path, msg.reason + "\n")
        except OSError as exc:  # the grace period below ends it all the same; its log says why
            proc.note(f"campaign {path.name} request could not be written to {path}: {exc}")
        proc.stop_asked(msg.reason, time.time())

    def _handle_go_on(self, msg: GoOn) -> None:
        """Tell the trial's trainer, waiting after a rung epoch, to go on (``RUN_DIR/go_on``)."""
        proc = self.procs.get((msg.trial_id, msg.attempt))
        if proc is None:
            return
        path = RunDir(Path(proc.start.run_dir)).go_on
        try:
            write_atomic(path, f"{msg.epoch}\n")
        except OSError as exc:  # the trainer goes on after its bounded wait all the same
            proc.note(f"campaign go-on could not be written to {path}: {exc}")

    def _forward_progress(self, key: tuple[int, int], proc: TrialProcess) -> None:
        tail = self.tails.get(key)
        if tail is None:
            return
        noted = len(tail.problems)
        epochs = tail.read(max_seconds=time.time() - proc.start_time + CLOCK_SLACK_S)
        for problem in tail.problems[noted:]:  # the trial's problem, in the trial's log
            proc.note(problem)
        if epochs:
            proc.epochs_reported(time.time())
            self._report(EpochsReported(self.rank, key[0], key[1], tuple(epochs)))

    def _handle_unqueue(self, msg: Unqueue) -> None:
        start = self.queued.get(msg.after)
        if start is not None and (start.trial_id, start.attempt) == (msg.trial_id, msg.attempt):
            del self.queued[msg.after]
            self._report(Unqueued(self.rank, msg.trial_id, msg.attempt, msg.after))

    def _drain_messages(self) -> Shutdown | None:
        from mpi4py import MPI

        status = MPI.Status()
        while self.comm.Iprobe(source=0, tag=MPI.ANY_TAG, status=status):
            tag = status.Get_tag()
            msg = self.comm.recv(source=0, tag=tag)
            if tag == TAG_START:
                self._handle_start(msg)
            elif tag == TAG_KILL:
                self._handle_kill(msg)
            elif tag == TAG_UNQUEUE:
                self._handle_unqueue(msg)
            elif tag == TAG_STOP and isinstance(msg, GoOn):
                self._handle_go_on(msg)
            elif tag == TAG_STOP:
                self._handle_stop(msg)
            elif tag == TAG_SHUTDOWN:
                return msg
            else:
                raise RuntimeError(f"agent {self.rank}: unexpected message tag {tag}")
        return None

    # -- processes ---------------------------------------------------------------------------------
    def _check_processes(self) -> None:
        now = time.time()
        read_progress = self.tails and now - self._progress_read_at >= PROGRESS_EVERY_S
        if read_progress:
            self._progress_read_at = now
        for key, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None:
                proc.enforce(now)
                if read_progress:
                    self._forward_progress(key, proc)
                continue
            end = time.time()
            proc.close()
            del self.procs[key]
            self.launcher.end_leftovers(list(self.procs.values()))  # what it left outside its group
            self._forward_progress(key, proc)  # the last epochs before the exit report
            self.tails.pop(key, None)
            successor = self.queued.pop(key, None)
            failed = self._launch(successor) if successor is not None else None  # first: the slot is free
            self._report(part_exited(proc, self.rank, code, end))
            if failed is not None:  # after the exit it followed: rank 0 starts it on that report
                self._report(failed)
            self.backoff.activity()

    def _shutdown(self, reason: str) -> None:
        """Kill what still runs (nothing, after a normal end) and wait for it; no reports: rank 0
        has stopped listening."""
        now = time.time()
        for proc in self.procs.values():
            proc.terminate(f"campaign shut down: {reason}", now)
        while self.procs:
            now = time.time()
            for key, proc in list(self.procs.items()):
                if proc.poll() is None:
                    proc.enforce(now)
                else:
                    proc.close()
                    del self.procs[key]
            if self.procs:
                self.launcher.wait(list(self.procs.values()), 0.01)
        self.launcher.end_leftovers([])

    def run(self) -> None:
        """Serve rank 0 until it sends Shutdown."""
        try:
            while True:
                if self.procs:
                    self.launcher.wait(list(self.procs.values()), RUNNING_WAIT_S)
                else:
                    self.backoff.sleep()
                self._check_processes()
                stop = self._drain_messages()
                if stop is not None:
                    self._shutdown(stop.reason)
                    return
        finally:
            self.launcher.close()
