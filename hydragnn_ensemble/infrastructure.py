"""Errors that are the machine's, not a trial's: a full disk, a quota, an I/O error, a read-only
file system. A trial that meets one does not fail: ``train`` exits with :data:`EXIT_INFRASTRUCTURE`
and a campaign stops so that the trial is re-run once the machine is fixed
(:mod:`scheduler.runtime.faults`)."""

from __future__ import annotations

import errno

#: errno -> what it means, for the faults that are the machine's
INFRASTRUCTURE_ERRNOS: dict[int, str] = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EIO: "input/output error",
    errno.EROFS: "read-only file system",
}
#: a trial program's exit code for "the machine failed me" (sysexits' EX_TEMPFAIL)
EXIT_INFRASTRUCTURE = 75


def infrastructure_cause(exc: BaseException | None) -> str | None:
    """One line for an ``OSError`` (itself or in its chain of causes) that is the machine's fault,
    else None."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno in INFRASTRUCTURE_ERRNOS:
            where = f" ({exc.filename})" if exc.filename else ""
            return f"{INFRASTRUCTURE_ERRNOS[exc.errno]} [{errno.errorcode[exc.errno]}]{where}"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None
