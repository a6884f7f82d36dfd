"""``CAMPAIGN_DIR/report/index.html``: the campaign report as one self-contained page.

Nothing is fetched at view time: the figures are the report's PNGs embedded as data URIs, the
styles and the few lines of script are inline. Sections: the summary (counts, best, slot-hours,
utilisation, the cost model's error), the top trials (a table whose columns sort on click), the
search trajectory, parallel coordinates and slot usage (Gantt), the learning curves (trials stopped early marked), the
hyperparameter importances (figure and table), failures grouped by reason, and, when an ensemble
directory is given, its members (as its manifest lists them:
:mod:`hydragnn_ensemble.manifest_members`), parity plots (MAE and R² printed) and calibration curves.

Every number in a table is rounded to significant digits (:mod:`hpo.number_format`); the trials
table has each head's validation MAE, an energy per atom in meV/atom (:mod:`hpo.head_columns`),
and the baselines table under it each head's baseline beside the lowest trial MAE
(:mod:`hpo.baseline_rows`). Nothing is wider than the page: the summary wraps inside its box and a
wide table scrolls inside its own. The Gantt chart's legend is repeated under it as text, entry for
entry (:func:`hpo.gantt.gantt_legend`: only what the chart draws).

The page's script counts the figures that decoded (``naturalWidth > 0``) into
``<body data-figures-loaded="N" data-figures="M">``, which the browser test reads.
"""

from __future__ import annotations

