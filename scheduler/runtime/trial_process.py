"""One running trial process as its agent watches it: its time limit, a stop's grace period, the
SIGTERM -> SIGKILL escalation, its log's size cap and the agent's notes in its log (how it is started
is :mod:`scheduler.runtime.launch`; what its end means, :mod:`scheduler.runtime.outcome`)."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from typing import Protocol

from hydragnn_ensemble.untrusted_files import append_text
from scheduler.runtime.log_cap import CHECK_EVERY_S, cap_log
from scheduler.runtime.messages import StartTrial

TERM_GRACE_S = 3.0  # SIGTERM -> SIGKILL
IGNORED_STOP = "did not stop after the campaign's stop request"


def stop_grace_s(minimum_s: float, longest_epoch_s: float) -> float:
    """How long a trial asked to stop may take to finish its epoch: the campaign's ``stop_grace_s``
    or twice its longest epoch so far, whichever is longer."""
    return max(minimum_s, 2.0 * longest_epoch_s)


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
