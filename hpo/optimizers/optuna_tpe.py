"""Optuna TPE behind the ask/tell interface.

An in-memory study (no SQLite, no journal file: the campaign journal is the durable record) with
``TPESampler(constant_liar=True)``, so trials handed out and still running count as pending and
batched asks spread out instead of repeating the same point. Failures are told as
``TrialState.FAIL``; :meth:`tell_past` adds finished trials with ``study.add_trial``. With several
objectives the study has one ``minimize`` direction per objective (TPE is then Optuna's MOTPE), and
a trial stopped early is told ``PRUNED`` without a value (Optuna keeps no intermediate values for
several objectives).

Options are ``TPESampler`` keyword arguments (``n_startup_trials``, ``multivariate``, ...), except
``seed`` and ``constant_liar`` which the backend sets, plus ``log_trials`` (default false: Optuna's
per-trial INFO lines are switched off by setting Optuna's logging verbosity to WARNING).
"""

from __future__ import annotations

from typing import Any, Mapping

from hpo.optimizers.base import Objective, Optimizer, check_options
from hpo.space import CategoricalParam, FloatParam, IntParam, SearchSpace

__all__ = ["OptunaTPE", "validate_options"]


def validate_options(options: Mapping[str, Any]) -> None:
    """Raise OptimizerOptionError for an option ``TPESampler`` does not take (``seed`` and
    ``constant_liar`` are set by the backend; ``log_trials`` is the backend's own)."""
    from optuna.samplers import TPESampler

    sampler_options = {k: v for k, v in options.items() if k != "log_trials"}
    check_options(OptunaTPE.name, sampler_options, TPESampler.__init__, reserved={"seed", "constant_liar"})


class OptunaTPE(Optimizer):
    """Optuna 5 TPE sampler with constant liar, minimising the objective(s). Subclasses for other
    Optuna samplers override :meth:`make_sampler` and their module's ``validate_options``."""

    name = "optuna-tpe"

    def __init__(self, space: SearchSpace, seed: int = 0, options: Mapping[str, Any] | None = None,
                 num_objectives: int = 1):
        super().__init__(space, seed, num_objectives)
        import optuna

        options = dict(options or {})
        log_trials = bool(options.pop("log_trials", False))
        if not log_trials:
            optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.sampler = self.make_sampler(seed, options)
        self.study = optuna.create_study(directions=["minimize"] * num_objectives, sampler=self.sampler)
        self.distributions = optuna_distributions(space)
        self._trials: dict[int, Any] = {}

    def make_sampler(self, seed: int, options: dict[str, Any]) -> Any:
        """The Optuna sampler for ``options`` (validated here: OptimizerOptionError naming one it
        does not take)."""
        from optuna.samplers import TPESampler

        validate_options(options)
        return TPESampler(seed=seed, constant_liar=True, **options)

    def _ask(self, n: int) -> list[dict[str, Any]]:
        out = []
        for i in range(n):
            trial = self.study.ask(self.distributions)
            # the base class gives the i-th point of this batch the id _next_id + i
            self._trials[self._next_id + i] = trial
            out.append(trial.params)
        return out

    def _tell(self, suggestion_id: int, params: dict[str, Any], objective: Objective) -> None:
        trial = self._trials.pop(suggestion_id)
        if objective is None:
            self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, list(objective) if isinstance(objective, tuple) else objective)

    def _tell_stopped(self, suggestion_id: int, params: dict[str, Any], objective: float | tuple[float, ...],
                      epochs: int) -> None:
        """A pruned trial with its value at the epoch it reached (TPE ranks pruned trials by it;
        several objectives: pruned, no value)."""
        trial = self._trials.pop(suggestion_id)
        if not isinstance(objective, tuple):
            trial.report(objective, step=epochs)
        self.study.tell(trial, state=self._optuna.trial.TrialState.PRUNED)

    def _tell_past(self, params: dict[str, Any], objective: Objective) -> None:
        TrialState = self._optuna.trial.TrialState
        frozen = self._optuna.trial.create_trial(
            state=TrialState.FAIL if objective is None else TrialState.COMPLETE,
            values=None if objective is None else list(objective) if isinstance(objective, tuple) else [objective],
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