import base64
import html
import os
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from hpo.baseline_rows import ReportBaselines, baseline_rows
from hpo.failures import failure_group, failure_text, failures_heading
from hpo.gantt import LegendEntry, gantt_legend
from hpo.head_columns import DatasetShape, HeadColumn, columns_note, head_columns
from hpo.importance import shortfall_note
from hpo.number_format import DIGITS, cell_text, significant
from hpo.state import CampaignState, TrialRecord
from hydragnn_ensemble.manifest_members import read_manifest_members

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; } td, th { padding: 2px 8px; text-align: right; }
th { background: #eee; cursor: pointer; user-select: none; } tr:nth-child(even) td { background: #f7f7f7; }
td.text, th.text { text-align: left; } pre { background: #f4f4f4; padding: 0.8em; overflow-x: auto; }
pre.summary { white-space: pre-wrap; overflow-wrap: anywhere; }
div.scroll { max-width: 100%; overflow-x: auto; } p.note { font-size: 0.85em; color: #555; }
figure { margin: 0.6em 0; } figure img { max-width: 100%; box-sizing: border-box; border: 1px solid #ddd; }
figcaption { font-size: 0.85em; color: #555; } p.error { color: #b00020; }
ul.legend { list-style: none; padding: 0; margin: 0.2em 0; font-size: 0.85em; }
ul.legend li { display: inline-block; margin-right: 1.2em; }
ul.legend span.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.3em;
                        vertical-align: middle; border: 1px solid #999; }
ul.legend span.dashed { display: inline-block; width: 1.4em; margin-right: 0.3em; vertical-align: middle;
                        border-top: 2px dashed #000; }
"""

_SCRIPT = """
function sortTable(th) {
  const table = th.closest('table'), body = table.tBodies[0];
  const col = Array.prototype.indexOf.call(th.parentNode.children, th);
  const asc = th.dataset.order !== 'asc'; th.dataset.order = asc ? 'asc' : 'desc';
  const key = (tr) => { const t = tr.children[col].textContent; const n = parseFloat(t);
                        return isNaN(n) ? t : n; };
  Array.from(body.rows).sort((a, b) => { const x = key(a), y = key(b);
      return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); }).forEach((tr) => body.appendChild(tr));
}
document.querySelectorAll('th').forEach((th) => th.addEventListener('click', () => sortTable(th)));
function countFigures() {
  const imgs = Array.from(document.images);
  const loaded = imgs.filter((img) => img.complete && img.naturalWidth > 0).length;
  document.body.dataset.figures = String(imgs.length);
  document.body.dataset.figuresLoaded = String(loaded);
}
window.addEventListener('load', countFigures);
"""


def _figure_html(path: Path | None, caption: str, error: str | None = None) -> str:
    if error is not None:
        return f'<p class="error">{html.escape(caption)}: not drawn ({html.escape(error)})</p>'
    if path is None or not path.exists():
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: Sequence[int] = (),
           css_class: str = "") -> str:
    """A sortable table (floats to significant digits), inside a box that scrolls when it is wider
    than the page."""
    def cell(tag: str, i: int, value: Any) -> str:
        cls = ' class="text"' if i in text_columns else ""
        return f"<{tag}{cls}>{html.escape(cell_text(value))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows)
    table_class = f' class="{css_class}"' if css_class else ""
    return f'<div class="scroll"><table{table_class}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def ranked_trials(state: CampaignState, limit: int = 200) -> list[TrialRecord]:
    """The finished trials with an objective, best first (at most ``limit``; a 10,000-trial page
    stays light)."""
    return sorted((r for r in state.trials.values() if r.objective is not None),
                  key=lambda r: (r.objective, r.trial_id))[:limit]


def _trials_table(state: CampaignState, short: dict[str, str], columns: Sequence[HeadColumn]) -> str:
    """The ranked trials: objective (6 significant digits), status, every searched parameter (4),
    each head's validation MAE (4, in the column's unit), slots, epochs and wall time."""
    ranked = ranked_trials(state)
    keys = state.param_keys
    rows = []
    for rank, r in enumerate(ranked, start=1):
        result = r.result
        last = r.last_attempt
        rows.append([rank, r.trial_id, significant(r.objective, 6), str(r.status),
                     *[r.params.get(k, "") for k in keys], *[c.value(r) for c in columns],
                     len(last.slots) if last else "", result.epochs if result is not None else "",
                     f"{result.wall_time_s:.1f}" if result is not None else ""])
    header = ["rank", "trial", "objective", "status", *[short.get(k, k) for k in keys], *[c.header for c in columns],
              "slots", "epochs", "wall_s"]
    return _table(header, rows, text_columns=[3] + [4 + i for i, k in enumerate(keys)
                                                   if any(isinstance(r.params.get(k), str) for r in ranked)],
                  css_class="trials")


def _baselines(columns: Sequence[HeadColumn], found: ReportBaselines | None, state: CampaignState) -> str:
    """The baselines beside the lowest trial MAE, in the trials table's units."""
    if found is None:
        return ""
    if found.baselines is None:
        return f'<p class="note baselines-note">No baselines: {html.escape(found.note or "")}</p>'
    rows = baseline_rows(columns, found.baselines, ranked_trials(state))
    if not rows:
        return '<p class="note baselines-note">No head of the trials has a baseline.</p>'
    b = found.baselines
    note = (f"Fitted on the {b.fit_split}, scored on the {b.eval_split} (where the trials' MAE is measured): "
            "composition-linear energies (one reference energy per element, least squares), zero forces and "
            "stress, the training mean of any other head. Ratio: the lowest trial MAE over the baseline's.")
    table = _table(["head", "unit", "baseline MAE", "lowest trial MAE", "ratio", "baseline"],
                   [[r.column.head, r.column.unit, r.value, r.best, r.ratio, r.baseline.description] for r in rows],
                   text_columns=[0, 1, 5], css_class="baselines")
    return f'<h2>Baselines</h2><p class="note">{html.escape(note)}</p>{table}'


def _legend(entries: Sequence[LegendEntry]) -> str:
    """The Gantt chart's legend as text: a swatch per status drawn, the dashed line when drawn."""
    if not entries:
        return ""
    items = []
    for entry in entries:
        mark = (f'<span class="swatch" style="background:{entry.colour}"></span>' if entry.colour is not None
                else '<span class="dashed"></span>')
        items.append(f"<li>{mark}{html.escape(entry.label)}</li>")
    return f'<ul class="legend gantt-legend">{"".join(items)}</ul>'


def _failures(state: CampaignState) -> str:
    """The trials without an objective (a timeout with its best epoch is no failure; one in epoch 0
    is), grouped by status and reason: the groups of a status add up to its count in the summary."""
    failed = state.without_objective
    if not failed:
        return "<p>No trial failed.</p>"
    groups = Counter(failure_group(failure_text(r.status, r.last_attempt.reason)) for r in failed)
    heading = failures_heading(Counter(r.status for r in failed))
    return (f'<p class="failures">{html.escape(heading)} (each told to the optimizer as a failure).</p>'
            + _table(["trials", "reason"], [[n, g] for g, n in groups.most_common()], text_columns=[1]))


def _importance_table(found: list[Any], short: dict[str, str]) -> str:
    parts = []
    for target in found:
        rows = [[short.get(p.key, p.key), f"{p.importance:.3f}", f"{p.low:.3f}", f"{p.high:.3f}",
                 f"{100 * p.rank_stability:.0f}%"] for p in target.params]
        parts.append(f"<h3>{html.escape(target.target)} ({target.num_trials} {html.escape(target.trials_are)})</h3>"
                     + _table(["parameter", "importance", "10%", "90%", "same rank"], rows, text_columns=[0]))
    return "".join(parts)


def _number(value: float | None, digits: int = DIGITS) -> str | None:
    """A manifest's number to ``digits`` significant digits (None: the entry has none)."""
    return None if value is None else significant(value, digits)


def _ensemble_section(ensemble_dir: Path) -> str:
    try:
        members = read_manifest_members(ensemble_dir)
    except ValueError as exc:
        return f'<p class="error">{html.escape(str(exc))}</p>'
    rows = [[m.trial_id, _number(m.weight), _number(m.objective, 6)] for m in members]
    parts = [f"<p>{html.escape(str(ensemble_dir))}: {len(members)} members</p>",
             _table(["trial", "weight", "objective"], rows)]
    for png in sorted((ensemble_dir / "calibration").glob("*.png")):
        kind = "parity plot (MAE, R²)" if png.name.startswith("parity") else "calibration curve"
        parts.append(_figure_html(png, f"{kind}: {png.stem}"))
    return "".join(parts)


def write_html(path: Path, state: CampaignState, summary_text: str, figures: dict[str, Path | None],
               importances: list[Any], short: dict[str, str], ensemble_dir: str | os.PathLike | None = None,
               title: str = "campaign report", figure_errors: dict[str, str] | None = None,
               dataset_shape: DatasetShape | None = None, importance_note: str = "",
               baselines: ReportBaselines | None = None) -> Path:
    """Write the page to ``path`` (atomically) and return it. ``figures``: ``objective``, ``gantt``,
    ``curves``, ``importance`` PNG paths (None or missing: the section says so); ``figure_errors``:
    why a figure was not drawn (shown in its place); ``dataset_shape``: the campaign's dataset as
    read (the energy MAE per atom where it allows); ``importance_note``: why there are no
    importances (the default: :func:`hpo.importance.shortfall_note`); ``baselines``: the dataset's
    (:mod:`hpo.baseline_rows`), shown beside the lowest trial MAE."""
    errors = figure_errors or {}
    columns = head_columns(ranked_trials(state), dataset_shape)
    note = columns_note(columns, dataset_shape)
    gantt = _figure_html(figures.get("gantt"), "slot usage over time (Gantt)", errors.get("gantt"))
    if gantt and "gantt" not in errors:
        gantt += _legend(gantt_legend(state))

    def _figure(name: str, caption: str) -> str:
        return _figure_html(figures.get(name), caption, errors.get(name))

    sections = [
        f"<h1>{html.escape(title)}</h1>",
        "<h2>Summary</h2>", f'<pre class="summary">{html.escape(summary_text.split(chr(10) + chr(10))[0])}</pre>',
        "<h2>Trials</h2><p>Click a column to sort.</p>", _trials_table(state, short, columns),
        f'<p class="note mae-note">{html.escape(note)}</p>' if note else "",
        _baselines(columns, baselines, state),
        "<h2>Search trajectory and slot usage</h2>",
        _figure("objective", "objective per trial and best so far"),
        _figure("parallel", "parallel coordinates of the searched parameters and the objective"),
        gantt,
        _figure("cost", "the cost model: predicted vs actual wall time per attempt and per epoch"),
        *(["<h2>Pareto front</h2>", _figure("pareto", "the first objective against each other one; "
                                              "the non-dominated trials in blue")]
          if figures.get("pareto") is not None or "pareto" in errors else []),
        "<h2>Learning curves</h2>",
        _figure("curves", "validation objective per epoch; trials stopped early marked")
        or "<p>No trial reported epochs.</p>",
        "<h2>Hyperparameter importance</h2>",
        (_figure("importance", "PED-ANOVA importance with its 10-90% range over half-samples")
         + _importance_table(importances, short)) if importances else
        _figure("importance", "hyperparameter importance") if "importance" in errors else
        f'<p class="importance-note">{html.escape(importance_note or shortfall_note(state))}</p>',
        "<h2>Failures by reason</h2>", _failures(state),
    ]
    if ensemble_dir is not None:
        sections += ["<h2>Ensemble</h2>", _ensemble_section(Path(ensemble_dir))]
    page = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{''.join(sections)}<script>{_SCRIPT}</script></body></html>\n")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return path
