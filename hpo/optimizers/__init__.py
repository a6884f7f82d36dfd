"""Optimizer backends behind one ask/tell interface, and :func:`make_optimizer` to pick one."""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any, Mapping

from hpo.optimizers.base import (
    Optimizer,
    OptimizerOptionError,
    Suggestion,
    UnknownSuggestionError,
)
from hpo.space import SearchSpace

__all__ = [
    "OPTIMIZERS",
    "OPTIMIZER_NAMES",
    "OptimizerEntry",
    "check_optimizer_name",
    "Optimizer",
    "OptimizerOptionError",
    "Suggestion",
    "UnknownSuggestionError",
    "check_optimizer_options",
    "make_optimizer",
]

@dataclass(frozen=True)
class OptimizerEntry:
    """Where a backend lives: its module (imported only when the backend is chosen, so that
    DeepHyper or Optuna load only for the campaigns that use them) and its :class:`Optimizer`
    subclass there. The module also defines ``validate_options(options)``."""

    module: str
    class_name: str
    summary: str


#: The registry of optimizer backends: the only list of their names (campaign validation, the
#: README, docs/extending.md). A backend is one module plus one line here.
OPTIMIZERS: dict[str, OptimizerEntry] = {
    "deephyper-cbo": OptimizerEntry("hpo.optimizers.deephyper_cbo", "DeepHyperCBO",
                                    "DeepHyper's centralized Bayesian optimization (the default)"),
    "optuna-tpe": OptimizerEntry("hpo.optimizers.optuna_tpe", "OptunaTPE",
                                 "Optuna's TPE sampler (MOTPE for several objectives)"),
    "optuna-nsga2": OptimizerEntry("hpo.optimizers.optuna_nsga2", "OptunaNSGA2",
                                   "Optuna's NSGA-II sampler (evolutionary, for several objectives)"),
    "random": OptimizerEntry("hpo.optimizers.random_search", "RandomSearch", "uniform random search"),
    "pbt": OptimizerEntry("hpo.optimizers.pbt", "PopulationBasedTraining",
                          "population-based training (exploit and explore while the trials train)"),
}
OPTIMIZER_NAMES: tuple[str, ...] = tuple(OPTIMIZERS)


def check_optimizer_name(name: str) -> str:
    """``name`` if a backend is registered under it, else ValueError with the closest name."""
    if name not in OPTIMIZERS:
        raise _unknown(name)
    return name


def make_optimizer(
    name: str, space: SearchSpace, seed: int = 0, options: Mapping[str, Any] | None = None,
    num_objectives: int = 1,
) -> Optimizer:
    """The backend called ``name`` over ``space`` minimising ``num_objectives`` objectives;
    ``options`` go to the backend's library."""
    entry = OPTIMIZERS[check_optimizer_name(name)]
    backend = getattr(importlib.import_module(entry.module), entry.class_name)
    return backend(space, seed, options, num_objectives)


def check_optimizer_options(name: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`OptimizerOptionError` for options the backend ``name`` does not accept,
    without building it (imports the backend's library only when ``options`` is not empty)."""
    entry = OPTIMIZERS[check_optimizer_name(name)]
    if options:
        importlib.import_module(entry.module).validate_options(options)


def _unknown(name: str) -> ValueError:
    match = difflib.get_close_matches(str(name), OPTIMIZER_NAMES, n=1)
    hint = f" (did you mean {match[0]!r}?)" if match else ""
    return ValueError(f"unknown optimizer {name!r}{hint}; choose one of {list(OPTIMIZER_NAMES)}")
