"""How long a rank sleeps between two looks at its MPI messages.

MPI has no file descriptor to wait on, and a blocking receive in MPICH spins a whole core, so the
ranks poll (``Iprobe``) with short sleeps. A message is seen about 1.5 poll intervals after it was
sent (measured: a round trip between two ranks polling every 1 ms takes 3.4 ms, every 0.2 ms 0.9 ms).
:class:`Backoff` polls fast for a short while after something happened (a report is answered
by a start message within milliseconds, and trials end in bursts) and slowly otherwise, so that idle
ranks cost almost no CPU (each poll costs ~20 us).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

FAST_POLL_S = 0.0002
SLOW_POLL_S = 0.001
HOT_WINDOW_S = 0.05


@dataclass
class Backoff:
    """Sleep ``fast_s`` within ``hot_s`` of the last :meth:`activity`, ``slow_s`` after that."""

    fast_s: float = FAST_POLL_S
    slow_s: float = SLOW_POLL_S
    hot_s: float = HOT_WINDOW_S
    _last: float = field(default=float("-inf"), repr=False)

    def activity(self) -> None:
        """Something happened (a message, a trial ended): poll fast for a while."""
        self._last = time.monotonic()

    def interval(self) -> float:
        """The sleep :meth:`sleep` would take now."""
        return self.fast_s if time.monotonic() - self._last < self.hot_s else self.slow_s

    def sleep(self) -> None:
        time.sleep(self.interval())


def wait_quietly(request, interval_s: float = 0.01) -> None:
    """Wait for an MPI request (e.g. ``comm.Ibarrier()``) sleeping between tests, where a blocking
    call would spin a core (agents wait like this while rank 0 sets a campaign up)."""
    while not request.Test():
        time.sleep(interval_s)
