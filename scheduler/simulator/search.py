"""A real optimizer as the simulator's source of trials: each suggestion becomes a workload trial
(e.g. the recorded learning curve of the nearest configuration, ``bench/curve_replay.py``), and
each finished trial is told back to the optimizer as the MPI runtime tells it (a stopped trial
with the epochs it reached). The search then unfolds on the virtual clock, decided by the same
campaign loop, stopper and optimizer as a real campaign."""

from __future__ import annotations

import math
from typing import Any, Callable

from hpo.optimizers.base import Optimizer
from hpo.pool import CandidatePool
from hydragnn_ensemble.result import TrialResult, TrialStatus
from scheduler.loop import TrialSpec
from scheduler.simulator.cluster import WORKLOAD_KEY, SimCandidate
from scheduler.simulator.workload import SimTrial

#: ``make_trial(trial_id, params)``: the workload trial that a suggestion's parameters run as
TrialMaker = Callable[[int, dict[str, Any]], SimTrial]


class OptimizerSource:
    """Candidates asked of ``optimizer`` ``batch`` at a time, made trials by ``make_trial`` in the
    order the campaign loop numbers them; at most ``max_trials`` of them."""

    def __init__(self, optimizer: Optimizer, make_trial: TrialMaker, max_trials: int, batch: int = 1) -> None:
        self.pool = CandidatePool(optimizer, batch)
        self.make_trial = make_trial
        self.max_trials = max_trials
        self.by_id: dict[int, SimTrial] = {}  # the trials made so far, numbered 0, 1, ...
        self.params: dict[int, dict[str, Any]] = {}  # trial id -> the optimizer's parameters
        self.time_limit_s = math.inf  # each trial's own limit applies (SimTrial.time_limit_s)
        self.now = 0.0  # the virtual clock (set by the simulator; suggestions arrive at once)

    def take(self, n: int) -> list[SimCandidate]:
        n = min(n, self.max_trials - len(self.by_id))
        out = []
        for suggestion in self.pool.take(max(n, 0)):
            expected = len(self.by_id)
            trial = self.make_trial(expected, dict(suggestion.params))
            if trial.trial_id != expected:
                raise ValueError(f"make_trial returned trial id {trial.trial_id}, expected {expected}")
            self.by_id[trial.trial_id] = trial
            self.params[trial.trial_id] = dict(suggestion.params)
            out.append(SimCandidate({WORKLOAD_KEY: trial.trial_id}, suggestion.suggestion_id))
        return out

    def arrive(self, trials: list[SimTrial]) -> None:
        raise RuntimeError("an optimizer source answers at once (no ask latency)")

    def finished(self, spec: TrialSpec, result: TrialResult, objective: float | tuple[float, ...] | None) -> None:
        """Tell the optimizer, as :meth:`scheduler.runtime.SchedulerRank.finished` does."""
        stopped_after = result.epochs if result.status == TrialStatus.STOPPED else None
        self.pool.optimizer.tell(spec.suggestion_id, objective, stopped_after)
