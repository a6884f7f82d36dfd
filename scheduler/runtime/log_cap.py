"""A size cap on trial logs: a trial that prints without end cannot fill the campaign's file system.

The agent checks each running trial's log every :data:`CHECK_EVERY_S` seconds. Once the log is over
its cap (campaign option ``trial_log_max_mb``), it keeps the last :data:`KEEP_FRACTION` of the cap,
from a line start, behind one line saying what was dropped. The trial writes with ``O_APPEND``, so
its later lines land after the kept tail; a line it writes during the cut itself (microseconds)
may be lost.
"""

from __future__ import annotations

import os
import time

from hydragnn_ensemble.untrusted_files import file_size, open_regular

CHECK_EVERY_S = 2.0
KEEP_FRACTION = 0.125  # of the cap: what stays after a cut (8 MiB of a 64 MiB cap)


def cap_log(path: str | os.PathLike, max_bytes: int) -> int:
    """Cut ``path`` to its tail if it is larger than ``max_bytes``; returns the bytes dropped."""
    try:
        size = file_size(path)  # a trial may have put a pipe or a link there: never opened then
    except OSError:
        return 0
    if size <= max_bytes:
        return 0
    keep = max(1, int(max_bytes * KEEP_FRACTION))
    try:
        fd = open_regular(path, os.O_RDWR)
    except OSError:
        return 0
    try:
        tail = os.pread(fd, keep, size - keep)
        cut = tail.find(b"\n")
        tail = tail[cut + 1:] if 0 <= cut < len(tail) - 1 else tail
        dropped = size - len(tail)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        note = (f"[{stamp} log cut by the campaign agent: it reached {size} bytes, more than the "
                f"trial_log_max_mb cap of {max_bytes} bytes; the first {dropped} bytes were dropped, "
                f"the last {len(tail)} are kept]\n").encode()
        os.pwrite(fd, note + tail, 0)
        os.ftruncate(fd, len(note) + len(tail))
    except OSError:
        return 0
    finally:
        os.close(fd)
    return dropped
