"""The cost model's own error, read from a campaign's journal: what the scheduler predicted each
trial attempt would take against what it took.

* :func:`prediction_error`: median and p90 of ``|log(predicted / actual)|`` slot-seconds over the
  completed attempts, and the same of start-up + the epochs trained (:func:`attempt_costs`) per
  attempt, from trial :data:`LATER_TRIAL` on, and per epoch;
* :func:`format_prediction_error`: that error as the summary's one line;
* :func:`plot_cost`: ``report/cost.png``, predicted against actual wall time per attempt and per epoch.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from hpo.figure_style import pyplot
from hpo.state import AttemptRecord, CampaignState
from hpo.status import TrialStatus

__all__ = [
    "LATER_TRIAL",
    "AttemptCost",
    "CostPredictionError",
    "ErrorFigures",
    "attempt_costs",
    "attempt_slots",
    "format_prediction_error",
    "plot_cost",
    "prediction_error",
]


@dataclass(frozen=True)
class CostPredictionError:
    """The cost model's own error: ``|log(predicted / actual)|`` slot-seconds over the completed trial
    attempts whose start journaled a prediction (``trial_started.predicted_slot_s``); ``recorded``
    counts every attempt with a prediction (0: a journal written before predictions were kept)."""

    count: int
    median: float | None
    p90: float | None
    recorded: int = 0
    per_attempt: "ErrorFigures | None" = None  # start-up + the epochs it trained, every ended attempt
    later_attempts: "ErrorFigures | None" = None  # the same, trials from LATER_TRIAL on
    per_epoch: "ErrorFigures | None" = None  # each reported epoch against the per-epoch prediction


LATER_TRIAL = 10  # trial ids from here on: predicted after the model learnt from the first ten


@dataclass(frozen=True)
class ErrorFigures:
    """``|log(predicted / actual)|`` over ``count`` items: median and p90."""

    count: int
    median: float
    p90: float

    @classmethod
    def of(cls, errors: list[float]) -> "ErrorFigures | None":
        if not errors:
            return None
        errors = sorted(errors)
        return cls(len(errors), _quantile(errors, 0.5), _quantile(errors, 0.9))


@dataclass(frozen=True)
class AttemptCost:
    """One ended attempt's predicted and actual wall time (start-up + the epochs it trained) and its
    epochs' predicted and measured seconds."""

    trial_id: int
    predicted_s: float
    actual_s: float
    epoch_pairs: tuple[tuple[float, float], ...]  # (predicted, measured) seconds per reported epoch


def attempt_costs(state: CampaignState) -> list[AttemptCost]:
    """Every ended attempt (not failed) whose start journaled the per-epoch prediction and that
    trained at least one epoch: predicted = start-up + epochs trained x predicted epoch seconds."""
    out = []
    for record in state.trials.values():
        for attempt in record.attempts.values():
            epoch_s, startup_s, result = attempt.predicted_epoch_s, attempt.predicted_startup_s, attempt.result
            if (epoch_s is None or startup_s is None or result is None or not attempt.ended
                    or attempt.status == TrialStatus.FAILED or result.epochs < 1 or not result.wall_time_s > 0
                    or not epoch_s > 0):
                continue
            pairs = tuple((epoch_s, r.epoch_s) for r in attempt.reports if r.epoch_s is not None and r.epoch_s > 0)
            out.append(AttemptCost(record.trial_id, startup_s + result.epochs * epoch_s, result.wall_time_s, pairs))
    return out


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def attempt_slots(attempt: AttemptRecord) -> int:
    """The slots an attempt held (at least one)."""
    return max(len(attempt.slots), attempt.size, 1)


def prediction_error(state: CampaignState) -> CostPredictionError:
    """Median and p90 of ``|log(predicted / actual)|`` with actual = slots x the result's wall time."""
    errors: list[float] = []
    recorded = 0
    for record in state.trials.values():
        for attempt in record.attempts.values():
            predicted = attempt.predicted_slot_s
            if predicted is None:
                continue
            recorded += 1
            wall = attempt.result.wall_time_s if attempt.result is not None else 0.0
            if attempt.status != TrialStatus.COMPLETED or not predicted > 0 or not wall > 0:
                continue
            errors.append(abs(math.log(predicted / (attempt_slots(attempt) * wall))))
    costs = attempt_costs(state)
    log_error = lambda pair: abs(math.log(pair[0] / pair[1]))  # noqa: E731
    detail = dict(
        per_attempt=ErrorFigures.of([log_error((c.predicted_s, c.actual_s)) for c in costs]),
        later_attempts=ErrorFigures.of([log_error((c.predicted_s, c.actual_s)) for c in costs
                                        if c.trial_id >= LATER_TRIAL]),
        per_epoch=ErrorFigures.of([log_error(pair) for c in costs for pair in c.epoch_pairs]))
    if not errors:
        return CostPredictionError(0, None, None, recorded, **detail)
    errors.sort()
    return CostPredictionError(len(errors), _quantile(errors, 0.5), _quantile(errors, 0.9), recorded, **detail)



def format_prediction_error(err: CostPredictionError) -> str:
    if err.recorded == 0:
        return "cost model: no predictions recorded"
    if err.per_attempt is not None:
        a = err.per_attempt
        text = (f"cost model error |log(predicted/actual)| of start-up + the epochs trained, predicted at each "
                f"start: median {a.median:.4f}, p90 {a.p90:.4f} over {a.count} attempts")
        if err.later_attempts is not None:
            text += f" (trials {LATER_TRIAL + 1}+: median {err.later_attempts.median:.4f} over {err.later_attempts.count})"
        if err.per_epoch is not None:
            text += f"; per epoch: median {err.per_epoch.median:.4f}, p90 {err.per_epoch.p90:.4f} over {err.per_epoch.count}"
        return text
    if err.count == 0:
        return f"cost model: {err.recorded} predictions recorded, no completed trial yet"
    return (f"cost model error |log(predicted/actual)| slot-seconds over {err.count} completed trials: "
            f"median {err.median:.4f}, p90 {err.p90:.4f}")


def plot_cost(state: CampaignState, path: str | os.PathLike) -> bool:
    """The cost model against the clock: predicted vs actual wall time of each ended attempt
    (start-up + the epochs it trained) and predicted vs measured seconds of each epoch, log-log
    with the parity line and factor-2 band; False (nothing written) without per-epoch predictions."""
    costs = attempt_costs(state)
    if not costs:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4), dpi=110)
    panels = ((axes[0], [(c.predicted_s, c.actual_s) for c in costs], "attempt wall time"),
              (axes[1], [pair for c in costs for pair in c.epoch_pairs], "epoch"))
    for ax, pairs, what in panels:
        if not pairs:
            ax.set_axis_off()
            continue
        pred, actual = zip(*pairs)
        lo, hi = min(*pred, *actual) / 1.5, max(*pred, *actual) * 1.5
        ax.fill_between([lo, hi], [lo / 2, hi / 2], [lo * 2, hi * 2], color="0.9", label="within 2x")
        ax.plot([lo, hi], [lo, hi], color="0.4", lw=1)
        ax.scatter(pred, actual, s=12, alpha=0.7)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(f"predicted {what} (s)")
        ax.set_ylabel(f"actual {what} (s)")
        ax.set_title(f"{len(pairs)} {what}s", fontsize=9)
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True

