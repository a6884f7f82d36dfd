"""One trial process: its argument list, its environment, starting/killing it, and reading its outcome.

The trial program is any python module with the trainer CLI contract::

    python -m <module> train CONFIG --dataset DATA -o RUN_DIR --time-budget S --device cpu|cuda
                       --no-progress --rank R --world-size W [--local-rank 0]
                       [--init-method file://RUN_DIR/rendezvous.<attempt>]

(as ``hydragnn-ensemble train`` takes them). Output (stdout and stderr) goes to ``RUN_DIR/train.log``
for rank 0 (appended, like the trainer's own lines) and ``RUN_DIR/train.rank<R>.log`` for the others.

It writes ``RUN_DIR/result.json`` (:class:`hydragnn_ensemble.result.TrialResult`). When the process
dies before it can (exception outside the trainer's handler, segfault, OOM kill, hang killed by the
agent), the runtime synthesises a ``failed``/``timeout`` result with the reason and the log tail.

Two launchers start them (:class:`Launcher`): :class:`ExecLauncher` runs ``python -m ...`` for every
trial; :class:`scheduler.runtime.fork_server.ForkServerLauncher` (the default) forks each trial from a
per-agent server that has imported the program's heavy modules (torch, torch_geometric) once.

Isolation: every process starts in its own session (``start_new_session=True``), so a hang is killed
together with its children by signalling the process group; on Linux it also gets
``PR_SET_PDEATHSIG=SIGKILL`` so it cannot outlive an agent killed with ``kill -9`` (a trial orphaned
by a dead campaign would otherwise race its own re-run after ``--resume``).
"""

from __future__ import annotations

import ctypes
import math
import os
import select
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from hydragnn_ensemble.result import OOM_REASON, TrialResult, TrialStatus
from hydragnn_ensemble.run_dir import RunDir
from hydragnn_ensemble.untrusted_files import append_text, read_tail, write_atomic
from scheduler.runtime.faults import EXIT_INFRASTRUCTURE, disk_full
from scheduler.runtime.log_cap import CHECK_EVERY_S, cap_log
from scheduler.runtime.messages import PartExited, StartTrial

GPU_VISIBILITY_VARS: tuple[str, ...] = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
LOG_TAIL_LINES = 30
TERM_GRACE_S = 3.0  # SIGTERM -> SIGKILL
IGNORED_STOP = "did not stop after the campaign's stop request"


def stop_grace_s(minimum_s: float, longest_epoch_s: float) -> float:
    """How long a trial asked to stop may take to finish its epoch: the campaign's ``stop_grace_s``
    or twice its longest epoch so far, whichever is longer."""
    return max(minimum_s, 2.0 * longest_epoch_s)
#: Trial processes run this much nicer than the runtime's ranks: when a node is oversubscribed, the
#: rank that has to react (a report, a start) gets the CPU first and trials absorb the delay
#: (bench.campaign_overhead, 16 ranks on 2 cores: idle slot time 18.8% -> 15.0%).
TRIAL_NICENESS = 5


def kill_margin_s(time_limit_s: float) -> float:
    """Extra time a trial gets beyond its budget before the agent kills it (the trainer should stop
    by itself at ``--time-budget``, counted from its own start; this covers interpreter start-up on
    a loaded node and writing the final checkpoint and result.json)."""
    return min(60.0, max(0.05 * time_limit_s, min(10.0, time_limit_s)))


def trial_argv(start: StartTrial, python: str = sys.executable) -> list[str]:
    """The argument list of one trial process (never a shell string)."""
    argv = [
        python, "-m", start.program, "train", start.config_path,
        "--dataset", start.data_path,
        "-o", start.run_dir,
        "--time-budget", f"{start.time_budget_s:g}",
        "--device", "cuda" if start.device == "gpu" else "cpu",
        "--no-progress",
        "--rank", str(start.rank),
        "--world-size", str(start.world_size),
    ]
    if start.device == "gpu":
        argv += ["--local-rank", "0"]  # the slot's binding leaves exactly one visible GPU
    if start.init_method is not None:
        argv += ["--init-method", start.init_method]
    return argv


def write_config(start: StartTrial) -> None:
    """Write the trial's config.json from the start message, unless it exists (every process of a
    multi-slot trial may write it: same text, atomic rename)."""
    if start.config_json is None:
        return
    path = Path(start.config_path)
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, start.config_json)  # no temporary file left when the disk is full


