"""The campaign report: a summary table and two plots, from the campaign directory alone.

It reads ``journal.jsonl`` (or, when there is none, ``results.csv``) so it works on a directory
copied to another machine, while the campaign runs or after it stopped:

* the summary: trials by status, the best trial, the top-N trials with their hyperparameters,
  total slot-hours and utilisation (busy slot-time over slot-time available while the campaign ran),
  and the cost model's own prediction error (:func:`prediction_error`);
* the baselines every head's validation MAE must beat, read from the campaign's dataset
  (:mod:`hpo.baseline_rows`: composition-linear energies, zero forces and stress);
* ``report/objective.png``: objective per trial in finishing order, failures marked, best-so-far;
* ``report/gantt.png``: slots over time, one bar per trial attempt, coloured by status.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hpo.baseline_rows import ReportBaselines, baseline_rows, format_baselines, read_baselines
from hpo.campaign_dir import CampaignDir
from hpo.campaign_reader import read_campaign_dir
from hpo.failures import failure_counts, failure_text, failures_heading, status_words
from hpo.figure_style import STATUS_COLOURS, pyplot
from hpo.gantt import plot_gantt
from hpo.head_columns import HeadColumn, head_columns, read_dataset_shape
from hpo.pareto import format_pareto, pareto_front, plot_pareto
from hpo.space import SearchSpace
from hpo.state import AttemptRecord, CampaignState, TrialRecord
from hpo.status import PendingStatus, Status, TrialStatus
from hpo.time_budget import budget_moment, cut_short_note, overrun_note, still_improving

__all__ = [
    "ReportFigures",
    "CostPredictionError",
    "ReportFiles",
    "format_summary",
    "load_state",
    "plot_gantt",
    "plot_objective",
    "prediction_error",
    "plot_curves",
    "summarize",
    "write_report",
]


# -- loading ------------------------------------------------------------------------------------
def _load_record(campaign_dir: str | os.PathLike) -> Any:
    """The campaign directory as read, with a state (from ``journal.jsonl``, else ``results.csv``)."""
    record = read_campaign_dir(campaign_dir)
    if record.state is None:
        raise FileNotFoundError(f"{record.cdir.root}: no {record.cdir.journal.name} or "
                                f"{record.cdir.results_csv.name} (not a campaign directory?)")
    return record


def load_state(campaign_dir: str | os.PathLike) -> CampaignState:
    """The campaign state from ``journal.jsonl``, else from ``results.csv``."""
    return _load_record(campaign_dir).state


# -- summary ------------------------------------------------------------------------------------
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
            errors.append(abs(math.log(predicted / (_attempt_slots(attempt) * wall))))
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


@dataclass
class ReportFigures:
    """The figures of the report."""

    counts: dict[Status, int]  # trials per status (non-zero), those suggested and never started left out
    num_trials: int  # trials that started (a suggestion never started is no trial)
    best: TrialRecord | None
    top: list[TrialRecord]
    param_keys: list[str]
    slot_hours: float
    utilisation: float | None
    wall_hours: float
    num_slots: int
    finished_reason: str | None = None
    short_names: dict[str, str] = field(default_factory=dict)
    cost_model_error: CostPredictionError = field(default_factory=lambda: CostPredictionError(0, None, None))
    stopped: list[tuple[int, int]] = field(default_factory=list)  # (trial, epochs trained) ended early
    epochs_past_stop: list[float] = field(default_factory=list)  # per stopped attempt: trained past the decision
    failures: list[tuple[str, int]] = field(default_factory=list)  # trials without an objective: (reason, count)
    suggested: int = 0  # suggested by the optimizer, never started (not counted as trials)
    without_objective: dict[Status, int] = field(default_factory=dict)  # finished without one, per status
    time_note: str | None = None  # why the campaign ran past max_time_s (None: it did not)
    cut_short: str | None = None  # the trials that timed out, and those still improving (None: none)
    head_columns: list[HeadColumn] | None = None  # the top table's MAE columns (None: from the results alone)
    baselines: ReportBaselines | None = None  # None: not looked for (no dataset was asked)


def _attempt_end(attempt: AttemptRecord, state: CampaignState) -> float | None:
    if attempt.end is not None:
        return attempt.end
    return state.last_time


def _attempt_slots(attempt: AttemptRecord) -> int:
    return max(len(attempt.slots), attempt.size, 1)


def _short_names(keys: list[str]) -> dict[str, str]:
    """Shortest distinct dotted suffix of each key (``...Architecture.hidden_dim`` -> ``hidden_dim``)."""
    out = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            name = ".".join(parts[-n:])
            if sum(k == name or k.endswith("." + name) for k in keys) == 1:
                break
        out[key] = name
    return out


def summarize(state: CampaignState, top: int = 10) -> ReportFigures:
    """Counts, best and top-N trials, slot-hours and utilisation of a campaign state."""
    busy = 0.0
    slot_ids: set[int] = set()
    for record in state.trials.values():
        for attempt in record.attempts.values():
            end = _attempt_end(attempt, state)
            if attempt.start is not None and end is not None:
                busy += max(0.0, end - attempt.start) * _attempt_slots(attempt)
            slot_ids.update(attempt.slots)
    num_slots = max((s[2] for s in state.segments), default=0) or len(slot_ids)
    capacity = sum(max(0.0, end - start) * (n or num_slots) for start, end, n in state.segments)
    wall = sum(max(0.0, end - start) for start, end, _ in state.segments)
    ranked = sorted(
        (r for r in state.trials.values() if r.objective is not None),
        key=lambda r: (r.objective, r.trial_id),
    )
    keys = state.param_keys
    failed = state.without_objective
    without: dict[Status, int] = dict(Counter(r.status for r in failed))
    counts = {k: v for k, v in state.counts.items() if v and k != PendingStatus.SUGGESTED}
    return ReportFigures(
        counts=counts,
        num_trials=sum(counts.values()),
        best=ranked[0] if ranked else None,
        top=ranked[:top],
        param_keys=keys,
        slot_hours=busy / 3600.0,
        utilisation=busy / capacity if capacity > 0 else None,
        wall_hours=wall / 3600.0,
        num_slots=num_slots,
        finished_reason=state.finished_reason,
        short_names=_short_names(keys),
        cost_model_error=prediction_error(state),
        stopped=[(r.trial_id, r.result.epochs if r.result is not None else 0) for r in state.finished
                 if r.status == TrialStatus.STOPPED],
        epochs_past_stop=[p for r in state.finished if r.last_attempt is not None
                          and (p := r.last_attempt.epochs_past_stop) is not None],
        failures=failure_counts(failure_text(r.status, r.last_attempt.reason) for r in failed),
        suggested=state.counts[PendingStatus.SUGGESTED],
        without_objective=without,
        time_note=_time_note(state, wall),
        cut_short=cut_short(state),
    )


def cut_short(state: CampaignState) -> str | None:
    """How many trials ended at their time limit, and how many of them were still improving
    (:func:`hpo.time_budget.cut_short_note`); None when none timed out."""
    timed_out = [r.result for r in state.finished if r.status == TrialStatus.TIMEOUT and r.result is not None]
    improving = sum(still_improving(r.epochs, r.best_epoch) for r in timed_out)
    config = state.campaign.config if state.campaign is not None else None
    return cut_short_note(len(timed_out), improving, None if config is None else config.trial_time_limit_s)


def _time_note(state: CampaignState, campaign_time_s: float) -> str | None:
    """Why the campaign's time went past its ``max_time_s`` (:func:`hpo.time_budget.overrun_note`),
    with the trials that were running when it was reached; None without such a budget or overrun."""
    config = state.campaign.config if state.campaign is not None else None
    if config is None or config.max_time_s is None:
        return None
    moment = budget_moment(state.segments, config.max_time_s)
    running = None if moment is None else sum(
        1 for r in state.trials.values() for a in r.attempts.values()
        if a.start is not None and a.start <= moment and (a.end is None or a.end > moment))
    return overrun_note(config.max_time_s, campaign_time_s, config.trial_time_limit_s, running)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _format_prediction_error(err: CostPredictionError) -> str:
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
    plt = _pyplot()
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


def format_summary(summary: ReportFigures) -> str:
    """The summary as plain text (what ``hydragnn-ensemble report`` prints)."""
    lines = []
    line = f"trials: {summary.num_trials} ({status_words(summary.counts, summary.without_objective)})"
    if summary.suggested:
        line += f"; {summary.suggested} more suggested, never started"
    lines.append(line)
    if summary.best is not None:
        lines.append(f"best so far: trial {summary.best.trial_id}, objective {summary.best.objective:.6g}")
    else:
        lines.append("best so far: no completed trial")
    utilisation = "n/a" if summary.utilisation is None else f"{100 * summary.utilisation:.1f}%"
    lines.append(
        f"slot-hours: {summary.slot_hours:.3f} on {summary.num_slots} slots over "
        f"{summary.wall_hours:.3f} h; utilisation {utilisation}"
    )
    if summary.finished_reason:
        lines.append(f"campaign finished: {summary.finished_reason}")
    if summary.time_note:
        lines.append(summary.time_note)
    if summary.cut_short:
        lines.append(summary.cut_short)
    lines.append(_format_prediction_error(summary.cost_model_error))
    if summary.stopped:
        where = ", ".join(f"{t} @ {e}" for t, e in summary.stopped)
        lines.append(f"stopped early ({len(summary.stopped)} trials, trial @ epochs trained): {where}")
        if summary.epochs_past_stop:
            past = summary.epochs_past_stop
            lines.append(f"epochs trained past the stop decision: mean {sum(past) / len(past):.2f}, max "
                         f"{max(past):.2f} over {len(past)} stopped trials")
    if summary.failures:
        lines.append(f"failures by reason ({failures_heading(summary.without_objective)}):")
        lines.extend(f"  {n:>5} x {reason}" for reason, n in summary.failures)
        rest = sum(summary.without_objective.values()) - sum(n for _, n in summary.failures)
        if rest > 0:
            lines.append(f"  {rest:>5} x (other reasons)")
    if summary.top:
        names = [summary.short_names.get(k, k) for k in summary.param_keys]
        columns = summary.head_columns if summary.head_columns is not None else head_columns(summary.top, None)
        header = ["rank", "trial", "objective", *names, *[f"{c.head} MAE" for c in columns], "slots", "wall_s"]
        rows = []
        for rank, record in enumerate(summary.top, start=1):
            result = record.result
            last = record.last_attempt
            rows.append(
                [str(rank), str(record.trial_id), f"{record.objective:.6g}"]
                + [_cell(record.params.get(k, "")) for k in summary.param_keys]
                + [_cell(value) if (value := c.value(record)) is not None else "-" for c in columns]
                + [str(_attempt_slots(last)) if last else "", _cell(result.wall_time_s if result is not None else "")]
            )
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines.append("")
        lines.append(f"top {len(rows)} trials:")
        lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        lines.extend("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows)
        units = {c.head: c.unit for c in columns if c.unit}
        if units:
            lines.append("MAE: validation split, in each head's unit (" + ", ".join(
                f"{h} {u}" for h, u in units.items()) + ")")
        if summary.baselines is not None:
            lines.append(format_baselines(baseline_rows(columns, summary.baselines.baselines, summary.top),
                                          summary.baselines))
    return "\n".join(lines)


# -- plots --------------------------------------------------------------------------------------
_pyplot = pyplot


def plot_objective(state: CampaignState, path: str | os.PathLike) -> None:
    """Objective of each finished trial in finishing order, one colour per final status (completed,
    timeout, stopped early, diverged ...), trials without an objective as crosses on top, and the
    best-so-far line."""
    plt = _pyplot()
    finished = sorted(
        state.finished, key=lambda r: (r.last_attempt.end if r.last_attempt and r.last_attempt.end is not None else math.inf, r.trial_id)
    )
    by_status: dict[str, tuple[list[int], list[float]]] = {}
    fail_x: dict[str, list[int]] = {}
    best_x, best_y = [], []
    best = math.inf
    for i, record in enumerate(finished, start=1):
        if record.objective is None:
            fail_x.setdefault(record.status, []).append(i)
        else:
            xs, ys = by_status.setdefault(record.status, ([], []))
            xs.append(i)
            ys.append(record.objective)
            best = min(best, record.objective)
        if best < math.inf:
            best_x.append(i)
            best_y.append(best)
    values = [y for _, ys in by_status.values() for y in ys]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for status, (xs, ys) in sorted(by_status.items()):
        ax.scatter(xs, ys, s=18, color=STATUS_COLOURS[status], label=f"{status} ({len(xs)})",
                   zorder=3)
    ax.step(best_x, best_y, where="post", color="black", linewidth=1.5, label="best so far", zorder=4)
    if values and min(values) > 0 and max(values) / min(values) > 100:
        ax.set_yscale("log")
    top = max(values) if values else 1.0
    for status, xs in sorted(fail_x.items()):
        ax.scatter(xs, [top] * len(xs), marker="x", color=STATUS_COLOURS[status],
                   label=f"{status}, no objective ({len(xs)})", zorder=3, clip_on=False)
    ax.set_xlabel("trials in finishing order")
    ax.set_ylabel(_plain(f"objective ({state.objective_name}, lower is better)"))
    title = "objective per trial"
    if state.best_trial is not None:
        title += f" - best: trial {state.best_trial.trial_id} = {state.best_objective:.4g}"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _plain(text: str) -> str:
    """``text`` for a matplotlib label, drawn as it is: a ``$`` would start mathtext."""
    return text.replace("$", r"\$")


def _axis_position(values: list[Any]) -> tuple[list[float], list[float], list[str]]:
    """Values of one parameter on a [0, 1] axis (numbers linearly, or by decades when they span
    more than 100x; anything else by its sorted distinct values), with tick positions and labels."""
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) == len(values) and numbers:
        lo, hi = min(numbers), max(numbers)
        scale = math.log10 if lo > 0 and hi / lo > 100 else (lambda v: v)
        a, b = scale(lo), scale(hi)
        span = (b - a) or 1.0
        return [(scale(v) - a) / span for v in numbers], [0.0, 1.0], [f"{lo:.3g}", f"{hi:.3g}"]
    levels = sorted({str(v) for v in values})
    where = {v: i / max(len(levels) - 1, 1) for i, v in enumerate(levels)}
    return [where[str(v)] for v in values], list(where.values()), levels


def plot_parallel(state: CampaignState, path: str | os.PathLike, short: dict[str, str]) -> bool:
    """Parallel coordinates of the searched parameters and the objective, one line per trial with
    an objective, coloured by it (best on top); False (nothing written) without such trials."""
    plt = _pyplot()
    records = sorted((r for r in state.trials.values() if r.objective is not None), key=lambda r: -r.objective)
    keys = [k for k in state.param_keys if all(k in r.params for r in records)]
    if not records or not keys:
        return False
    columns = [_axis_position([r.params[k] for r in records]) for k in keys]
    columns.append(_axis_position([r.objective for r in records]))
    names = [short.get(k, k) for k in keys] + ["objective"]
    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 4.5), dpi=100)
    colours = plt.get_cmap("viridis_r")(columns[-1][0])
    from matplotlib.collections import LineCollection

    lines = [list(zip(range(len(names)), [col[0][i] for col in columns])) for i in range(len(records))]
    ax.add_collection(LineCollection(lines, colors=colours, linewidths=0.8 if len(records) > 300 else 1.4,
                                     alpha=0.35 if len(records) > 300 else 0.8))
    for x, (_, ticks, labels) in enumerate(columns):
        ax.axvline(x, color="black", linewidth=0.8)
        shown = range(0, len(ticks), max(1, len(ticks) // 8))
        for i in shown:
            ax.text(x + 0.03, ticks[i], _plain(labels[i]), fontsize=7, va="center")
    ax.set_xticks(range(len(names)), [_plain(n) for n in names], rotation=15, fontsize=8)
    ax.set_yticks([])
    ax.set_xlim(-0.2, len(names) - 0.6)
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"parallel coordinates: {len(records)} trials with an objective (yellow = best)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


#: learning-curve values beyond this magnitude are not drawn (a diverging trial may report 1e308)
CURVE_LIMIT = 1e100


def plot_curves(state: CampaignState, path: str | os.PathLike) -> bool:
    """The learning curves the trials reported (validation objective per epoch), a stopped trial's
    ending in a cross, the best trial's bold; False (nothing written) when no trial reported any."""
    curves = [(r, r.last_attempt.curve) for r in state.trials.values() if r.last_attempt and r.last_attempt.curve]
    if not curves:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    best = min((r for r, _ in curves if r.objective is not None), key=lambda r: r.objective, default=None)
    for record, curve in curves:
        points = [(e, v) for e, v in curve if v is not None and abs(v) <= CURVE_LIMIT]
        if not points:
            continue
        epochs, values = zip(*points)
        is_best = record is best
        ax.plot(epochs, values, lw=2.2 if is_best else 0.8, alpha=1.0 if is_best else 0.55,
                color=STATUS_COLOURS[record.status],
                label=f"best: trial {record.trial_id}" if is_best else None)
        if record.status == TrialStatus.STOPPED:
            ax.plot(epochs[-1], values[-1], "x", color="#d62728", ms=5)
    ax.set_xlabel("epoch")
    ax.set_ylabel(_plain(f"validation {state.objective_name}"))
    ax.set_yscale("log" if all(v > 0 for _, c in curves for _, v in c if v is not None and abs(v) <= CURVE_LIMIT)
                  else "linear")
    stopped = sum(r.status == TrialStatus.STOPPED for r, _ in curves)
    ax.set_title(f"learning curves of {len(curves)} trials ({stopped} stopped early: x)")
    if best is not None:
        ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


