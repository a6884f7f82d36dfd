"""The campaign report: a summary table and two plots, from the campaign directory alone.

It reads ``journal.jsonl`` (or, when there is none, ``results.csv``) so it works on a directory
copied to another machine, while the campaign runs or after it stopped:

* the summary: trials by status, the best trial, the top-N trials with their hyperparameters,
  total slot-hours and utilisation (busy slot-time over slot-time available while the campaign ran),
  and the cost model's own prediction error (:func:`hpo.report_costs.prediction_error`);
* the baselines every head's validation MAE must beat, read from the campaign's dataset
  (:mod:`hpo.baseline_rows`: composition-linear energies, zero forces and stress);
* ``report/objective.png``: objective per trial in finishing order, failures marked, best-so-far;
* ``report/gantt.png``: slots over time, one bar per trial attempt, coloured by status.

The report's parts live in their own modules: the cost model's error and figure
(:mod:`hpo.report_costs`), the trials' figures (:mod:`hpo.report_plots`), the slot usage
(:mod:`hpo.gantt`), the Pareto front (:mod:`hpo.report_pareto`) and the page (:mod:`hpo.report_html`).
This module gathers the summary (:func:`summarize`, :func:`format_summary`) and writes the report
(:func:`write_report`, :func:`watch_report`).
"""

from __future__ import annotations

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
from hpo.figure_style import pyplot
from hpo.gantt import plot_gantt
from hpo.head_columns import HeadColumn, head_columns, read_dataset_shape
from hpo.report_costs import CostPredictionError, attempt_slots, format_prediction_error, plot_cost, prediction_error
from hpo.report_pareto import format_pareto, pareto_front, plot_pareto
from hpo.report_plots import plot_curves, plot_importance, plot_objective, plot_parallel
from hpo.space import SearchSpace
from hpo.state import AttemptRecord, CampaignState, TrialRecord
from hpo.status import PendingStatus, Status, TrialStatus
from hpo.time_budget import budget_moment, cut_short_note, overrun_note, still_improving

__all__ = [
    "ReportFigures",
    "ReportFiles",
    "cut_short",
    "format_summary",
    "load_state",
    "summarize",
    "watch_report",
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
    lineage: list[str] = field(default_factory=list)  # PBT: one line per trial with exploits (hpo.pbt)


def _attempt_end(attempt: AttemptRecord, state: CampaignState) -> float | None:
    if attempt.end is not None:
        return attempt.end
    return state.last_time


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
                busy += max(0.0, end - attempt.start) * attempt_slots(attempt)
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
        lineage=lineage_lines(state),
    )


def lineage_lines(state: CampaignState) -> list[str]:
    """PBT: per trial that exploited others, its lineage (after epoch e it took over trial d's state
    after d's epoch f), oldest first."""
    return [f"trial {r.trial_id}: " + " -> ".join(f"after epoch {s.epoch} took trial {s.donor_id} "
                                                  f"(its epoch {s.donor_epoch})" for s in r.lineage)
            for _, r in sorted(state.trials.items()) if r.lineage]


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


def _top_table(summary: ReportFigures) -> list[str]:
    """The top trials as a text table (rank, trial, objective, the searched parameters, each head's
    validation MAE, slots, wall time), the MAE units, and the baselines under it."""
    lines: list[str] = []
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
            + [str(attempt_slots(last)) if last else "", _cell(result.wall_time_s if result is not None else "")]
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
    return lines


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
    lines.append(format_prediction_error(summary.cost_model_error))
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
    if summary.lineage:
        lines.append(f"population-based training: {len(summary.lineage)} trials exploited others")
        lines.extend(f"  {line}" for line in summary.lineage)
    if summary.top:
        lines.extend(_top_table(summary))
    return "\n".join(lines)


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
        pyplot().close("all")
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
