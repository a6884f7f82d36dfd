"""DeepHyper 0.13 centralised Bayesian optimisation (CBO) behind the ask/tell interface.

Only DeepHyper's ask/tell API is used (``deephyper.hpo.CBO`` over an ``HpProblem`` built from the
search space); its evaluator and its MPI storage are not (they abort with pip MPICH, and the
campaign runtime owns the processes).

Choices that keep the optimizer's cost per trial low (see ``bench/optimizer_cost.py``):

* ``multi_point_strategy="qUCBd"``: a batch of ``n`` points comes from one surrogate fit with
  ``n`` sampled exploration weights, instead of ``n`` refits with constant-liar lies;
* ``acq_optimizer="sampling"``: the acquisition function is minimised over random samples
  (``n_points``, default 10,000) instead of a genetic algorithm (about ten times cheaper);
* results are buffered by :meth:`tell` and given to DeepHyper in one batch on the next
  :meth:`ask`, so the surrogate is refitted once per ask instead of once per finished trial;
* ``surrogate_model="ET"`` (extremely randomised trees), DeepHyper's default, scales to thousands
  of results.

Failed trials are told with DeepHyper's failure marker ``"F"`` (replaced inside DeepHyper by the
worst observed value: ``filter_failures="max"``), never with a made-up number, and
``max_total_failures=-1`` so DeepHyper never stops on failures: the campaign's failure threshold
decides. DeepHyper maximises, so minimised objectives are told negated. Several objectives are
told as a tuple (each negated): CBO then scalarises them (``moo_scalarization_strategy``, Chebyshev
by default, with random weights per point) over min-max scaled objectives.

DeepHyper's qUCBd often returns the same point for several of a batch's exploration weights (a
batch of 8 held 2-5 distinct points in our tests). Exact duplicates of points already suggested are
replaced by seeded random draws from the space (extra exploration), so a campaign never trains one
config twice.

Options are ``CBO`` keyword arguments; ``acq_optimizer_kwargs`` are merged with the defaults.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hpo.optimizers.base import Objective, Optimizer, check_options
from hpo.space import CategoricalParam, FloatParam, IntParam, SearchSpace

__all__ = ["DeepHyperCBO", "validate_options"]

FAILURE_MARKER = "F"
DEFAULT_OPTIONS: dict[str, Any] = {
    "surrogate_model": "ET",
    "acq_func": "UCBd",
    "acq_optimizer": "sampling",
    "multi_point_strategy": "qUCBd",
}
DEFAULT_ACQ_OPTIMIZER_KWARGS: dict[str, Any] = {
    "n_points": 10_000,
    "filter_failures": "max",
    "max_total_failures": -1,
}
_RESERVED = {"problem", "random_state", "log_dir", "verbose", "stopper", "checkpoint_history_to_csv",
             "checkpoint_restart", "solution_selection"}
_MAX_REDRAWS = 100


def _deephyper_hpo() -> Any:
    """``deephyper.hpo``, imported without its side effect on MPI: ``deephyper.evaluator.mpi`` sets
    ``mpi4py.rc.initialize = False`` and imports ``mpi4py.MPI``; were that the first import of
    ``mpi4py.MPI`` in this process, MPI would stay uninitialised and the next MPI call (adios2's
    reader, the ensemble's ranks) would make MPICH abort the process. So ``mpi4py.MPI`` is imported
    (MPI initialised, as everywhere else in this package) first and mpi4py's settings restored."""
    import mpi4py

    saved = (mpi4py.rc.initialize, mpi4py.rc.finalize)
    from mpi4py import MPI  # noqa: F401  (initialises MPI before DeepHyper can switch it off)

    try:
        import deephyper.hpo
    finally:
        mpi4py.rc.initialize, mpi4py.rc.finalize = saved
    return deephyper.hpo


def validate_options(options: Mapping[str, Any]) -> None:
    """Raise OptimizerOptionError for an option ``deephyper.hpo.CBO`` does not take (or that this
    backend sets itself)."""
    CBO = _deephyper_hpo().CBO
    check_options(DeepHyperCBO.name, options, CBO.__init__, reserved=_RESERVED)


class DeepHyperCBO(Optimizer):
    """``deephyper.hpo.CBO`` driven through ``ask``/``tell`` (minimisation)."""

    name = "deephyper-cbo"

    def __init__(self, space: SearchSpace, seed: int = 0, options: Mapping[str, Any] | None = None,
                 num_objectives: int = 1):
        super().__init__(space, seed, num_objectives)
        CBO = _deephyper_hpo().CBO

        options = dict(options or {})
        validate_options(options)
        acq_kwargs = {**DEFAULT_ACQ_OPTIMIZER_KWARGS, **(options.pop("acq_optimizer_kwargs", None) or {})}
        self.options = {**DEFAULT_OPTIONS, **options, "acq_optimizer_kwargs": acq_kwargs}
        self.problem = _build_problem(space)
        self.search = CBO(
            self.problem,
            random_state=seed,
            log_dir=".",  # exists already; nothing is written with checkpoint_history_to_csv=False
            verbose=0,
            checkpoint_history_to_csv=False,
            **self.options,
        )
        self._unsent: list[tuple[dict[str, Any], float | list[float] | str]] = []
        self._seen: set[tuple] = set()
        self._rng = np.random.default_rng([seed, 1])

    # -- ask/tell -------------------------------------------------------------------------------
    def _ask(self, n: int) -> list[dict[str, Any]]:
        self.flush()
        batch = []
        for config in self.search.ask(n):
            params = self._decode(config)
            key = self._point_key(params)
            redraws = 0
            while key in self._seen and redraws < _MAX_REDRAWS:
                params = self.space.sample_random(self._rng)
                key = self._point_key(params)
                redraws += 1
            self._seen.add(key)
            batch.append(params)
        return batch

    def _tell(self, suggestion_id: int, params: dict[str, Any], objective: Objective) -> None:
        if objective is None:
            told: float | list[float] | str = FAILURE_MARKER
        elif isinstance(objective, tuple):
            told = [-v for v in objective]
        else:
            told = -objective
        self._unsent.append((self._encode(params), told))

    def _tell_past(self, params: dict[str, Any], objective: Objective) -> None:
        self._seen.add(self._point_key(params))
        self._tell(-1, params, objective)

    def flush(self) -> None:
        """Give the buffered results to DeepHyper (one surrogate fit). Called by :meth:`ask`."""
        if self._unsent:
            results, self._unsent = self._unsent, []
            self.search.tell(results)

    @property
    def num_buffered(self) -> int:
        """Results told but not yet given to DeepHyper."""
        return len(self._unsent)

    # -- encoding -------------------------------------------------------------------------------
    def _encode(self, params: dict[str, Any]) -> dict[str, Any]:
        out = dict(params)
        for p in self.space.params:
            if isinstance(p, IntParam) and p.step != 1:
                out[p.key] = (params[p.key] - p.low) // p.step
        return out

    def _decode(self, config: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for p in self.space.params:
            value = config[p.key]
            if isinstance(p, IntParam) and p.step != 1:
                value = p.low + p.step * int(value)
            out[p.key] = value
        return out

    def _point_key(self, params: Mapping[str, Any]) -> tuple:
        return tuple((type(params[k]).__name__, params[k]) for k in self.space.keys)


def _build_problem(space: SearchSpace) -> Any:
    """A DeepHyper ``HpProblem`` with one hyperparameter per key (int steps become an index)."""
    import ConfigSpace.hyperparameters as csh

    HpProblem = _deephyper_hpo().HpProblem

    problem = HpProblem()
    for p in space.params:
        if isinstance(p, IntParam):
            low, high = (0, p.num_values - 1) if p.step != 1 else (p.low, p.high)
            if low == high:
                problem.add_hyperparameter(csh.Constant(p.key, low))
            else:
                problem.add_hyperparameter((low, high, "log-uniform" if p.log else "uniform"), p.key)
        elif isinstance(p, FloatParam):
            problem.add_hyperparameter((p.low, p.high, "log-uniform" if p.log else "uniform"), p.key)
        else:
            assert isinstance(p, CategoricalParam)
            if len(p.choices) == 1:
                problem.add_hyperparameter(csh.Constant(p.key, p.choices[0]))
            else:
                problem.add_hyperparameter(list(p.choices), p.key)
    return problem
