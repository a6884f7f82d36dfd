"""``CAMPAIGN_DIR/results.csv`` in DeepHyper's conventions, so that ``deephyper.analysis.hpo``
(``parameters_at_max``, ``parameters_at_topk``, ``plot_search_trajectory_single_objective_hpo``,
``plot_worker_utilization``, ...) gives the right answer with its default arguments.

One row per trial that finished (DeepHyper lists gathered jobs only; a trial running now or at a
crash is in the journal, not here), in the order rank 0 gathered them (DeepHyper writes its rows as
jobs are gathered, and its trajectory plot relies on it):

* ``p:<key>`` per search-space key;
* ``objective``: DeepHyper's maximised objective, i.e. the **negated** loss of a trial with a
  result (completed, or stopped early: its best value at the rung it reached), DeepHyper's failure
  marker ``F`` for any other finished trial; a multi-objective campaign has, as DeepHyper's
  multi-objective tables, ``objective_0``, ``objective_1``, ... instead (each negated, in the order
  of the campaign's ``objectives``; ``F`` in each for a trial without them all);
* ``loss``: the minimised objective as the trainer reported it (``result.json``), empty for a
  failure;
* ``job_id`` (the trial id), ``job_status``: ``DONE`` (a trial_finished event) or ``FAILED``;
* ``m:timestamp_submit`` / ``m:timestamp_start`` (its last attempt started on its slots: DeepHyper
  submits a job when a worker is free, so its submit/gather profile counts busy workers),
  ``m:timestamp_end`` (its processes ended), ``m:timestamp_gather`` (rank 0 journaled its end: the
  rows' order), ``m:timestamp_suggested``
  (the optimizer proposed it; earlier when trials are suggested ahead): seconds since the campaign
  first started, as DeepHyper's are relative to its search's start;
* ``m:status`` (result.json status), ``m:attempts``, ``m:slots`` and ``m:host`` (``;``-separated),
  ``m:size``, ``m:wall_time_s``, ``m:epochs``, ``m:num_parameters``, ``m:peak_memory_mb``,
  ``m:failure_reason``, ``m:inference_ms_per_graph``;
* a population-based training campaign (:mod:`hpo.pbt`) only: ``m:lineage``, the trial's exploits
  as ``<epoch>:<donor>@<donor's epoch>`` (``;``-separated; its ``p:`` columns are its final
  parameters, those of its last exploit);
* per head the trial predicted, its errors in physical units (the head's unit, from result.json):
  ``m:<head>_val_mae``, ``m:<head>_val_rmse``, ``m:<head>_test_mae``, ``m:<head>_test_rmse``.

:func:`write_results_csv` writes the whole table atomically (temporary file, fsync, rename).
During a campaign rank 0 keeps it with a :class:`ResultsCsv`: the rows of the trials that finished
since its last write are appended (O(those rows), not O(campaign)); the table is rewritten whole
only when its header changes (a head first reported), when the file is not the one it wrote, and at
the end of the run.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from hpo.state import AttemptRecord, CampaignState, TrialRecord
from hpo.status import TrialStatus
from hydragnn_ensemble.result import HeadMetrics, TrialResult
from hydragnn_ensemble.untrusted_files import is_regular_file, write_atomic

__all__ = ["FAILURE_MARKER", "METADATA_COLUMNS", "ResultsCsv", "results_rows", "state_from_results_csv",
           "write_results_csv"]

FAILURE_MARKER = "F"
METADATA_COLUMNS: tuple[str, ...] = (
    "m:timestamp_submit",
    "m:timestamp_gather",
    "m:timestamp_start",
    "m:timestamp_end",
    "m:timestamp_suggested",
    "m:status",
    "m:attempts",
    "m:slots",
    "m:host",
    "m:size",
    "m:wall_time_s",
    "m:epochs",
    "m:num_parameters",
    "m:peak_memory_mb",
    "m:failure_reason",
    "m:inference_ms_per_graph",
)


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _rel(t: float | None, t0: float | None) -> str:
    return "" if t is None or t0 is None else f"{t - t0:.6f}"


#: DeepHyper's ``job_status`` of each final status: a job that ended with a result is DONE
JOB_STATUS: dict[TrialStatus, str] = {TrialStatus.COMPLETED: "DONE", TrialStatus.DIVERGED: "DONE",
                                      TrialStatus.TIMEOUT: "DONE", TrialStatus.STOPPED: "DONE",
                                      TrialStatus.FAILED: "FAILED"}


def _job_status(record: TrialRecord) -> str:
    return JOB_STATUS[record.status]


HEAD_ERRORS: tuple[str, ...] = ("val_mae", "val_rmse", "test_mae", "test_rmse")


def result_heads(records: list[TrialRecord]) -> list[str]:
    """The heads the trials' results report, in the order they first appear."""
    names: dict[str, None] = {}
    for record in records:
        if record.result is not None:
            names.update(dict.fromkeys(record.result.heads))
    return list(names)


