"""Which number of a trial's ``result.json`` the campaign minimises.

``objective`` (the default) is the task-weighted validation loss the trainer reports;
``heads.<head>.val_mae`` / ``heads.<head>.val_rmse`` pick one head's validation error instead.
A completed trial, and a trial stopped by its time budget (``timeout``: the trainer keeps its best
epoch so far), have an objective for the optimizer; anything else (failed, diverged, killed) is a
failure. Telling timeouts their objective lets the optimizer learn what a configuration reaches
within the campaign's time limit.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from hydragnn_ensemble.result import STATUSES_WITH_OBJECTIVE, TrialResult

__all__ = ["OBJECTIVE_PATTERN", "STATUSES_WITH_OBJECTIVE", "check_objective_key", "objective_value"]

OBJECTIVE_PATTERN = re.compile(r"^(objective|heads\.[^.\s]+\.(val_mae|val_rmse))$")


def check_objective_key(key: str) -> str:
    """Return ``key`` or raise ValueError when it is not a supported objective."""
    if not isinstance(key, str) or not OBJECTIVE_PATTERN.fullmatch(key):
        raise ValueError(
            f"objective {key!r}: must be 'objective' or 'heads.<head>.val_mae' / "
            "'heads.<head>.val_rmse'"
        )
    return key


def objective_value(result: TrialResult | Mapping[str, Any] | None, key: str = "objective") -> float | None:
    """The number to minimise from a trial's result (or its result.json dict, as the journal holds
    it), or None (a failure: not completed or timed out, missing, or not finite)."""
    if isinstance(result, TrialResult):
        result = {"status": result.status, "objective": result.objective,
                  "heads": {name: vars(m) for name, m in result.heads.items()}}
    if not result or result.get("status") not in STATUSES_WITH_OBJECTIVE:
        return None
    if key == "objective":
        value = result.get("objective")
    else:
        _, head, metric = key.split(".")
        value = ((result.get("heads") or {}).get(head) or {}).get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
