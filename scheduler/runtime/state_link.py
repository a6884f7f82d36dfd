"""PBT's snapshot of a donor's training state: a hard link into the exploited trial's directory.

The trainer replaces its ``training_state.pt`` atomically after every epoch (a new file renamed
over the old one), so a hard link taken now keeps the state as it is now whatever the donor does
next, at the cost of one system call on rank 0. The donor's directory is the donor program's: only
a regular file is linked (never a link or anything else it may have put there).
"""

from __future__ import annotations

import os
from pathlib import Path

from hydragnn_ensemble.untrusted_files import is_regular_file, remove_any, write_atomic

__all__ = ["link_state"]


def link_state(source: Path, target: Path) -> str | None:
    """Hard-link ``source`` (a regular file) as ``target``, replacing whatever is there; None when
    done, else why not, written into ``target`` instead (the trainer then finds no readable state
    there, starts from scratch and says why in its log)."""
    tmp = target.with_name(target.name + ".link")
    remove_any(tmp)
    why = None
    if not is_regular_file(source):
        why = f"the donor's training state {source} is not there (it ended, or has not written one)"
    else:
        try:
            os.link(source, tmp, follow_symlinks=False)
            os.replace(tmp, target)
            return None
        except OSError as exc:
            remove_any(tmp)
            why = f"the donor's training state {source} could not be linked ({exc})"
    try:
        remove_any(target)
        write_atomic(target, why + "\n")
    except OSError:
        pass  # the trial directory takes nothing: the continuation starts from scratch all the same
    return why