def head_error(record: TrialRecord, head: str, error: str) -> float | None:
    """One error (``val_mae`` ...) of one head in a trial's result, or None."""
    return None if record.result is None else record.result.metric(head, error)


def _header(state: CampaignState, heads: list[str]) -> list[str]:
    keys = state.param_keys
    objective_columns = ([f"objective_{i}" for i in range(len(state.objectives.keys))] if state.objectives.multi
                         else ["objective"])
    return ([f"p:{k}" for k in keys] + objective_columns + ["loss", "job_id", "job_status", *METADATA_COLUMNS]
            + (["m:lineage"] if state.is_pbt else []) + [f"m:{h}_{e}" for h in heads for e in HEAD_ERRORS])


def _row(state: CampaignState, record: TrialRecord, keys: list[str], heads: list[str]) -> list[str]:
    """One finished trial's row (strings, as written)."""
    last = record.last_attempt
    assert last is not None
    result = record.result
    loss = record.objective
    multi = state.objectives.multi
    values = record.objective_values if multi else (loss,)
    width = len(state.objectives.keys) if multi else 1
    t0 = state.start_time
    return ([_fmt(record.params.get(k)) for k in keys]
            + ([FAILURE_MARKER] * width if values is None or loss is None else [_fmt(-v) for v in values])
            + [_fmt(loss), str(record.trial_id), _job_status(record), _rel(last.start, t0),
               _rel(last.gathered_at if last.gathered_at is not None else last.end, t0),
               _rel(last.start, t0), _rel(last.end, t0), _rel(record.suggested_time, t0), str(record.status),
               str(len(record.attempts)), ";".join(str(s) for s in last.slots), ";".join(dict.fromkeys(last.hosts)),
               str(last.size),
               *(("", "", "", "") if result is None else (
                   _fmt(result.wall_time_s), _fmt(result.epochs), _fmt(result.num_parameters),
                   _fmt(result.peak_memory_mb))),
               _fmt(last.reason), _fmt(None if result is None else result.inference_ms_per_graph)]
            + ([";".join(step.text() for step in record.lineage)] if state.is_pbt else [])
            + [_fmt(head_error(record, h, e)) for h in heads for e in HEAD_ERRORS])


def results_rows(state: CampaignState) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the results table (strings, as written to the CSV), in the order the
    trials were gathered."""
    records = [state.trials[tid] for tid in state.gathered]
    heads = result_heads(records)
    keys = state.param_keys
    return _header(state, heads), [_row(state, record, keys, heads) for record in records]


def _csv_text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


class ResultsTableError(OSError):
    """``results.csv`` cannot be written where it belongs (something that is no file is there)."""


def write_results_csv(state: CampaignState, path: str | os.PathLike) -> None:
    """Write the results table atomically to ``path`` (no temporary file is left when that fails);
    :class:`ResultsTableError` naming the path when something other than a file is there."""
    header, rows = results_rows(state)
    _write_whole(Path(path), _csv_text([header, *rows]))


def _write_whole(path: Path, text: str) -> None:
    if os.path.lexists(path) and not is_regular_file(path):
        raise ResultsTableError(f"{path} is not a regular file (a directory or a link is there): the results table "
                                "was not written; move it away and run 'hydragnn-ensemble report' to write it "
                                "from the journal")
    write_atomic(path, text, fsync=True)


class ResultsCsv:
    """``results.csv`` kept up to date as trials finish (see the module docstring)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._header: list[str] | None = None
        self._heads: list[str] = []
        self._rows = 0  # of state.gathered, written
        self._size = -1  # the file's size after our last write
        self.rewrites = 0  # whole-table writes (a test and the bench read it)

    def update(self, state: CampaignState) -> None:
        """Append the rows of the trials gathered since the last call (the whole table when the
        header changed or the file is not the one last written)."""
        new = [state.trials[tid] for tid in state.gathered[self._rows:]]
        heads = result_heads(new)
        if any(h not in self._heads for h in heads) or self._header is None or not self._unchanged():
            self.rewrite(state)
            return
        if not new:
            return
        keys = state.param_keys
        text = _csv_text([_row(state, record, keys, self._heads) for record in new])
        with open(self.path, "a") as fh:
            fh.write(text)
        self._rows = len(state.gathered)
        self._size += len(text.encode())

    def rewrite(self, state: CampaignState) -> None:
        """The whole table from ``state`` (atomically)."""
        header, rows = results_rows(state)
        text = _csv_text([header, *rows])
        _write_whole(self.path, text)
        self._header, self._heads = header, result_heads([state.trials[tid] for tid in state.gathered])
        self._rows, self._size = len(state.gathered), len(text.encode())
        self.rewrites += 1

    def _unchanged(self) -> bool:
        """The file is a regular file of the size we left it at (nobody replaced or cut it)."""
        try:
            return is_regular_file(self.path) and self.path.stat().st_size == self._size
        except OSError:
            return False


