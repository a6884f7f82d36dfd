"""``CAMPAIGN_DIR/results.csv`` in DeepHyper's column conventions.

One row per trial that started (finished ones first by id, then running/interrupted ones):

* ``p:<key>`` per search-space key;
* ``objective``: the minimised objective of a completed trial, DeepHyper's failure marker ``F``
  for any other finished trial, empty while running. (Unlike DeepHyper's own results.csv, whose
  objective is maximised, this is the loss as reported in ``result.json``);
* ``job_id`` (the trial id), ``job_status``: ``DONE`` (a trial_finished event), ``FAILED``
  (trial_failed), ``RUNNING`` (started, no end: running now or at the crash);
* ``m:timestamp_submit`` / ``m:timestamp_start`` / ``m:timestamp_end``: seconds since the campaign
  first started (DeepHyper's timestamps are relative too), of the trial's last attempt;
* ``m:status`` (result.json status or running/interrupted), ``m:attempts``, ``m:slots`` and
  ``m:host`` (``;``-separated), ``m:size``, ``m:wall_time_s``, ``m:epochs``, ``m:num_parameters``,
  ``m:peak_memory_mb``, ``m:failure_reason``.

Written atomically (temporary file, fsync, rename).
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from hpo.state import AttemptRecord, CampaignState, TrialRecord

__all__ = ["FAILURE_MARKER", "METADATA_COLUMNS", "results_rows", "state_from_results_csv", "write_results_csv"]

FAILURE_MARKER = "F"
METADATA_COLUMNS: tuple[str, ...] = (
    "m:timestamp_submit",
    "m:timestamp_start",
    "m:timestamp_end",
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
)


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _rel(t: float | None, t0: float | None) -> str:
    return "" if t is None or t0 is None else f"{t - t0:.3f}"


def _job_status(record: TrialRecord) -> str:
    if not record.finished:
        return "RUNNING"
    return "FAILED" if record.status == "failed" else "DONE"


def results_rows(state: CampaignState) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the results table (strings, as written to the CSV)."""
    keys = state.param_keys
    header = [f"p:{k}" for k in keys] + ["objective", "job_id", "job_status", *METADATA_COLUMNS]
    records = [r for r in state.finished] + [r for r in state.running_at_crash]
    rows = []
    t0 = state.start_time
    for record in records:
        last = record.last_attempt
        assert last is not None
        result = record.result or {}
        if record.finished:
            objective = _fmt(record.objective) if record.objective is not None else FAILURE_MARKER
        else:
            objective = ""
        rows.append(
            [_fmt(record.params.get(k)) for k in keys]
            + [
                objective,
                str(record.trial_id),
                _job_status(record),
                _rel(record.suggested_time, t0),
                _rel(last.start, t0),
                _rel(last.end, t0),
                record.status,
                str(len(record.attempts)),
                ";".join(str(s) for s in last.slots),
                ";".join(dict.fromkeys(last.hosts)),
                str(last.size),
                _fmt(result.get("wall_time_s")),
                _fmt(result.get("epochs")),
                _fmt(result.get("num_parameters")),
                _fmt(result.get("peak_memory_mb")),
                _fmt(last.reason),
            ]
        )
    return header, rows


def write_results_csv(state: CampaignState, path: str | os.PathLike) -> None:
    """Write the results table atomically to ``path``."""
    header, rows = results_rows(state)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        fh.write(buffer.getvalue())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _number(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


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
            slots=[int(s) for s in (row.get("m:slots") or "").split(";") if s],
            hosts=[h for h in (row.get("m:host") or "").split(";") if h],
            size=int(row.get("m:size") or 0),
            status=row.get("m:status") or "completed",
            reason=row.get("m:failure_reason") or None,
        )
        record.attempts[attempt.attempt] = attempt
        objective = row.get("objective", "")
        record.objective = float(objective) if objective not in ("", "F") else None
        state.trials[record.trial_id] = record
    ends = [a.end or a.start or 0.0 for r in state.trials.values() for a in r.attempts.values()]
    state.last_time = max(ends, default=0.0)
    slots = [s for r in state.trials.values() for a in r.attempts.values() for s in a.slots]
    state.segments = [(0.0, state.last_time, max(slots, default=-1) + 1)]
    return state
