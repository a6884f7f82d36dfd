"""Grouping trial failures by what went wrong, not by which trial it happened to."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

# A path into one trial's directory: ".../trials/17/" (absolute or relative), up to the file name.
_TRIAL_PATH = re.compile(r"(?:[^\s'\"(]*/)?trials/\d+/")


def failure_group(reason: str) -> str:
    """``reason`` with trial directories stripped, so that one cause in many trials reads the same:
    ``/c/trials/3/config.json: bad key`` and ``/c/trials/8/config.json: bad key`` both become
    ``config.json: bad key``."""
    return _TRIAL_PATH.sub("", reason)


def most_common_failure(reasons: Iterable[str]) -> tuple[str, int]:
    """The most frequent failure group and how many reasons fall into it (ties: the first seen)."""
    counts = Counter(failure_group(r) for r in reasons)
    if not counts:
        raise ValueError("no failures")
    return counts.most_common(1)[0]
