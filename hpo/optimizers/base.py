"""The ask/tell interface every optimizer backend implements.

The campaign asks for suggestions in batches (never waiting for running trials), tells each result
when its trial ends (``None`` for a failed trial: backends record it with their own failure marker,
never with a made-up number) and, on resume, replays the history with :meth:`Optimizer.tell_past`.
All objectives are minimised. A multi-objective optimizer (``num_objectives`` > 1) is told a tuple
of that many finite numbers per trial (or ``None``); its best (:attr:`Optimizer.best_objective`)
is by the first.
"""

from __future__ import annotations

import inspect
import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from hpo.space import SearchSpace

__all__ = ["Objective", "Optimizer", "OptimizerOptionError", "Suggestion", "UnknownSuggestionError"]


@dataclass(frozen=True)
class Suggestion:
    """One point of the search space to evaluate; ``suggestion_id`` is unique per optimizer."""

    suggestion_id: int
    params: dict[str, Any]


#: what a trial is told: one number, several (a multi-objective optimizer), or None (failed)
Objective = float | tuple[float, ...] | None


def _finite_number(value: Any) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"objective must be a number or None (failed), got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"objective must be finite, got {value!r}: tell None for a failed trial")
    return float(value)


class UnknownSuggestionError(ValueError):
    """``tell`` of an id this optimizer never handed out, or already told."""


class OptimizerOptionError(ValueError):
    """An option the backend does not accept (the message names it and lists the accepted ones)."""


def check_options(backend: str, options: Mapping[str, Any], target: Callable, reserved: set[str]) -> None:
    """Raise :class:`OptimizerOptionError` for options that ``target`` does not accept or that the
    backend sets itself (``reserved``)."""
    accepted = {
        name
        for name, p in inspect.signature(target).parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name != "self"
    } - reserved
    for name in options:
        if name not in accepted:
            raise OptimizerOptionError(
                f"optimizer {backend!r}: unknown option {name!r}; accepted: {sorted(accepted)}"
            )


class Optimizer(ABC):
    """Batched ask/tell over a :class:`SearchSpace` (minimisation).

    Subclasses implement ``_ask``, ``_tell`` and ``_tell_past``; this class hands out unique ids,
    checks and normalises parameters, tracks the pending suggestions and the best result."""

    name: str = "base"

    def __init__(self, space: SearchSpace, seed: int = 0, num_objectives: int = 1):
        if num_objectives < 1:
            raise ValueError(f"num_objectives must be >= 1, got {num_objectives}")
        self.space = space
        self.seed = seed
        self.num_objectives = num_objectives
        self._next_id = 0
        self._pending: dict[int, dict[str, Any]] = {}
        self.num_told = 0
        self.num_failed = 0
        self.best_objective: float | None = None
        self.best_params: dict[str, Any] | None = None

    # -- public interface -------------------------------------------------------------------
    def ask(self, n: int) -> list[Suggestion]:
        """``n`` new suggestions (valid points of the space, ids never reused)."""
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"ask: n must be a non-negative integer, got {n!r}")
        if n == 0:
            return []
        raw = self._ask(n)
        if len(raw) != n:
            raise RuntimeError(f"optimizer {self.name!r} returned {len(raw)} points for ask({n})")
        out = []
        for params in raw:
            params = self.space.coerce(params)
            sid = self._next_id
            self._next_id += 1
            self._pending[sid] = params
            out.append(Suggestion(sid, params))
        return out

    def tell(self, suggestion_id: int, objective: Objective, stopped_after: int | None = None) -> None:
        """Report the result of a suggestion (a number, or a tuple of ``num_objectives`` numbers);
        ``None`` marks a failed trial. ``stopped_after``: the
        campaign's stopper ended the trial after that many epochs (the fidelity it reached), and
        ``objective`` is its best so far; a backend that knows fidelities records it as such
        (:meth:`_tell_stopped`), the others as a result."""
        if suggestion_id not in self._pending:
            raise UnknownSuggestionError(
                f"optimizer {self.name!r}: suggestion id {suggestion_id!r} is unknown or was "
                f"already told (pending ids: {self._describe_pending()})"
            )
        objective = self._check_objective(objective)
        params = self._pending.pop(suggestion_id)
        self._record(params, objective)
        if stopped_after is not None and objective is not None:
            self._tell_stopped(suggestion_id, params, objective, stopped_after)
        else:
            self._tell(suggestion_id, params, objective)

    def tell_past(self, params: Mapping[str, Any], objective: Objective) -> None:
        """Replay a result from an earlier run of the campaign (resume)."""
        objective = self._check_objective(objective)
        params = self.space.coerce(params)
        self._record(params, objective)
        self._tell_past(params, objective)

    @property
    def pending_ids(self) -> list[int]:
        """Ids handed out and not told yet."""
        return sorted(self._pending)

    # -- backend hooks ------------------------------------------------------------------------
    @abstractmethod
    def _ask(self, n: int) -> list[dict[str, Any]]:
        """``n`` parameter dicts (any numeric types; normalised by the caller)."""

    @abstractmethod
    def _tell(self, suggestion_id: int, params: dict[str, Any], objective: Objective) -> None:
        """Record the result of a suggestion handed out by :meth:`_ask` (a float, or a tuple of
        ``num_objectives`` floats, or None)."""

    @abstractmethod
    def _tell_past(self, params: dict[str, Any], objective: Objective) -> None:
        """Record a result of a point this optimizer instance did not suggest."""

    def _tell_stopped(self, suggestion_id: int, params: dict[str, Any], objective: float | tuple[float, ...],
                      epochs: int) -> None:
        """Record a trial stopped early after ``epochs`` epochs with ``objective`` its best so far
        (default: as a result)."""
        self._tell(suggestion_id, params, objective)

    # -- helpers ------------------------------------------------------------------------------
    def _check_objective(self, objective: Any) -> Objective:
        if objective is None:
            return None
        if self.num_objectives == 1:
            return _finite_number(objective)
        if not isinstance(objective, Sequence) or len(objective) != self.num_objectives:
            raise ValueError(f"optimizer {self.name!r}: {self.num_objectives} objectives per trial, got {objective!r}")
        return tuple(_finite_number(v) for v in objective)

    def _record(self, params: dict[str, Any], objective: Objective) -> None:
        self.num_told += 1
        if objective is None:
            self.num_failed += 1
            return
        first = objective[0] if isinstance(objective, tuple) else objective
        if self.best_objective is None or first < self.best_objective:
            self.best_objective = first
            self.best_params = dict(params)

    def _describe_pending(self) -> str:
        ids = sorted(self._pending)
        if len(ids) > 8:
            return f"{ids[:4]} ... {ids[-2:]} ({len(ids)} in all)"
        return str(ids)
