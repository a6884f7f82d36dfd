"""Optimizer backends behind one ask/tell interface, and :func:`make_optimizer` to pick one."""

from __future__ import annotations

import difflib
import importlib
from typing import Any, Mapping

from hpo.optimizers.base import (
    Optimizer,
    OptimizerOptionError,
    Suggestion,
    UnknownSuggestionError,
)
from hpo.space import SearchSpace

__all__ = [
    "OPTIMIZER_NAMES",
    "Optimizer",
    "OptimizerOptionError",
    "Suggestion",
    "UnknownSuggestionError",
    "check_optimizer_options",
    "make_optimizer",
]

OPTIMIZER_NAMES: tuple[str, ...] = ("deephyper-cbo", "optuna-tpe", "random")


def make_optimizer(
    name: str, space: SearchSpace, seed: int = 0, options: Mapping[str, Any] | None = None
) -> Optimizer:
    """The backend called ``name`` over ``space``; ``options`` go to the backend's library.

    The backend modules (and DeepHyper/Optuna) are imported only when chosen."""
    if name == "deephyper-cbo":
        from hpo.optimizers.deephyper_cbo import DeepHyperCBO

        return DeepHyperCBO(space, seed, options)
    if name == "optuna-tpe":
        from hpo.optimizers.optuna_tpe import OptunaTPE

        return OptunaTPE(space, seed, options)
    if name == "random":
        from hpo.optimizers.random_search import RandomSearch

        return RandomSearch(space, seed, options)
    raise _unknown(name)


def check_optimizer_options(name: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`OptimizerOptionError` for options the backend ``name`` does not accept,
    without building it (imports the backend's library only when ``options`` is not empty)."""
    if name not in OPTIMIZER_NAMES:
        raise _unknown(name)
    if not options:
        return
    module = {"deephyper-cbo": "deephyper_cbo", "optuna-tpe": "optuna_tpe", "random": "random_search"}[name]
    importlib.import_module(f"hpo.optimizers.{module}").validate_options(options)


def _unknown(name: str) -> ValueError:
    match = difflib.get_close_matches(str(name), OPTIMIZER_NAMES, n=1)
    hint = f" (did you mean {match[0]!r}?)" if match else ""
    return ValueError(f"unknown optimizer {name!r}{hint}; choose one of {list(OPTIMIZER_NAMES)}")
