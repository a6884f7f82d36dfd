"""Every process a trial started ends with the trial, also one that left its process group.

A trial runs in its own session and is ended by signalling its process group, which misses a
descendant that called ``setsid()`` (a daemon, a data-loader server) after its parent exited:
such an orphan is re-parented to init and outlives the campaign. Linux's child subreapers keep
it in our tree instead (``prctl(PR_SET_CHILD_SUBREAPER)``):

* every trial process is a subreaper, so while it runs every process it started, in whatever
  session, stays its descendant;
* the process that starts trials (the agent for ``exec``'d trials, the fork server for forked ones)
  is a subreaper too, so when a trial ends what it left behind becomes that process's child, and
  :func:`kill_adopted` ends every such child that is not a running trial.

A cgroup per trial would also catch a process that escapes with a double fork through a process
outside our tree; a batch job's ranks cannot create cgroups on most machines.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

#: prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h)
SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    return ctypes.CDLL(None, use_errno=True).prctl(SUBREAPER, 1, 0, 0, 0) == 0


def children_of(pid: int, proc: str = "/proc") -> dict[int, bool]:
    """The children of ``pid`` on this host, each with whether it is a zombie (empty without
    ``/proc``)."""
    try:
        entries = os.listdir(proc)
    except OSError:
        return {}
    found = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and int(fields[1]) == pid:
            found[int(entry)] = fields[0] == b"Z"
    return found


def kill_adopted(parent: int, keep: set[int] | frozenset[int], wait_s: float = 0.5) -> list[int]:
    """SIGKILL every child of ``parent`` (a subreaper: this process, or its fork server) that is not
    in ``keep`` (running trials, helper processes): what ended trials left behind. A parent reaps
    its own; this process waits up to ``wait_s`` for its own to die and reaps them. Returns their
    pids."""
    children = {pid: zombie for pid, zombie in children_of(parent).items() if pid not in keep}
    for pid, zombie in children.items():
        if not zombie:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    if parent == os.getpid():
        _reap(set(children), wait_s)
    return sorted(children)


def _reap(pids: set[int], wait_s: float) -> None:
    """Collect ``pids`` (children of this process) as they die, for at most ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while pids and time.monotonic() < deadline:
        for pid in list(pids):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                pids.discard(pid)
        if pids:
            time.sleep(0.005)