@dataclass
class ReportFiles:
    """What :func:`write_report` produced (``curves_png`` None: no trial reported epochs)."""

    text: str
    objective_png: Path
    gantt_png: Path
    curves_png: Path | None = None
    cost_png: Path | None = None  # None: no attempt journaled per-epoch predictions
    importance_png: Path | None = None  # None: too few completed trials, or no search space known
    parallel_png: Path | None = None  # None: no trial with an objective
    pareto_png: Path | None = None  # None: one objective, or no trial on the front
    html: Path | None = None  # report/index.html, the whole report as one self-contained page
    baselines: ReportBaselines | None = None  # read once per report (watch_report: once)
    finished_reason: str | None = None  # the campaign's campaign_finished reason (None: running or crashed)
    figure_errors: dict[str, str] = field(default_factory=dict)  # figure -> why it was not drawn


def plot_importance(found: list[Any], path: str | os.PathLike, short: dict[str, str]) -> None:
    """One panel per target: each parameter's importance with its 10-90% range over half-samples."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(found), figsize=(4.2 * len(found), 0.5 + 0.45 * len(found[0].params)),
                             squeeze=False)
    for ax, target in zip(axes[0], found):
        params = list(reversed(target.params))
        y = range(len(params))
        ax.barh(y, [p.importance for p in params], color="tab:blue", alpha=0.7)
        ax.errorbar([p.importance for p in params], y, fmt="none", ecolor="black", capsize=3,
                    xerr=[[max(0.0, p.importance - p.low) for p in params],
                          [max(0.0, p.high - p.importance) for p in params]])
        ax.set_yticks(list(y), [_plain(short.get(p.key, p.key)) for p in params])
        ax.set_xlim(0, 1)
        ax.set_title(_plain(f"{target.target} ({target.num_trials} trials)"), fontsize=9)
        ax.set_xlabel("PED-ANOVA importance (10-90% over halves)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(campaign_dir: str | os.PathLike, top: int = 10,
                 ensemble_dir: str | os.PathLike | None = None,
                 baselines: ReportBaselines | None = None) -> ReportFiles:
    """Summary text plus ``report/objective.png``, ``report/gantt.png``, (when trials reported
    epochs) ``report/curves.png``, (with enough completed trials) the hyperparameter importances
    in the text and ``report/importance.png``, (several objectives) the Pareto front in the text and
    ``report/pareto.png``, and all of it in ``report/index.html``
    (:mod:`hpo.report_html`; with ``ensemble_dir``, the ensemble's members and plots too).
    ``baselines``: the dataset's, read earlier (default: read now, one pass over the training and
    validation splits)."""
    campaign_dir = Path(campaign_dir)
    record = _load_record(campaign_dir)
    state = record.state
    out = CampaignDir.at(campaign_dir).report
    out.mkdir(exist_ok=True)
    summary = summarize(state, top)
    shape = read_dataset_shape(record.dataset)
    summary.head_columns = head_columns(summary.top, shape)
    summary.baselines = baselines if baselines is not None else read_baselines(record.dataset)
    files = ReportFiles(format_summary(summary), out / "objective.png", out / "gantt.png",
                        finished_reason=state.finished_reason, baselines=summary.baselines)
    errors = files.figure_errors
    _draw(errors, "objective", files.objective_png, lambda p: plot_objective(state, p))
    _draw(errors, "gantt", files.gantt_png, lambda p: plot_gantt(state, p))
    files.curves_png = _draw(errors, "curves", out / "curves.png", lambda p: plot_curves(state, p))
    files.cost_png = _draw(errors, "cost", out / "cost.png", lambda p: plot_cost(state, p))
    short = summary.short_names
    found: list[Any] = []
    try:
        found = _importances(record.frozen.search_space, state)
    except Exception as exc:  # noqa: BLE001 - one section that fails never stops the report
        errors["importance"] = _one_line(exc)
    if found:
        from hpo.importance import format_importances

        short = {**_short_names([p.key for p in found[0].params]), **short}
        files.text += "\n\n" + format_importances(found, short=lambda k: short.get(k, k))
        files.importance_png = _draw(errors, "importance", out / "importance.png",
                                     lambda p: plot_importance(found, p, short))
    files.parallel_png = _draw(errors, "parallel", out / "parallel.png", lambda p: plot_parallel(state, p, short))
    front = pareto_front(state)
    if front is not None:
        files.text += "\n\n" + format_pareto(front)
        files.pareto_png = _draw(errors, "pareto", out / "pareto.png", lambda p: plot_pareto(front, p))
    from hpo.report_html import write_html

    figures = {"objective": files.objective_png, "gantt": files.gantt_png, "curves": files.curves_png,
               "cost": files.cost_png, "importance": files.importance_png, "parallel": files.parallel_png,
               "pareto": files.pareto_png}
    no_space = "" if record.frozen.search_space is not None else (
        "No importance estimate: the campaign's search space is not recorded in this directory (no "
        "campaign.yaml, and no journal that holds it).")
    files.html = write_html(out / "index.html", state, files.text, figures, found, short, ensemble_dir,
                            title=f"campaign report: {campaign_dir.resolve().name}", figure_errors=errors,
                            dataset_shape=shape, importance_note=no_space, baselines=summary.baselines)
    return files


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _draw(errors: dict[str, str], name: str, path: Path, draw: Callable[[Path], Any]) -> Path | None:
    """Draw one figure on its own: ``path`` when drawn, None when ``draw`` said there is nothing to
    draw (False) or failed; a failure is kept in ``errors[name]`` (the report shows that text in the
    figure's place) and never stops the other figures."""
    try:
        drawn = draw(path)
    except Exception as exc:  # noqa: BLE001 - any figure may meet data matplotlib cannot draw
        errors[name] = _one_line(exc)
        _pyplot().close("all")
        try:
            path.unlink(missing_ok=True)  # not a stale figure of an earlier report
        except OSError:
            pass
        return None
    return None if drawn is False else path


def watch_report(campaign_dir: str | os.PathLike, every_s: float, top: int = 10,
                 ensemble_dir: str | os.PathLike | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 on_refresh: Callable[[ReportFiles], None] | None = None) -> ReportFiles:
    """Rewrite the report every ``every_s`` seconds while the campaign runs (the journal is read
    without the lock) and once more after it records ``campaign_finished``; returns the last one."""
    baselines = None
    while True:
        files = write_report(campaign_dir, top, ensemble_dir, baselines)
        baselines = files.baselines
        if on_refresh is not None:
            on_refresh(files)
        if files.finished_reason is not None:
            return files
        sleep(every_s)


def _importances(space: SearchSpace | None, state: CampaignState) -> list[Any]:
    """The campaign's hyperparameter importances, or [] (no frozen search space, too few trials)."""
    from hpo.importance import campaign_importances

    return [] if space is None else campaign_importances(state, space)
