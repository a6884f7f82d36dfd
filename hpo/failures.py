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


def failure_counts(reasons: Iterable[str], top: int = 5) -> list[tuple[str, int]]:
    """The ``top`` most common failure groups with their counts, most common first (ties: first seen);
    a group is cut to one line of at most 300 characters."""
    counts = Counter(_one_line(failure_group(r)) for r in reasons)
    return counts.most_common(top)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def most_common_failure(reasons: Iterable[str]) -> tuple[str, int]:
    """The most frequent failure group and how many reasons fall into it (ties: the first seen)."""
    counts = Counter(failure_group(r) for r in reasons)
    if not counts:
        raise ValueError("no failures")
    return counts.most_common(1)[0]
