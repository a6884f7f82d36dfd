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

from hpo.journal import CampaignState, TrialRecord

__all__ = ["FAILURE_MARKER", "METADATA_COLUMNS", "results_rows", "write_results_csv"]

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
