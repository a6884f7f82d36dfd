"""The campaign's finished trials in figures (earlier runs included) and the failure-threshold rule."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hpo.failures import failure_group, failure_text, most_common_failure
from hydragnn_ensemble.result import TrialResult, TrialStatus


@dataclass
class Outcomes:
    """Counts, best objective and failure reasons of the finished trials (each trial once, however
    many attempts it took). A trial *failed* when it finished without an objective (a ``failed``
    one, or e.g. a ``timeout`` in epoch 0): ``without_objective`` counts those per status, and each
    failure reason names its status (:func:`hpo.failures.failure_text`), so the two agree."""

    finished: int = 0
    failed: int = 0
    statuses: Counter = field(default_factory=Counter)
    without_objective: Counter = field(default_factory=Counter)  # per status: finished without an objective
    best_objective: float | None = None
    best_trial: int | None = None
    failure_reasons: list[tuple[str, str]] = field(default_factory=list)  # (reason, log tail)

    @classmethod
    def from_state(cls, state) -> "Outcomes":
        """From a replayed :class:`hpo.state.CampaignState` (the earlier runs of a resumed campaign)."""
        best = state.best_trial
        return cls(
            finished=state.num_finished, failed=state.num_failed,
            statuses=Counter({k: v for k, v in state.counts.items() if v and isinstance(k, TrialStatus)}),
            without_objective=Counter(r.status for r in state.without_objective),
            best_objective=state.best_objective, best_trial=best.trial_id if best is not None else None,
            failure_reasons=[(failure_text(r.status, r.last_attempt.reason), r.last_attempt.log_tail or "")
                             for r in state.without_objective])

    def record(self, trial_id: int, result: TrialResult, objective: float | None) -> None:
        """Count a trial's final attempt."""
        self.finished += 1
        self.statuses[result.status] += 1
        if objective is None:
            self.failed += 1
            self.without_objective[result.status] += 1
            self.failure_reasons.append((failure_text(result.status, result.failure_reason), result.log_tail or ""))
        elif self.best_objective is None or objective < self.best_objective:
            self.best_objective, self.best_trial = objective, trial_id

    def threshold_exceeded(self, failure_threshold: float, min_trials: int) -> str | None:
        """The message that stops the campaign when more than ``failure_threshold`` of at least
        ``min_trials`` finished trials failed, naming the most common failure; else None."""
        if self.finished < min_trials or self.failed / self.finished <= failure_threshold:
            return None
        common, count = most_common_failure(r for r, _ in self.failure_reasons)
        tail = next(t for r, t in self.failure_reasons if failure_group(r) == common)
        return (f"stopping the campaign: {self.failed} of {self.finished} finished trials failed "
                f"(more than failure_threshold={failure_threshold:g}); this usually means a "
                f"configuration error (base config, dataset or search space), not bad hyperparameters.\n"
                f"Most common failure ({count}x): {common}\nExample log tail:\n{tail}")
