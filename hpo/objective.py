"""Which number of a trial the campaign minimises.

``objective`` (the default) is the task-weighted validation loss the trainer reports;
``heads.<head>.val_mae`` / ``heads.<head>.val_rmse`` pick one head's validation error instead.

A multi-objective campaign (``objectives:``, :class:`Objectives`) minimises such an accuracy key
first and then any of the others or of the costs in :data:`COST_KEYS`: ``slot_seconds`` (what the
trial cost to train: its seconds x slots), ``inference_ms_per_graph`` (what the model costs to run,
see :mod:`hydragnn_ensemble.result`) and ``num_parameters``.
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

__all__ = ["COST_KEYS", "OBJECTIVE_PATTERN", "STATUSES_WITH_OBJECTIVE", "ObjectiveKey", "Objectives",
           "check_objective_key", "objective_value"]

OBJECTIVE_PATTERN = re.compile(r"(objective|heads\.[^.\s]+\.(val_mae|val_rmse))")
#: costs a multi-objective campaign may minimise besides accuracy -> what each is
COST_KEYS: dict[str, str] = {
    "slot_seconds": "seconds the trial trained x its slots",
    "inference_ms_per_graph": "the model's milliseconds per graph (validation passes, median)",
    "num_parameters": "the model's parameters",
}


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
    cost: str | None = None  # one of COST_KEYS (then head and metric are None)

    @classmethod
    @lru_cache(maxsize=64)
    def parse(cls, text: str, costs: bool = False) -> "ObjectiveKey":
        """The key ``text`` stands for (with ``costs``, a key of :data:`COST_KEYS` too); ValueError
        when it is not a supported objective."""
        if costs and text in COST_KEYS:
            return cls(text, cost=text)
        if not isinstance(text, str) or not OBJECTIVE_PATTERN.fullmatch(text):
            also = f", or a cost: {', '.join(COST_KEYS)}" if costs else ""
            raise ValueError(f"objective {text!r}: must be 'objective' or 'heads.<head>.val_mae' / "
                             f"'heads.<head>.val_rmse'{also}")
        if text == "objective":
            return cls(text)
        _, head, metric = text.split(".")
        return cls(text, head, metric)

    def of_report(self, report: EpochReport) -> float | None:
        """This key's value in one epoch report (None: not finite, the head is missing, or a cost)."""
        if self.cost is not None:
            return None
        value = report.objective if self.head is None else report.metric(self.head, self.metric)
        return _finite(value)

    def of_result(self, result: TrialResult | None) -> float | None:
        """This key's value in a trial's result; None for a failure (no result, a status without an
        objective, a missing or non-finite value)."""
        if result is None or not result.status.has_objective:
            return None
        if self.cost == "slot_seconds":
            value = result.wall_time_s * result.slots
        elif self.cost is not None:
            value = getattr(result, self.cost)
        else:
            value = result.objective if self.head is None else result.metric(self.head, self.metric)
        return _finite(value)


@dataclass(frozen=True)
class Objectives:
    """What a campaign minimises: one accuracy key (``primary``), then for a multi-objective
    campaign more keys (accuracy or cost). The primary orders trials wherever one order is needed
    (best trial, top-K, the stopper's rungs)."""

    keys: tuple[ObjectiveKey, ...]

    @classmethod
    def parse(cls, texts: "list[str] | tuple[str, ...]") -> "Objectives":
        """ValueError unless ``texts`` holds an accuracy key first and distinct keys after it."""
        texts = list(texts)
        if not texts:
            raise ValueError("objectives: give at least one")
        if len(set(texts)) != len(texts):
            raise ValueError(f"objectives: {texts} names a key twice")
        if texts[0] in COST_KEYS:
            raise ValueError(f"objectives: the first ({texts[0]!r}) must be an accuracy ('objective' or "
                             "'heads.<head>.val_mae' / val_rmse): it orders the trials and the stopper's rungs")
        return cls(tuple(ObjectiveKey.parse(t, costs=i > 0) for i, t in enumerate(texts)))

    @property
    def primary(self) -> ObjectiveKey:
        return self.keys[0]

    @property
    def multi(self) -> bool:
        return len(self.keys) > 1

    @property
    def texts(self) -> list[str]:
        return [k.text for k in self.keys]

    def of_result(self, result: TrialResult | None) -> float | tuple[float, ...] | None:
        """The primary's value (one key) or every key's (several); None when any is missing."""
        if not self.multi:
            return self.primary.of_result(result)
        values = [k.of_result(result) for k in self.keys]
        return None if any(v is None for v in values) else tuple(values)


def check_objective_key(key: str) -> str:
    """Return ``key`` or raise ValueError when it is not a supported objective."""
    return ObjectiveKey.parse(key).text


def objective_value(result: TrialResult | None, key: str = "objective") -> float | None:
    """The number to minimise from a trial's result, or None (see :meth:`ObjectiveKey.of_result`)."""
    return ObjectiveKey.parse(key).of_result(result)
