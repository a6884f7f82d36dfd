"""Which number of a trial the campaign minimises.

``objective`` (the default) is the task-weighted validation loss the trainer reports;
``heads.<head>.val_mae`` / ``heads.<head>.val_rmse`` pick one head's validation error instead.
A trial that ended completed, timed out or stopped early has an objective for the optimizer (the
trainer keeps its best epoch so far); anything else (failed, diverged, killed) is a failure.
Telling timeouts their objective lets the optimizer learn what a configuration reaches within the
campaign's time limit.

:class:`ObjectiveKey` reads the number from the typed records only: a :class:`TrialResult`
(:meth:`ObjectiveKey.of_result`) or an :class:`EpochReport` (:meth:`ObjectiveKey.of_report`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from hydragnn_ensemble.result import STATUSES_WITH_OBJECTIVE, EpochReport, TrialResult

__all__ = ["OBJECTIVE_PATTERN", "STATUSES_WITH_OBJECTIVE", "ObjectiveKey", "check_objective_key",
           "objective_value"]

OBJECTIVE_PATTERN = re.compile(r"(objective|heads\.[^.\s]+\.(val_mae|val_rmse))")


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class ObjectiveKey:
    """A parsed objective key: the trainer's ``objective``, or ``metric`` of ``head``."""

    text: str
    head: str | None = None
    metric: str | None = None

    @classmethod
    @lru_cache(maxsize=64)
    def parse(cls, text: str) -> "ObjectiveKey":
        """The key ``text`` stands for; ValueError when it is not a supported objective."""
        if not isinstance(text, str) or not OBJECTIVE_PATTERN.fullmatch(text):
            raise ValueError(f"objective {text!r}: must be 'objective' or 'heads.<head>.val_mae' / "
                             "'heads.<head>.val_rmse'")
        if text == "objective":
            return cls(text)
        _, head, metric = text.split(".")
        return cls(text, head, metric)

    def of_report(self, report: EpochReport) -> float | None:
        """This key's value in one epoch report (None: not finite, or the head is missing)."""
        value = report.objective if self.head is None else report.metric(self.head, self.metric)
        return _finite(value)

    def of_result(self, result: TrialResult | None) -> float | None:
        """This key's value in a trial's result; None for a failure (no result, a status without an
        objective, a missing or non-finite value)."""
        if result is None or not result.status.has_objective:
            return None
        value = result.objective if self.head is None else result.metric(self.head, self.metric)
        return _finite(value)


def check_objective_key(key: str) -> str:
    """Return ``key`` or raise ValueError when it is not a supported objective."""
    return ObjectiveKey.parse(key).text


def objective_value(result: TrialResult | None, key: str = "objective") -> float | None:
    """The number to minimise from a trial's result, or None (see :meth:`ObjectiveKey.of_result`)."""
    return ObjectiveKey.parse(key).of_result(result)
