"""Optuna TPE behind the ask/tell interface.

An in-memory study (no SQLite, no journal file: the campaign journal is the durable record) with
``TPESampler(constant_liar=True)``, so trials handed out and still running count as pending and
batched asks spread out instead of repeating the same point. Failures are told as
``TrialState.FAIL``; :meth:`tell_past` adds finished trials with ``study.add_trial``.

Options are ``TPESampler`` keyword arguments (``n_startup_trials``, ``multivariate``, ...), except
``seed`` and ``constant_liar`` which the backend sets, plus ``log_trials`` (default false: Optuna's
per-trial INFO lines are switched off by setting Optuna's logging verbosity to WARNING).
"""

from __future__ import annotations

from typing import Any, Mapping

from hpo.optimizers.base import Optimizer, check_options
from hpo.space import CategoricalParam, FloatParam, IntParam, SearchSpace

__all__ = ["OptunaTPE", "validate_options"]


def validate_options(options: Mapping[str, Any]) -> None:
    """Raise OptimizerOptionError for an option ``TPESampler`` does not take (``seed`` and
    ``constant_liar`` are set by the backend; ``log_trials`` is the backend's own)."""
    from optuna.samplers import TPESampler

    sampler_options = {k: v for k, v in options.items() if k != "log_trials"}
    check_options(OptunaTPE.name, sampler_options, TPESampler.__init__, reserved={"seed", "constant_liar"})


class OptunaTPE(Optimizer):
    """Optuna 5 TPE sampler with constant liar, minimising the objective."""

    name = "optuna-tpe"

    def __init__(self, space: SearchSpace, seed: int = 0, options: Mapping[str, Any] | None = None):
        super().__init__(space, seed)
        import optuna
        from optuna.samplers import TPESampler

        options = dict(options or {})
        validate_options(options)
        log_trials = bool(options.pop("log_trials", False))
        if not log_trials:
            optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.sampler = TPESampler(seed=seed, constant_liar=True, **options)
        self.study = optuna.create_study(direction="minimize", sampler=self.sampler)
        self.distributions = optuna_distributions(space)
        self._trials: dict[int, Any] = {}

    def _ask(self, n: int) -> list[dict[str, Any]]:
        out = []
        for i in range(n):
            trial = self.study.ask(self.distributions)
            # the base class gives the i-th point of this batch the id _next_id + i
            self._trials[self._next_id + i] = trial
            out.append(trial.params)
        return out

    def _tell(self, suggestion_id: int, params: dict[str, Any], objective: float | None) -> None:
        trial = self._trials.pop(suggestion_id)
        if objective is None:
            self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, objective)

    def _tell_stopped(self, suggestion_id: int, params: dict[str, Any], objective: float, epochs: int) -> None:
        """A pruned trial with its value at the epoch it reached (TPE ranks pruned trials by it)."""
        trial = self._trials.pop(suggestion_id)
        trial.report(objective, step=epochs)
        self.study.tell(trial, state=self._optuna.trial.TrialState.PRUNED)

    def _tell_past(self, params: dict[str, Any], objective: float | None) -> None:
        TrialState = self._optuna.trial.TrialState
        frozen = self._optuna.trial.create_trial(
            state=TrialState.FAIL if objective is None else TrialState.COMPLETE,
            value=objective,
            params=params,
            distributions=self.distributions,
        )
        self.study.add_trial(frozen)


def optuna_distributions(space: SearchSpace) -> dict[str, Any]:
    """Optuna's distribution of every parameter of ``space`` (what ``study.ask`` takes)."""
    import optuna

    return {p.key: _distribution(optuna, p) for p in space.params}


def _distribution(optuna: Any, p: Any) -> Any:
    if isinstance(p, IntParam):
        return optuna.distributions.IntDistribution(p.low, p.high, log=p.log, step=p.step)
    if isinstance(p, FloatParam):
        return optuna.distributions.FloatDistribution(p.low, p.high, log=p.log)
    assert isinstance(p, CategoricalParam)
    return optuna.distributions.CategoricalDistribution(list(p.choices))
