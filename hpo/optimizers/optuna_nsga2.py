"""Optuna's NSGA-II behind the ask/tell interface: an evolutionary search for several objectives
(it works for one too), sharing the in-memory study of :mod:`hpo.optimizers.optuna_tpe`.

Options are ``NSGAIISampler`` keyword arguments (``population_size``, ``mutation_prob``, ...),
except ``seed``, which the backend sets, plus ``log_trials``. A generation is bred from finished
trials only: with fewer than ``population_size`` finished, NSGA-II draws at random.
"""

from __future__ import annotations

from typing import Any, Mapping

from hpo.optimizers.base import check_options
from hpo.optimizers.optuna_tpe import OptunaTPE

__all__ = ["OptunaNSGA2", "validate_options"]


def validate_options(options: Mapping[str, Any]) -> None:
    """Raise OptimizerOptionError for an option ``NSGAIISampler`` does not take."""
    from optuna.samplers import NSGAIISampler

    sampler_options = {k: v for k, v in options.items() if k != "log_trials"}
    check_options(OptunaNSGA2.name, sampler_options, NSGAIISampler.__init__, reserved={"seed"})


class OptunaNSGA2(OptunaTPE):
    """Optuna 5 NSGA-II sampler, minimising the objective(s)."""

    name = "optuna-nsga2"

    def make_sampler(self, seed: int, options: dict[str, Any]) -> Any:
        from optuna.samplers import NSGAIISampler

        validate_options(options)
        return NSGAIISampler(seed=seed, **options)
