"""Which hyperparameters mattered: Optuna's PED-ANOVA (Watanabe et al. 2023) on the campaign as an
in-memory Optuna study (:mod:`hpo.optuna_study`), for the objective, each head's validation MAE
and the cost (slot-seconds), with the spread over half-samples so that a user sees which rankings
are stable.

Spread: the evaluator is run on ``resamples`` random halves of the completed trials (drawn without
replacement, as in stability selection); each parameter gets the importance on all trials, the 10th
and 90th percentiles over the halves, and ``rank_stability``: the share of halves in which it keeps
its rank of the full ranking. Completed trials count for every target (PED-ANOVA reads ``COMPLETE``
trials; stopped and failed ones carry no final value). When trials were stopped early, the
objective gets a second estimate over every trial at the fidelity it reached
(:func:`fidelity_trials`): the highest epoch at least :data:`MIN_TRIALS` trials reached, each
trial valued at its best objective up to it, so an ASHA campaign's importances do not rest on its
few completed trials alone. Half-samples rather than bootstrap draws: a half is
the target with NaN outside it, which PED-ANOVA leaves out, so one study serves every resample
(a bootstrap draw repeats trials and would need a study of its own): 2.1 s for 8,000 trials with
the objective and the cost (``python -m bench.importance``).
"""

from __future__ import annotations

import contextlib
import math
import random
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from hpo.space import SearchSpace
from hpo.state import CampaignState
from hpo.status import TrialStatus

#: At least this many completed trials (with the target) for an importance estimate: PED-ANOVA
#: compares the top 10% with all trials, and each half-sample needs a top of more than one trial.
MIN_TRIALS = 16


@dataclass(frozen=True)
class ParamImportance:
    """One parameter's importance for one target (fractions of the total, summing to 1 over params)."""

    key: str
    importance: float
    low: float  # 10th percentile over the half-samples
    high: float  # 90th percentile over the half-samples
    rank_stability: float  # share of half-samples with the same rank as on all trials


@dataclass(frozen=True)
class TargetImportance:
    """The importances for one target (``objective``, ``val_mae:<head>`` or ``slot_seconds``),
    most important first."""

    target: str
    num_trials: int
    params: list[ParamImportance]
    trials_are: str = "completed trials"  # what the trials counted are, for the text


def _value_of(target: str) -> Callable[[Any], float | None]:
    if target == "objective":
        return lambda t: t.value
    return lambda t: t.user_attrs.get(target)


def targets_of(trials: list[Any]) -> list[str]:
    """``objective``, every ``val_mae:<head>`` some trial has, ``slot_seconds`` and (when trials
    measured it) ``inference_ms_per_graph``."""
    heads = sorted({k for t in trials for k in t.user_attrs if k.startswith("val_mae:")})
    cost = ["inference_ms_per_graph"] if any(t.user_attrs.get("inference_ms_per_graph") for t in trials) else []
    return ["objective", *heads, "slot_seconds", *cost]


