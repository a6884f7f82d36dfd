"""Infrastructure faults: what the machine did, not what a trial did.

A full disk, a quota, an I/O error or a read-only file system (:data:`INFRASTRUCTURE_ERRNOS`), a
trial process that cannot be started, and an agent's fork server that died are not the trial's
fault. The campaign stops at once with one line naming the cause and the remedy
(:class:`InfrastructureFault`); the trials it cut short are journaled as neither finished nor
failed, so ``--resume`` re-runs them and none counts toward ``failure_threshold``.

Where they are seen:

* rank 0 writing the journal, ``results.csv`` or a trial's files (:func:`infrastructure_cause` of
  the ``OSError``);
* an agent that cannot start a trial process (any ``OSError`` at launch) or whose fork server died;
* a trial that ended without a result while its run directory's file system is full
  (:func:`disk_full`), or that says so itself: exit code :data:`EXIT_INFRASTRUCTURE` (the trainer's
  ``train`` command uses it when it cannot write its result for one of those errnos).
"""

from __future__ import annotations

import os

from hydragnn_ensemble.infrastructure import EXIT_INFRASTRUCTURE, INFRASTRUCTURE_ERRNOS, infrastructure_cause

__all__ = ["EXIT_INFRASTRUCTURE", "INFRASTRUCTURE_ERRNOS", "InfrastructureFault", "disk_full",
           "infrastructure_cause", "remedy"]

#: a run directory's file system with less free space than this is full
MIN_FREE_BYTES = 1 << 20


class InfrastructureFault(RuntimeError):
    """The campaign cannot go on here; ``cause`` and ``remedy`` make its one line."""

    def __init__(self, cause: str, remedy: str) -> None:
        self.cause, self.remedy = cause, remedy
        super().__init__(f"{cause}; {remedy}")


def disk_full(path: str | os.PathLike) -> str | None:
    """One line when the file system holding ``path`` has less than :data:`MIN_FREE_BYTES` free."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    free = info.f_bavail * info.f_frsize
    if free >= MIN_FREE_BYTES:
        return None
    return f"the file system of {path} is full ({free} bytes free) [ENOSPC]"


def remedy(campaign_dir: str | os.PathLike, cause: str) -> str:
    """What to do, for the one line: free space (or fix the file system), then resume."""
    first = ("free space on the file system of the campaign and the trials (df -h "
             f"{campaign_dir})" if "ENOSPC" in cause or "EDQUOT" in cause else "fix the cause")
    return f"{first}, then run the same hpo command with --resume: the trials it cut short are re-run"
