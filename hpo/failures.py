"""Trial failures: grouped by what went wrong, not by which trial it happened to, and counted so
that the status counts and the failures by reason always agree.

A *failure* is a finished trial without an objective: what the optimizer is told as a failure and
what ``failure_threshold`` counts. That is every ``failed`` trial, and a ``timeout``, ``stopped`` or
``diverged`` one that ended before its first validation (a timeout in epoch 0). Its reason names
its status unless that is ``failed`` (:func:`failure_text`), and the status counts say how many of
each status had no objective (:func:`status_words`), so the groups of a status add up to that number.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from hpo.status import ALL_STATUSES, Status, TrialStatus

# A path into one trial's directory: ".../trials/17/" (absolute or relative), up to the file name.
_TRIAL_PATH = re.compile(r"(?:[^\s'\"(]*/)?trials/\d+/")


def failure_group(reason: str) -> str:
    """``reason`` with trial directories stripped, so that one cause in many trials reads the same:
    ``/c/trials/3/config.json: bad key`` and ``/c/trials/8/config.json: bad key`` both become
    ``config.json: bad key``."""
    return _TRIAL_PATH.sub("", reason)


def failure_text(status: Status | str, reason: str | None) -> str:
    """What a failure with ``status`` and ``reason`` is listed as: the reason (the status when there
    is none), after ``"<status>: "`` unless the status is ``failed`` (``timeout: time budget of 60 s
    reached in epoch 0``; ``out of memory``)."""
    word = str(status)
    if not reason or reason == word:
        return word
    return reason if word == TrialStatus.FAILED.value else f"{word}: {reason}"


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


def _ordered(counts: Mapping[Status | str, int]) -> list[tuple[str, int]]:
    """Non-zero counts in the reports' status order (unknown words after, by name)."""
    order = {s.value: i for i, s in enumerate(ALL_STATUSES)}
    items = [(str(k), n) for k, n in counts.items() if n]
    return sorted(items, key=lambda kv: (order.get(kv[0], len(order)), kv[0]))


def status_words(counts: Mapping[Status | str, int], without_objective: Mapping[Status | str, int],
                 number_first: bool = False) -> str:
    """``completed 3, timeout 6 (2 without an objective), failed 1`` (``number_first``: ``3 completed``
    ...): trials per status, and for a status other than ``failed`` how many of them finished without
    an objective (failures, see the module docstring); ``none`` when there are no trials."""
    missing = {str(k): n for k, n in without_objective.items()}
    parts = []
    for word, n in _ordered(counts):
        text = f"{n} {word}" if number_first else f"{word} {n}"
        if missing.get(word) and word != TrialStatus.FAILED.value:
            text += f" ({missing[word]} without an objective)"
        parts.append(text)
    return ", ".join(parts) or "none"


def failures_heading(without_objective: Mapping[Status | str, int]) -> str:
    """``3 trials without an objective: failed 1, timeout 2``: what the failures by reason add up to,
    per status as :func:`status_words` counts them."""
    total = sum(without_objective.values())
    per_status = ", ".join(f"{word} {n}" for word, n in _ordered(without_objective))
    return f"{total} trial{'s' if total != 1 else ''} without an objective: {per_status}"