def first_objective(trials: list[Any]) -> list[Any]:
    """The trials of a multi-objective study as single-objective ones valued at their first
    objective (what importance is estimated for; the other objectives are targets of their own)."""
    from optuna.trial import FrozenTrial

    return [FrozenTrial(number=t.number, state=t.state, value=t.values[0] if t.values else None, values=None,
                        datetime_start=t.datetime_start, datetime_complete=t.datetime_complete, params=t.params,
                        distributions=t.distributions, user_attrs=t.user_attrs, system_attrs={},
                        intermediate_values=t.intermediate_values, trial_id=t.number) for t in trials]


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Optuna's INFO log ("A new study created ...") off for the duration, and PED-ANOVA's note that
    it ranks for low target values (ours are all minimised: loss, MAE, slot-seconds)."""
    import optuna

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*achieve low `target` values.*")
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def _study(trials: list[Any]) -> Any:
    import optuna

    study = optuna.create_study(direction="minimize")
    study.add_trials(trials)
    return study


def _ped_anova(study: Any, value: Callable[[Any], float | None]) -> dict[str, float]:
    """PED-ANOVA importances for low values of ``value``, normalised to sum to 1."""
    import optuna

    evaluator = optuna.importance.PedAnovaImportanceEvaluator()
    found = optuna.importance.get_param_importances(study, evaluator=evaluator, target=value, normalize=True)
    return {k: float(v) for k, v in found.items()}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    lo = int(position)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


def _summarise(target: str, num_trials: int, full: dict[str, float], halves: list[dict[str, float]]) -> TargetImportance:
    keys = sorted(full, key=lambda k: -full[k])
    rank = {k: i for i, k in enumerate(keys)}
    half_ranks = [{k: i for i, k in enumerate(sorted(h, key=lambda k: -h[k]))} for h in halves]
    params = []
    for key in keys:
        spread = [h.get(key, 0.0) for h in halves] or [full[key]]
        same = sum(1 for r in half_ranks if r.get(key) == rank[key])
        params.append(ParamImportance(key, full[key], _percentile(spread, 0.1), _percentile(spread, 0.9),
                                      same / len(halves) if halves else 1.0))
    return TargetImportance(target, num_trials, params)


def importances(trials: list[Any], targets: list[str], resamples: int = 10, seed: int = 0) -> list[TargetImportance]:
    """The importances for each of ``targets`` over the completed ``trials`` (Optuna ``FrozenTrial``
    objects) that have every target; [] with fewer than :data:`MIN_TRIALS` such trials. One study
    of all trials serves every target and half-sample."""
    from optuna.trial import TrialState

    values = {target: _value_of(target) for target in targets}
    usable = [t for t in trials if t.state == TrialState.COMPLETE and all(v(t) is not None for v in values.values())]
    if len(usable) < MIN_TRIALS:
        return []
    rng = random.Random(seed)
    halves = [frozenset(rng.sample(range(len(usable)), len(usable) // 2)) for _ in range(resamples)]
    with _quiet_optuna():
        study = _study(usable)  # numbers 0..n-1 in the order of ``usable``
        return [_summarise(target, len(usable), _ped_anova(study, value),
                           [_ped_anova(study, _within(value, half)) for half in halves])
                for target, value in values.items()]


def _within(value: Callable[[Any], float | None], half: frozenset[int]) -> Callable[[Any], float]:
    """``value`` on the trials numbered in ``half``, NaN elsewhere: PED-ANOVA leaves out trials whose
    target is not finite, so one study serves every half-sample."""
    return lambda t: value(t) if t.number in half else math.nan


def fidelity_trials(trials: list[Any]) -> tuple[int, list[Any]]:
    """The highest epoch that at least :data:`MIN_TRIALS` finished trials with a learning curve
    reached (completed, timed out and stopped alike), and those trials as complete ones valued at
    their best objective up to that epoch (a stopped trial counts at the fidelity it reached);
    ``(0, [])`` when fewer trials have curves."""
    from optuna.trial import FrozenTrial, TrialState

    curves = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and t.intermediate_values]
    reached = sorted((max(t.intermediate_values) for t in curves), reverse=True)
    if len(reached) < MIN_TRIALS:
        return 0, []
    epoch = reached[MIN_TRIALS - 1]
    out = []
    for t in curves:
        values = [v for e, v in t.intermediate_values.items() if e <= epoch and math.isfinite(v)]
        if max(t.intermediate_values) < epoch or not values:
            continue
        out.append(FrozenTrial(number=len(out), state=TrialState.COMPLETE, value=min(values), values=None,
                               datetime_start=t.datetime_start, datetime_complete=t.datetime_complete,
                               params=t.params, distributions=t.distributions, user_attrs={}, system_attrs={},
                               intermediate_values={}, trial_id=len(out)))
    return epoch, out


def campaign_importances(state: CampaignState, space: SearchSpace, resamples: int = 10,
                         seed: int = 0) -> list[TargetImportance]:
    """The importances for every target of the campaign (see :func:`targets_of`) over its completed
    trials; targets some completed trials lack (a head a trial did not report) are estimated on the
    trials that have them. With stopped trials, also the objective at the fidelity every trial
    reached (:func:`fidelity_trials`)."""
    from dataclasses import replace

    from optuna.trial import TrialState

    from hpo.optuna_study import frozen_trials

    trials = frozen_trials(state, space)
    if state.objectives.multi:
        trials = first_objective(trials)
    targets = targets_of(trials)
    found = importances(trials, targets, resamples, seed)
    if not found and len(trials) >= MIN_TRIALS:
        for target in targets:  # the trials differ in which targets they have: one target at a time
            found += importances(trials, [target], resamples, seed)
    if any(t.state == TrialState.PRUNED for t in trials):
        epoch, at_epoch = fidelity_trials(trials)
        found += [replace(f, target=f"objective at epoch {epoch}",
                          trials_are="trials that reached it, stopped ones included")
                  for f in importances(at_epoch, ["objective"], resamples, seed)]
    return found


def format_importances(found: list[TargetImportance], short: Callable[[str], str] = lambda k: k) -> str:
    """A text table: per target, each parameter's importance with its 10-90% range and rank stability."""
    lines = []
    for target in found:
        lines.append(f"importance for {target.target} (PED-ANOVA, {target.num_trials} {target.trials_are}; "
                     "10-90% over half-samples; same rank in % of halves)")
        for p in target.params:
            lines.append(f"  {short(p.key):28s} {p.importance:6.3f}  [{p.low:5.3f}, {p.high:5.3f}]  "
                         f"{100 * p.rank_stability:4.0f}%")
    return "\n".join(lines)


def shortfall_note(state: CampaignState) -> str:
    """Why a campaign has no importance estimate, with the numbers: the completed trials it needs
    (:data:`MIN_TRIALS`; completed, or timed out with an objective, as PED-ANOVA counts them) and the
    completed trials it has; with trials stopped early, the trials that reported epochs too (the
    estimate at a common epoch needs :data:`MIN_TRIALS` of them to reach it)."""
    complete = (TrialStatus.COMPLETED, TrialStatus.TIMEOUT)
    completed = sum(1 for r in state.finished if r.status in complete and r.objective is not None)
    text = (f"Too few completed trials for an importance estimate: it needs at least {MIN_TRIALS} completed "
            f"trials (completed, or timed out with an objective) and this campaign has {completed}.")
    if any(r.status == TrialStatus.STOPPED for r in state.finished):
        curves = sum(1 for r in state.finished if r.status in (*complete, TrialStatus.STOPPED) and r.curve)
        text += (f" Counting the trials stopped early, at an epoch at least {MIN_TRIALS} trials reached, needs "
                 f"{MIN_TRIALS} trials that reported epochs: {curves} did.")
    return text
