"""The report's baselines: what each head's validation MAE must beat, in the trials table's units.

The baselines (:mod:`hydragnn_ensemble.baseline`: composition-linear energies, zero forces and
stress, the training mean of anything else) are fitted on the campaign dataset's training split and
scored on its validation split, where the trials' MAE is measured. Each row puts a head's baseline
beside the lowest validation MAE a trial reached, in the unit of that head's column
(:class:`hpo.head_columns.HeadColumn`: an energy per atom in meV/atom).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hpo.head_columns import VALIDATION_SPLIT, HeadColumn
from hpo.state import TrialRecord
from hydragnn_ensemble.baseline import Baselines, HeadBaseline


@dataclass(frozen=True)
class BaselineRow:
    """One head: its column, its baseline, the baseline's MAE and the lowest trial MAE in the
    column's unit (None: no trial reported it)."""

    column: HeadColumn
    baseline: HeadBaseline
    value: float
    best: float | None

    @property
    def ratio(self) -> float | None:
        """The lowest trial MAE over the baseline's (below 1: better than the baseline)."""
        return None if self.best is None or not self.value > 0 else self.best / self.value


@dataclass(frozen=True)
class ReportBaselines:
    """The baselines of a campaign's dataset, or why there are none (``note``)."""

    baselines: Baselines | None
    note: str | None = None


def read_baselines(dataset: str | os.PathLike | None) -> ReportBaselines:
    """The dataset's baselines on its validation split (the note says why not: no dataset here, no
    training or validation split)."""
    from hydragnn_ensemble.baseline import fit_baselines

    if dataset is None or not Path(dataset).exists():
        return ReportBaselines(None, f"the campaign's dataset is not at {dataset}" if dataset else
                               "the campaign records no dataset")
    try:
        return ReportBaselines(fit_baselines(dataset, VALIDATION_SPLIT))
    except (ValueError, OSError) as exc:
        return ReportBaselines(None, str(exc))
    except Exception as exc:  # noqa: BLE001 - a foreign dataset only costs the report its baselines
        return ReportBaselines(None, f"{dataset}: {type(exc).__name__}: {exc}")


def baseline_rows(columns: Sequence[HeadColumn], baselines: Baselines | None,
                  records: Sequence[TrialRecord]) -> list[BaselineRow]:
    """A row per column whose head has a baseline, in column order."""
    if baselines is None:
        return []
    rows = []
    for column in columns:
        baseline = baselines.get(column.head)
        value = None if baseline is None else column.of_baseline(baseline.mae, baseline.mae_per_atom)
        if value is None:
            continue
        values = [v for r in records if (v := column.value(r)) is not None]
        rows.append(BaselineRow(column, baseline, value, min(values) if values else None))
    return rows


def format_baselines(rows: Sequence[BaselineRow], found: ReportBaselines) -> str:
    """The baselines as text lines (what ``report`` prints under the trials table)."""
    if found.baselines is None:
        return f"baselines: none ({found.note})"
    if not rows:
        return "baselines: no head of the trials has one"
    b = found.baselines
    lines = [f"baselines on the {b.eval_split} (fitted on the {b.fit_split}), "
             "beside the lowest MAE of the trials above:"]
    width = max(len(r.column.head) for r in rows) + 2
    lines.append(f"  {'head':<{width}}{'unit':<16}{'baseline MAE':>13}{'lowest trial':>14}{'ratio':>8}  baseline")
    for r in rows:
        best = "-" if r.best is None else f"{r.best:.4g}"
        ratio = "-" if r.ratio is None else f"{r.ratio:.3g}"
        lines.append(f"  {r.column.head:<{width}}{r.column.unit:<16}{r.value:>13.4g}{best:>14}{ratio:>8}  "
                     f"{r.baseline.description}")
    return "\n".join(lines)
