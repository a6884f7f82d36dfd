"""What the journal says of a trial: its final status (:class:`TrialStatus`, how its last attempt
ended) or, before that, a :class:`PendingStatus`. These two enums are the only place status words
are spelt (``tests/test_status_words.py`` holds every other module to that); everything keyed on a
status (report colours, DeepHyper's ``job_status``, Optuna's trial state, labels) is keyed on them.
"""

from __future__ import annotations

from enum import Enum
from typing import Union

from hydragnn_ensemble.result import STATUSES, TrialStatus

__all__ = ["ALL_STATUSES", "PendingStatus", "Status", "TrialStatus", "parse_status"]


class PendingStatus(str, Enum):
    """A trial without a final status yet (the journal has no end event of its last attempt)."""

    RUNNING = "running"  # its attempt started and has not ended
    INTERRUPTED = "interrupted"  # its attempt was cut short by a restart: re-run on --resume
    RETRYING = "retrying"  # its attempt failed and the campaign decided to re-run it
    MOVED = "moved"  # its attempt checkpointed and left its slots; the next attempt continues it wider
    SUGGESTED = "suggested"  # the optimizer proposed it; never started

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


Status = Union[TrialStatus, PendingStatus]
#: every status a report may show, final first (in TrialStatus's order), then the pending ones
ALL_STATUSES: tuple[Status, ...] = (*STATUSES, *PendingStatus)


def parse_status(text: str) -> Status:
    """The status named ``text`` (ValueError for anything else)."""
    for status in ALL_STATUSES:
        if status.value == text:
            return status
    raise ValueError(f"unknown trial status {text!r}; known: {[s.value for s in ALL_STATUSES]}")
