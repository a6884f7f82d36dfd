"""What becomes of a trial attempt when its processes end: the agent's report of one process (its
``result.json``, read once here, its log tail, an infrastructure fault), and rank 0's merge of the
reports of all processes of the attempt into one :class:`TrialResult` (a synthesised ``failed`` or
``timeout`` one when the process died before it could write its own: an exception outside the
trainer's handler, a segfault, an OOM kill, a hang killed by the agent).
"""

from __future__ import annotations

import math
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from hydragnn_ensemble.result import OOM_REASON, TrialResult, TrialStatus
from hydragnn_ensemble.run_dir import RunDir
from hydragnn_ensemble.untrusted_files import read_tail
from scheduler.runtime.faults import EXIT_INFRASTRUCTURE, disk_full
from scheduler.runtime.messages import PartExited
from scheduler.runtime.trial_process import TrialProcess

LOG_TAIL_LINES = 30


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
