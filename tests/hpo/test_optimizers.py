"""The three optimizer backends behind ask/tell, and the candidate pool."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpo.optimizers import OptimizerOptionError, UnknownSuggestionError, make_optimizer
from hpo.pool import CandidatePool
from hpo.space import SearchSpace

SPACE = SearchSpace.from_dict({
    "m.x": {"type": "float", "low": -4.0, "high": 4.0},
    "m.lr": {"type": "float", "low": 1e-5, "high": 1e-1, "log": True},
    "m.layers": {"type": "int", "low": 1, "high": 8},
    "m.width": {"type": "int", "low": 16, "high": 256, "step": 16},
    "m.mpnn": {"type": "categorical", "choices": ["GIN", "PNA", "SchNet"]},
})
BACKENDS = ["random", "optuna-tpe", "deephyper-cbo"]


def quadratic(p: dict) -> float:
    """Minimum 0 at x=1, lr=1e-3, layers=4, width=128, mpnn=PNA."""
    return ((p["m.x"] - 1.0) ** 2 + (math.log10(p["m.lr"]) + 3.0) ** 2 + (p["m.layers"] - 4) ** 2 / 4
            + ((p["m.width"] - 128) / 64) ** 2 + (p["m.mpnn"] != "PNA"))


def run(optimizer, trials: int, batch: int, fail_above: float | None = None) -> list:
    """Ask in batches, tell every result (None where the objective is above fail_above)."""
    history = []
    while len(history) < trials:
        for s in optimizer.ask(min(batch, trials - len(history))):
            value = quadratic(s.params)
            told = None if fail_above is not None and value > fail_above else value
            optimizer.tell(s.suggestion_id, told)
            history.append((s.suggestion_id, s.params, told))
    return history


@pytest.mark.parametrize("name", BACKENDS)
def test_ask_tell_ids_params_failures(name):
    opt = make_optimizer(name, SPACE, seed=11)
    history = run(opt, trials=20, batch=5, fail_above=6.0)
    ids = [h[0] for h in history]
    assert ids == list(range(20))
    for _, params, _ in history:
        SPACE.validate(params)
        assert type(params["m.layers"]) is int and type(params["m.width"]) is int
        assert params["m.width"] % 16 == 0
        assert params["m.mpnn"] in ("GIN", "PNA", "SchNet")
    failures = sum(h[2] is None for h in history)
    assert failures > 0  # the threshold makes some trials fail
    assert opt.num_told == 20 and opt.num_failed == failures
    told = [h[2] for h in history if h[2] is not None]
    assert opt.best_objective == min(told)
    assert opt.pending_ids == []
    # the params dicts are distinct points
    assert len({tuple(sorted(p.items())) for _, p, _ in history}) == 20


@pytest.mark.parametrize("name", BACKENDS)
def test_reproducible_with_seed(name):
    runs = [run(make_optimizer(name, SPACE, seed=seed), trials=12, batch=4) for seed in (5, 5, 6)]
    assert runs[0] == runs[1]
    assert [h[1] for h in runs[0]] != [h[1] for h in runs[2]]


@pytest.mark.parametrize("name", BACKENDS)
def test_tell_unknown_or_twice_is_an_error(name):
    opt = make_optimizer(name, SPACE, seed=0)
    (s,) = opt.ask(1)
    with pytest.raises(UnknownSuggestionError, match="suggestion id 7 is unknown or was already told"):
        opt.tell(7, 1.0)
    opt.tell(s.suggestion_id, 1.0)
    with pytest.raises(UnknownSuggestionError, match="suggestion id 0 is unknown"):
        opt.tell(s.suggestion_id, 1.0)
    (s2,) = opt.ask(1)
    with pytest.raises(ValueError, match="objective must be finite, got nan: tell None for a failed trial"):
        opt.tell(s2.suggestion_id, float("nan"))


def test_unknown_backend_and_options():
    with pytest.raises(ValueError, match="unknown optimizer 'optuna' \\(did you mean 'optuna-tpe'\\?\\)"):
        make_optimizer("optuna", SPACE)
    with pytest.raises(OptimizerOptionError, match="optimizer 'optuna-tpe': unknown option 'n_startup'"):
        make_optimizer("optuna-tpe", SPACE, options={"n_startup": 3})
    with pytest.raises(OptimizerOptionError, match="unknown option 'random_state'"):
        make_optimizer("deephyper-cbo", SPACE, options={"random_state": 3})


def _past(n: int) -> list[tuple[dict, float | None]]:
    rng = np.random.default_rng(3)
    points = [SPACE.sample_random(rng) for _ in range(n)]
    return [(p, None if i % 4 == 3 else quadratic(p)) for i, p in enumerate(points)]


def test_tell_past_optuna_study_has_the_trials():
    past = _past(12)
    opt = make_optimizer("optuna-tpe", SPACE, seed=1)
    for params, value in past:
        opt.tell_past(params, value)
    trials = opt.study.trials
    assert len(trials) == 12
    assert [t.state.name for t in trials] == ["FAIL" if v is None else "COMPLETE" for _, v in past]
    assert [t.params for t in trials] == [p for p, _ in past]
    assert opt.best_objective == min(v for _, v in past if v is not None)
    new = opt.ask(3)
    assert [s.suggestion_id for s in new] == [0, 1, 2]
    assert len(opt.study.trials) == 15


def test_tell_past_deephyper_reaches_the_surrogate():
    past = _past(12)
    opt = make_optimizer("deephyper-cbo", SPACE, seed=1)
    for params, value in past:
        opt.tell_past(params, value)
    assert opt.num_buffered == 12
    new = opt.ask(4)  # flushes the 12 results to DeepHyper in one batch first
    assert opt.num_buffered == 0
    inner = opt.search._opt
    assert len(inner.yi) == 12
    assert inner.yi.count("F") == 3  # failures told with DeepHyper's marker, not a number
    # DeepHyper maximises: the backend tells -objective and DeepHyper stores the negation again
    assert sorted(v for v in inner.yi if v != "F") == sorted(v for _, v in past if v is not None)
    # suggestions never repeat a point of the history
    seen = {tuple(sorted(p.items())) for p, _ in past}
    assert all(tuple(sorted(s.params.items())) not in seen for s in new)


def test_deephyper_batches_without_tells_are_distinct():
    opt = make_optimizer("deephyper-cbo", SPACE, seed=2)
    run(opt, trials=16, batch=8)  # past the initial random points: the surrogate is fitted
    first, second = opt.ask(8), opt.ask(8)  # no tell in between (pool refills)
    points = {tuple(sorted(s.params.items())) for s in first + second}
    assert len(points) == 16


SMALL = SearchSpace.from_dict({
    "m.x": {"type": "float", "low": -4.0, "high": 4.0},
    "m.lr": {"type": "float", "low": 1e-5, "high": 1e-1, "log": True},
    "m.mpnn": {"type": "categorical", "choices": ["GIN", "PNA", "SchNet"]},
})


def small_quadratic(p: dict) -> float:
    return (p["m.x"] - 1.0) ** 2 + (math.log10(p["m.lr"]) + 3.0) ** 2 + (p["m.mpnn"] != "PNA")


def best_of(name: str, seed: int, trials: int = 40, batch: int = 8) -> float:
    opt, best, n = make_optimizer(name, SMALL, seed=seed), math.inf, 0
    while n < trials:
        for s in opt.ask(min(batch, trials - n)):
            value = small_quadratic(s.params)
            opt.tell(s.suggestion_id, value)
            best, n = min(best, value), n + 1
    return best


@pytest.mark.parametrize("name", ["optuna-tpe", "deephyper-cbo"])
def test_bayesian_beats_random_median(name):
    """40 trials in batches of 8 on a 3-parameter bowl: the median over 3 seeds of the Bayesian
    backend's best beats the median over 7 seeds of random search (seeded, hence deterministic;
    measured margins here: 0.02 (Optuna) and 0.06 (DeepHyper) against 0.34)."""
    randoms = [best_of("random", seed) for seed in range(7)]
    bayes = [best_of(name, seed) for seed in range(3)]
    assert float(np.median(bayes)) < float(np.median(randoms))


def test_candidate_pool_refills_in_whole_batches():
    opt = make_optimizer("random", SPACE, seed=4)
    pool = CandidatePool(opt, batch_size=8)
    assert pool.size == 0
    assert pool.refill(10) == 16 and pool.size == 16 and pool.num_asks == 1
    assert pool.refill(12) == 0 and pool.num_asks == 1  # enough waiting: no ask
    taken = pool.take(5)
    assert [s.suggestion_id for s in taken] == [0, 1, 2, 3, 4]  # oldest first
    chosen = pool.remove(9)
    assert chosen.suggestion_id == 9 and 9 not in [s.suggestion_id for s in pool.candidates]
    with pytest.raises(KeyError, match="suggestion 9 is not in the candidate pool"):
        pool.remove(9)
    assert pool.size == 10
    more = pool.take(12)  # 2 short: one more batch of 8
    assert pool.num_asks == 2 and pool.size == 6
    assert [s.suggestion_id for s in more][:4] == [5, 6, 7, 8]
    assert sorted(opt.pending_ids) == sorted(s.suggestion_id for s in [*taken, chosen, *more, *pool.candidates])


def test_deephyper_backend_leaves_mpi_usable_in_the_process(tmp_path):
    """DeepHyper switches mpi4py's auto-initialisation off at import; a process that made the
    DeepHyper optimizer first must still be able to use MPI (adios2, the ensemble) afterwards. Run
    in a fresh interpreter so that no earlier import of mpi4py.MPI hides the problem."""
    import subprocess
    import sys

    code = (
        "from hpo.optimizers import make_optimizer\n"
        "from hpo.space import SearchSpace\n"
        "space = SearchSpace.from_dict({'a': {'type': 'float', 'low': 0.0, 'high': 1.0}})\n"
        "make_optimizer('deephyper-cbo', space, seed=0).ask(1)\n"
        "from mpi4py import MPI\n"
        "print(MPI.Is_initialized(), MPI.COMM_WORLD.Get_rank())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "0"]