def device_binding(device: str, inherited: dict[str, str], local_index: int) -> dict[str, str]:
    """GPU visibility variables for a trial process on this agent's slot.

    - ``cpu``: hide all GPUs (``CUDA_VISIBLE_DEVICES=""``, ``HIP_VISIBLE_DEVICES=""``).
    - ``gpu`` and the launcher bound one device to this rank (``srun --gpus-per-task=1`` sets e.g.
      ``ROCR_VISIBLE_DEVICES=3``): keep the launcher's binding unchanged.
    - ``gpu`` and the launcher exposed a list (every rank sees all GPUs of the node): pick the
      ``local_index``-th entry of that list.
    - ``gpu`` and nothing set: ``CUDA_VISIBLE_DEVICES=ROCR_VISIBLE_DEVICES=<local_index>`` (ROCm
      filters with ROCR first; HIP_VISIBLE_DEVICES is left alone because it indexes after ROCR).
    """
    if device == "cpu":
        return {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    if device != "gpu":
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
    if inherited:
        out = {}
        for var, value in inherited.items():
            entries = [e for e in value.split(",") if e.strip()]
            out[var] = entries[local_index % len(entries)] if len(entries) > 1 else value
        return out
    return {"CUDA_VISIBLE_DEVICES": str(local_index), "ROCR_VISIBLE_DEVICES": str(local_index)}


def trial_env(base_env: dict[str, str], binding: dict[str, str]) -> dict[str, str]:
    """Environment of a trial process: the agent's, one thread per process, unbuffered output, the
    GPU binding of the slot."""
    env = dict(base_env)
    env.update(
        OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1",
    )
    env.update(binding)
    return env


def read_log_tail(path: str | os.PathLike, lines: int = LOG_TAIL_LINES, max_bytes: int = 32768) -> str:
    """The last ``lines`` lines of a log file ("" if it does not exist)."""
    try:
        data = read_tail(path, max_bytes)
    except OSError:  # missing, or not a file (a trial may leave anything in its directory)
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def describe_exit(returncode: int) -> str:
    """One line for an abnormal exit code of a trial process."""
    if returncode == -signal.SIGKILL:
        return OOM_REASON
    if returncode == -signal.SIGSEGV:
        return "segmentation fault (SIGSEGV)"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with code {returncode} without writing result.json"


def _load_prctl(niceness: int = 0) -> Callable[[], None] | None:
    """A pre-exec hook setting PR_SET_PDEATHSIG=SIGKILL (Linux) and raising the niceness by
    ``niceness``, or None when there is nothing to do."""
    if not sys.platform.startswith("linux"):
        return (lambda: os.nice(niceness)) if niceness else None
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def die_with_parent() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if niceness:
            os.nice(niceness)

    return die_with_parent


class ProcessHandle(Protocol):
    """What an agent needs of a started process (``subprocess.Popen`` is one)."""

    pid: int

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while it runs."""


@dataclass
class TrialProcess:
    """A running trial process watched by an agent."""

    start: StartTrial
    handle: ProcessHandle
    start_time: float
    deadline: float
    pidfd: int | None = None
    timed_out: bool = False
    killed_reason: str | None = None
    term_sent_at: float | None = None
    log_fh: object = field(default=None, repr=False)
    log_checked_at: float = 0.0
    fault: str | None = None  # an infrastructure fault ended it (its fork server died)
    stop_deadline: float | None = None  # the campaign asked it to stop: ended by force after this
    last_epoch_at: float | None = None  # when its last epoch report was read
    longest_epoch_s: float = 0.0  # the longest time between two epoch reports (its start counts)

    @property
    def key(self) -> tuple[int, int]:
        return (self.start.trial_id, self.start.attempt)

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the process group (the trial and everything it started)."""
        try:
            os.killpg(self.handle.pid, sig)
        except ProcessLookupError:  # a forked child between fork() and its setsid(): only itself
            try:
                os.kill(self.handle.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        except PermissionError:
            pass

    def terminate(self, reason: str | None, now: float, timed_out: bool = False) -> None:
        """SIGTERM the group now; :meth:`enforce` sends SIGKILL after :data:`TERM_GRACE_S`."""
        if self.term_sent_at is not None:
            return
        self.timed_out = self.timed_out or timed_out
        if reason is not None and self.killed_reason is None and not timed_out:
            self.killed_reason = reason
        self.term_sent_at = now
        self.signal_group(signal.SIGTERM)

    def note(self, text: str) -> None:
        """Append one line of the agent's to the trial's log (best effort: the log may be gone, or
        be something a trial put there that is not a file)."""
        try:
            append_text(self.start.log_path, f"[agent] {text}\n")
        except OSError:
            pass

    def epochs_reported(self, now: float) -> None:
        """Epoch reports arrived at ``now``: the longest epoch so far sets the stop grace."""
        self.longest_epoch_s = max(self.longest_epoch_s, now - (self.last_epoch_at or self.start_time))
        self.last_epoch_at = now

    def stop_asked(self, reason: str, now: float) -> None:
        """The campaign asked the trial to stop after its epoch: it gets :func:`stop_grace_s` to
        obey (counted from now), then :meth:`enforce` terminates it (SIGTERM, then SIGKILL as for the time limit)."""
        if self.stop_deadline is None:
            self.stop_deadline = now + stop_grace_s(self.start.stop_grace_s, self.longest_epoch_s)

    @property
    def ignored_stop(self) -> bool:
        """It was asked to stop and ended only when the agent terminated it."""
        return self.stop_deadline is not None and self.killed_reason is not None and \
            self.killed_reason.startswith(IGNORED_STOP)

    def enforce(self, now: float) -> None:
        """Apply the time limit, a stop's grace period, the SIGTERM->SIGKILL escalation and the
        log's size cap."""
        if now - self.log_checked_at >= CHECK_EVERY_S:
            self.log_checked_at = now
            cap_log(self.start.log_path, self.start.log_max_bytes)
        if self.term_sent_at is None and now >= self.deadline:
            self.terminate(None, now, timed_out=True)
        elif self.term_sent_at is None and self.stop_deadline is not None and now >= self.stop_deadline:
            grace = stop_grace_s(self.start.stop_grace_s, self.longest_epoch_s)
            reason = f"{IGNORED_STOP} within {grace:.3g} s; terminated"
            self.note(reason)
            self.terminate(reason, now)
        elif self.term_sent_at is not None and now - self.term_sent_at >= TERM_GRACE_S:
            self.signal_group(signal.SIGKILL)

    def poll(self) -> int | None:
        return self.handle.poll()

    def close(self) -> None:
        """After exit: kill stragglers of the group, close the log and the pidfd."""
        self.signal_group(signal.SIGKILL)
        if self.log_fh is not None:
            self.log_fh.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class Launcher(ABC):
    """Starts the trial processes of one agent slot and waits for them.

    Contract: :meth:`launch` starts one process (its own session, output appended to
    ``start.log_path``, the slot's GPU binding in its environment) and returns its
    :class:`TrialProcess`, or raises OSError when it cannot start; :meth:`wait` returns after at most
    ``timeout_s``, early when one of ``procs`` may have ended, and afterwards ``TrialProcess.poll()``
    reports every exit that happened; :meth:`close` releases the launcher's own resources (the agent
    has already ended its processes).
    """

    @abstractmethod
    def launch(self, start: StartTrial) -> TrialProcess:
        """Start one trial process."""

    @abstractmethod
    def wait(self, procs: list[TrialProcess], timeout_s: float) -> None:
        """Block up to ``timeout_s`` or until one of ``procs`` may have exited."""

    def ready(self) -> None:
        """Block until trials can be started without further set-up (at once by default)."""

    def close(self) -> None:
        """Release the launcher (nothing by default)."""


class ExecLauncher(Launcher):
    """Starts every trial as a new interpreter: ``python -m PROGRAM train ...``."""

    def __init__(self, binding: dict[str, str], python: str = sys.executable) -> None:
        self.env = trial_env(dict(os.environ), binding)
        self.python = python
        self._preexec = _load_prctl(TRIAL_NICENESS)

    def launch(self, start: StartTrial) -> TrialProcess:
        """Start the process; output goes to ``start.log_path``. Raises OSError if it cannot start."""
        Path(start.log_path).parent.mkdir(parents=True, exist_ok=True)
        log_fh = open(start.log_path, "ab")
        t0 = time.time()
        try:
            popen = subprocess.Popen(
                trial_argv(start, self.python),
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=self._preexec,
                close_fds=True,
            )
        except OSError:
            log_fh.close()
            raise
        pidfd = os.pidfd_open(popen.pid) if hasattr(os, "pidfd_open") else None
        return TrialProcess(start, popen, t0, t0 + start.kill_after_s, pidfd=pidfd, log_fh=log_fh)

    def wait(self, procs: list[TrialProcess], timeout_s: float) -> None:
        wait_for_exit(procs, timeout_s)


def wait_for_exit(procs: list[TrialProcess], timeout_s: float, extra_fds: tuple[int, ...] = ()) -> None:
    """Block up to ``timeout_s`` or until one of ``procs`` exits (its pidfd) or one of ``extra_fds``
    becomes readable, whichever is first. Processes without a pidfd must be covered by
    ``extra_fds``; otherwise this sleeps the whole timeout."""
    fds = [p.pidfd for p in procs if p.pidfd is not None]
    if len(fds) == len(procs) or extra_fds:
        select.select([*fds, *extra_fds], [], [], timeout_s)
    else:
        time.sleep(timeout_s)


def part_exited(proc: TrialProcess, agent_rank: int, returncode: int, now: float) -> PartExited:
    """The report of a finished process, with its result.json read when it is the reporting rank."""
    start = proc.start
    result, error = None, None
    if start.read_result:
        path = RunDir(Path(start.run_dir)).result
        if path.exists():
            try:
                result = TrialResult.read(path)
            except ValueError as exc:
                error = str(exc)
    log_tail = read_log_tail(start.log_path) if (returncode != 0 or result is None
                                                 or result.status != TrialStatus.COMPLETED) else ""
    return PartExited(
        agent_rank=agent_rank,
        trial_id=start.trial_id,
        attempt=start.attempt,
        rank=start.rank,
        returncode=returncode,
        start_time=proc.start_time,
        end_time=now,
        timed_out=proc.timed_out,
        killed_reason=proc.killed_reason,
        result=result,
        result_error=error,
        log_tail=log_tail,
        fault=_fault_of(proc, returncode, result, log_tail, agent_rank),
    )


def _fault_of(proc: TrialProcess, returncode: int, result: TrialResult | None, log_tail: str,
              agent_rank: int) -> str | None:
    """The infrastructure fault that ended a trial process, if any (:mod:`scheduler.runtime.faults`):
    its fork server died, it says so (exit code 75), or it ended without a good result on a full disk."""
    if proc.fault is not None:
        return f"agent rank {agent_rank}: {proc.fault}"
    last = next((ln.strip() for ln in reversed(log_tail.splitlines()) if ln.strip()), "")
    if returncode == EXIT_INFRASTRUCTURE:
        return f"trial {proc.start.trial_id} (agent rank {agent_rank}): {last[:300] or 'exit code 75'}"
    if returncode != 0 or result is None or result.status == TrialStatus.FAILED:
        full = disk_full(proc.start.run_dir)
        if full is not None:
            return f"trial {proc.start.trial_id} (agent rank {agent_rank}): {full}"
    return None


@dataclass(frozen=True)
class TrialOutcome:
    """A trial attempt's final result as the scheduler records it."""

    result: TrialResult
    synthesised: bool  # True when the runtime wrote result.json (the trainer could not)

    @property
    def reason(self) -> str | None:
        return self.result.failure_reason


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def merge_parts(parts: list[PartExited], slots: int, device: str, time_limit_s: float) -> TrialOutcome:
    """Combine the reports of all processes of one trial attempt into its :class:`TrialResult`.

    The trainer's own result.json (from rank 0) wins when it exists and the trial was not killed by
    the agent; otherwise the first abnormal exit (time limit, signal, exit code) gives the reason.
    """
    parts = sorted(parts, key=lambda p: p.rank)
    head = parts[0]
    wall = max(p.end_time for p in parts) - min(p.start_time for p in parts)
    timed_out = any(p.timed_out for p in parts)
    tail = next((p.log_tail for p in parts if p.log_tail and (p.returncode != 0 or p.rank == 0)), "")
    if head.result is not None and not timed_out:
        res = head.result  # read once by the agent; this report is its only holder here
        res.slots = slots
        if not res.wall_time_s:
            res.wall_time_s = wall
        synthesised = False
        if res.status == TrialStatus.COMPLETED and not _finite(res.objective):
            res.status, res.failure_reason = TrialStatus.DIVERGED, "completed without a finite objective"
            synthesised = True
        if res.status != TrialStatus.COMPLETED and not res.failure_reason:
            res.failure_reason = f"trainer reported status {res.status!r} without a reason"
            synthesised = True
        if res.status != TrialStatus.COMPLETED and not res.log_tail:
            res.log_tail = tail
            synthesised = True
        bad = [p for p in parts if p.returncode != 0 and p.killed_reason is None]
        if res.status == TrialStatus.COMPLETED and bad:
            res.status = TrialStatus.FAILED
            res.failure_reason = f"rank {bad[0].rank}: {describe_exit(bad[0].returncode)}"
            res.log_tail = bad[0].log_tail
            synthesised = True
        return TrialOutcome(res, synthesised)
    if timed_out:
        status, reason = TrialStatus.TIMEOUT, f"exceeded the trial time limit of {time_limit_s:g} s; killed"
    else:
        culprit = next((p for p in parts if p.returncode != 0 and p.killed_reason is None), None)
        if culprit is None:
            culprit = next((p for p in parts if p.returncode != 0), head)
        if culprit.returncode == 0:
            reason = head.result_error or "exited normally but wrote no result.json"
        elif culprit.killed_reason is not None:
            reason = culprit.killed_reason
        else:
            reason = describe_exit(culprit.returncode)
            if head.result_error:
                reason += f" ({head.result_error})"
            last_line = next((ln.strip() for ln in reversed(culprit.log_tail.splitlines()) if ln.strip()), "")
            if culprit.returncode > 0 and last_line:
                reason += f"; last log line: {last_line[:200]}"
        if len(parts) > 1:
            reason = f"rank {culprit.rank}: {reason}"
        status = TrialStatus.FAILED
        tail = culprit.log_tail or tail
    res = TrialResult(status=status, wall_time_s=wall, slots=slots, device=device,
                      failure_reason=reason, log_tail=tail)
    return TrialOutcome(res, True)