def _number(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _loss(row: dict[str, str]) -> float | None:
    """The minimised objective of a row: ``loss``, or the negated ``objective`` (``objective_0`` in
    a multi-objective table: DeepHyper's)."""
    if row.get("loss"):
        return float(row["loss"])
    objective = row.get("objective") or row.get("objective_0") or ""
    return -float(objective) if objective and not objective.startswith(FAILURE_MARKER) else None


def _result_of_row(row: dict[str, str], status: TrialStatus, loss: float | None) -> TrialResult:
    """The part of a trial's result a results.csv row holds (its m: columns)."""
    def number(key: str, cast=float) -> Any:
        text = row.get(f"m:{key}") or ""
        try:
            return cast(text) if text else None
        except ValueError:
            return None

    heads: dict[str, HeadMetrics] = {}
    for key in row:
        for error in HEAD_ERRORS:
            if key.startswith("m:") and key.endswith(f"_{error}"):
                head = key[2:-len(error) - 1]
                setattr(heads.setdefault(head, HeadMetrics()), error, number(f"{head}_{error}"))
    return TrialResult(status=status, objective=loss, heads=heads, num_parameters=number("num_parameters", int),
                       epochs=number("epochs", int) or 0, wall_time_s=number("wall_time_s") or 0.0,
                       peak_memory_mb=number("peak_memory_mb"), failure_reason=row.get("m:failure_reason") or None,
                       inference_ms_per_graph=number("inference_ms_per_graph"))


def state_from_results_csv(path: str | os.PathLike) -> CampaignState:
    """The campaign state a results.csv holds (for a directory without its journal): trials with
    their last attempt, objective and timestamps relative to the first start."""
    state = CampaignState(start_time=0.0)
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        record = TrialRecord(int(row["job_id"]))
        record.params = {k[2:]: _number(v) for k, v in row.items() if k.startswith("p:")}
        attempt = AttemptRecord(
            max(int(row.get("m:attempts") or 1) - 1, 0),
            start=float(row["m:timestamp_start"]) if row.get("m:timestamp_start") else None,
            end=float(row["m:timestamp_end"]) if row.get("m:timestamp_end") else None,
            gathered_at=float(row["m:timestamp_gather"]) if row.get("m:timestamp_gather") else None,
            slots=[int(s) for s in (row.get("m:slots") or "").split(";") if s],
            hosts=[h for h in (row.get("m:host") or "").split(";") if h],
            size=int(row.get("m:size") or 0),
            status=TrialStatus(row.get("m:status") or TrialStatus.COMPLETED),
            reason=row.get("m:failure_reason") or None,
        )
        attempt.result = _result_of_row(row, attempt.status, _loss(row))
        record.attempts[attempt.attempt] = attempt
        record.objective = _loss(row)
        state.trials[record.trial_id] = record
        state.gathered.append(record.trial_id)
    ends = [a.end or a.start or 0.0 for r in state.trials.values() for a in r.attempts.values()]
    state.last_time = max(ends, default=0.0)
    slots = [s for r in state.trials.values() for a in r.attempts.values() for s in a.slots]
    state.segments = [(0.0, state.last_time, max(slots, default=-1) + 1)]
    return state
