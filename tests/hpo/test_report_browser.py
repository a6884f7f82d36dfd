"""The HTML report in a real headless browser (Debian's Chromium): the page loads without console
errors, every figure decodes, the tables are there, and a screenshot is taken. Then the points a
reader meets, measured in the laid-out page (a probe script appended to a copy of the page writes
what it measured as JSON into the DOM): nothing overflows its box, the trials table has each head's
MAE (per atom for a total energy where every validation structure has the same atom count, per
structure where they differ) and numbers to significant digits, the Gantt chart is shown at its own
size (its 8 pt trial ids stay 11 px) with a legend of only what it draws, ensemble weights are
rounded, and a campaign too small for importances says how many trials that needs and how many it
has. Skipped (with the reason) where no Chromium is installed; ``.ci/run`` installs it."""

from __future__ import annotations

import html
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from ase.build import bulk
from hpo_testdata import result
from test_optuna_study import synthetic_campaign

from graph_builders.atomic import atoms_to_graph
from graph_builders.schema import HeadRegistry, HeadSpec
from graph_builders.store import write_dataset
from hpo.gantt import RESUME_LABEL
from hpo.importance import MIN_TRIALS
from hpo.journal import Journal
from hpo.report import write_report
from hpo.status import ALL_STATUSES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")

SPACE = {
    "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["GIN", "PNA", "SchNet"]},
    "NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 16, "high": 128, "step": 16},
    "NeuralNetwork.Architecture.num_conv_layers": {"type": "int", "low": 1, "high": 6},
    "NeuralNetwork.Training.Optimizer.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
}
LR = "NeuralNetwork.Training.Optimizer.learning_rate"
HEADS = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/Å")])
WINDOW = "--window-size=1280,2400"


def _cell(repeat: tuple[int, int, int], k: int) -> object:
    """A Cu cell of 4 x prod(repeat) atoms with an energy and forces."""
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(repeat)
    graph = atoms_to_graph(atoms, cutoff=4.0)
    graph["y_energy"] = torch.tensor([[-3.5 * len(atoms) + 0.01 * k]])
    graph["y_forces"] = torch.zeros(len(atoms), 3)
    return graph


def _dataset(path: Path, val_repeats: list[tuple[int, int, int]]) -> Path:
    """Four 8-atom training cells, the validation cells given, two 8-atom test cells."""
    graphs = [_cell((2, 1, 1), k) for k in range(4)] + [_cell(r, 10 + k) for k, r in enumerate(val_repeats)] \
        + [_cell((2, 1, 1), 20 + k) for k in range(2)]
    n_val = len(val_repeats)
    return write_dataset(path, graphs, HEADS, splits={"trainset": range(4), "valset": range(4, 4 + n_val),
                                                      "testset": range(4 + n_val, 6 + n_val)})


def energy_mae(trial_id: int) -> float:
    """A total-energy MAE with many digits (eV per structure)."""
    return 0.1234567891 * (1 + trial_id / 7)


def forces_mae(trial_id: int) -> float:
    return 0.0456789123 * (1 + trial_id / 13)


def _with_heads(res: dict, trial_id: int) -> dict:
    res["heads"] = {"energy": {"val_mae": energy_mae(trial_id), "unit": "eV"},
                    "forces": {"val_mae": forces_mae(trial_id), "unit": "eV/Å"}}
    return res


def _write_journal(root: Path, trials: list[tuple[int, dict, float, float, dict]], dataset: Path,
                   resume_at: float | None = None, predicted: bool = False) -> dict[int, dict]:
    """``(trial id, params, start, end, result)`` as a journal on one slot; a restart at
    ``resume_at``; with ``predicted``, each start carries the cost model's prediction (the summary
    then has its longest line, the cost model's error). Returns the params by trial id."""
    campaign = {"search_space": SPACE, "dataset": str(dataset)}
    events = [{"event": "campaign_started", "time": 0.0, "campaign": campaign, "resume": False, "ranks": 2,
               "slots": 1}]
    if resume_at is not None:
        events.append({"event": "campaign_started", "time": resume_at, "campaign": campaign, "resume": True,
                       "ranks": 2, "slots": 1})
    for tid, params, start, end, res in trials:
        started = {"event": "trial_started", "time": start, "trial_id": tid, "attempt": 0, "slots": [0],
                   "hosts": ["n0"], "size": 1}
        if predicted:
            started.update(predicted_slot_s=1.3 * (end - start), predicted_startup_s=1.0,
                           predicted_epoch_s=0.3 * (end - start))
        events += [{"event": "trial_suggested", "time": start, "trial_id": tid, "params": params, "attempt": 0},
                   started]
        if res["status"] == "failed":
            events.append({"event": "trial_failed", "time": end, "trial_id": tid, "attempt": 0,
                           "reason": res["failure_reason"], "log_tail": "Killed", "result": res})
        else:
            if res["status"] == "stopped":  # a learning curve, ended by the stopper
                events += [{"event": "trial_progress", "time": start + epoch, "trial_id": tid, "attempt": 0,
                            "epoch": epoch, "objective": value} for epoch, value in ((1, 2.0), (2, 1.5))]
            events.append({"event": "trial_finished", "time": end, "trial_id": tid, "attempt": 0, "result": res})
    with Journal(root / "journal.jsonl") as journal:
        for event in sorted(events, key=lambda e: (e["time"], e["event"] != "campaign_started")):
            journal.append(event)
    return {tid: params for tid, params, *_ in trials}


def _campaign_dir(root: Path) -> tuple[Path, dict[int, dict]]:
    """60 completed trials, one failed, one stopped; every validation structure has 8 atoms."""
    dataset = _dataset(root / "data.bp", [(2, 1, 1)] * 3)
    state = synthetic_campaign(60, seed=3)
    trials = [(r.trial_id, r.params, r.last_attempt.start, r.last_attempt.end,
               _with_heads(result("completed", r.objective, r.last_attempt.end - r.last_attempt.start), r.trial_id))
              for r in state.trials.values()]
    end = max(t[3] for t in trials)
    params = state.trials[0].params
    trials.append((60, params, end, end + 1, result("failed", None, 1.0, "out of memory")))
    stopped = _with_heads(result("stopped", 1.5, 3.0, "asha: rung 0"), 61)
    trials.append((61, params, end + 1, end + 4, stopped))
    campaign = root / "campaign"
    campaign.mkdir()
    return campaign, _write_journal(campaign, trials, dataset, predicted=True)


def _small_resumed_campaign(root: Path) -> Path:
    """7 trials (5 completed, 1 timed out with an objective, 1 stopped), resumed once; the validation
    structures have 4 and 8 atoms."""
    dataset = _dataset(root / "mixed.bp", [(1, 1, 1), (2, 1, 1)])
    state = synthetic_campaign(7, seed=5)
    statuses = ["completed"] * 5 + ["timeout", "stopped"]
    trials = [(r.trial_id, r.params, r.last_attempt.start, r.last_attempt.end,
               _with_heads(result(status, r.objective, r.last_attempt.end - r.last_attempt.start), r.trial_id))
              for r, status in zip(state.trials.values(), statuses)]
    campaign = root / "small"
    campaign.mkdir()
    _write_journal(campaign, trials, dataset, resume_at=trials[3][2])
    return campaign


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", *args], capture_output=True, text=True, timeout=180)


#: appended to a copy of the page: on load, measures the laid-out page into <pre id="probe">
PROBE = """<script>
window.addEventListener('load', () => {
  const box = (el) => { const r = el.getBoundingClientRect(); return {left: r.left, right: r.right,
                        width: r.width, scrollWidth: el.scrollWidth, clientWidth: el.clientWidth}; };
  const table = document.querySelector('table.trials');
  const gantt = document.querySelector('img[alt^="slot usage"]');
  const probe = {
    viewport: window.innerWidth, pageWidth: document.documentElement.scrollWidth,
    summary: box(document.querySelector('pre.summary')),
    summaryBoxes: Array.from(document.querySelectorAll('pre, p, h2, figure, ul.legend')).map(box),
    header: Array.from(table.tHead.rows[0].cells).map((c) => c.textContent),
    rows: Array.from(table.tBodies[0].rows).map((tr) => Array.from(tr.cells).map((c) => c.textContent)),
    tableBox: box(table.parentElement),
    maeNote: (document.querySelector('p.mae-note') || {}).textContent || '',
    legend: Array.from(document.querySelectorAll('ul.gantt-legend li')).map((li) => li.textContent),
    gantt: gantt ? {natural: gantt.naturalWidth, shown: gantt.clientWidth} : null,  // clientWidth: without its border
    importanceNote: (document.querySelector('p.importance-note') || {}).textContent || '',
    baselines: Array.from(document.querySelectorAll('table.baselines tbody tr'))
        .map((tr) => Array.from(tr.cells).map((c) => c.textContent)),
    ensemble: Array.from(document.querySelectorAll('table')).filter((t) => t.tHead.rows[0].cells[1]
        && t.tHead.rows[0].cells[1].textContent === 'weight').flatMap((t) => Array.from(t.tBodies[0].rows)
        .map((tr) => Array.from(tr.cells).map((c) => c.textContent))),
  };
  const out = document.createElement('pre'); out.id = 'probe'; out.textContent = JSON.stringify(probe);
  document.body.appendChild(out);
});
</script>"""


def _probe(page: Path) -> dict:
    """Load a copy of ``page`` with :data:`PROBE` in Chromium; what the probe measured."""
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = _chromium(WINDOW, "--virtual-time-budget=5000", "--dump-dom", probed.resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stdout[-2000:]
    return json.loads(html.unescape(found.group(1)))


def significant_digits(text: str) -> int:
    """Significant digits a number is written with (``0.0003162`` 4, ``1.235e-05`` 4, ``128`` 3)."""
    mantissa = text.lower().lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa.rstrip("0")) if "." not in text.lower().split("e")[0] else len(mantissa)


def rounded(value: float, digits: int) -> float:
    """``value`` rounded to ``digits`` significant digits (by decades, not by a format string)."""
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def test_html_report_loads_in_chromium_with_every_figure(tmp_path):
    campaign, _ = _campaign_dir(tmp_path)
    files = write_report(campaign, top=5)
    assert files.html == campaign / "report" / "index.html"
    url = files.html.resolve().as_uri()
    page = files.html.read_text()
    assert "http://" not in page and "https://" not in page  # nothing fetched at view time
    dom = _chromium("--virtual-time-budget=5000", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dom.stdout).group(1)
    figures = int(re.search(r'data-figures="(\d+)"', body).group(1))
    loaded = int(re.search(r'data-figures-loaded="(\d+)"', body).group(1))
    assert figures == loaded == 6  # objective, parallel coordinates, gantt, cost model, learning curves, importance
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert console == []  # the page logs nothing: any console line is an error or a warning
    for heading in ("Trials", "Learning curves", "Hyperparameter importance", "Failures by reason"):
        assert f"<h2>{heading}</h2>" in dom.stdout
    assert "out of memory" in dom.stdout and "learning_rate" in dom.stdout
    assert dom.stdout.count("<tr>") >= 62  # 61 ranked trials + header rows
    shot = tmp_path / "report.png"
    taken = _chromium(f"--screenshot={shot}", "--window-size=1280,3000", url)
    assert taken.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # a page with figures, not a blank one


def test_the_laid_out_page_fits_its_boxes_with_rounded_numbers_per_atom_energies_and_a_true_legend(tmp_path):
    campaign, params = _campaign_dir(tmp_path)
    ensemble = tmp_path / "ensemble"
    ensemble.mkdir()
    (ensemble / "manifest.json").write_text(json.dumps({"members": [
        {"trial_id": 3, "weight": 1 / 3, "objective": 0.123456789012345},
        {"trial_id": 7, "weight": 2 / 3, "objective": 0.234567890123456}]}))
    files = write_report(campaign, top=5, ensemble_dir=ensemble)
    probe = _probe(files.html)
    # nothing overflows: the summary wraps inside its box, the page is no wider than the window
    assert probe["summary"]["scrollWidth"] <= probe["summary"]["clientWidth"]
    assert probe["pageWidth"] <= probe["viewport"]
    for element in probe["summaryBoxes"] + [probe["tableBox"]]:
        assert element["right"] <= probe["viewport"] and element["scrollWidth"] <= element["clientWidth"] + 1
    # the trials table: each head's validation MAE, energy per atom (every validation cell has 8 atoms)
    header = probe["header"]
    assert header[-5:] == ["energy MAE (meV/atom)", "forces MAE (eV/Å)", "slots", "epochs", "wall_s"]
    col = {name: i for i, name in enumerate(header)}
    assert len(probe["rows"]) == 61  # 60 completed and the stopped one (the failed one has no objective)
    for row in probe["rows"]:
        tid = int(row[col["trial"]])
        energy, forces, lr = row[col["energy MAE (meV/atom)"]], row[col["forces MAE (eV/Å)"]], row[col["learning_rate"]]
        assert float(energy) == rounded(1000 * energy_mae(tid) / 8, 4) and significant_digits(energy) <= 4
        assert float(forces) == rounded(forces_mae(tid), 4) and significant_digits(forces) <= 4
        assert float(lr) == rounded(params[tid][LR], 4) and significant_digits(lr) <= 4
        assert significant_digits(row[col["objective"]]) <= 6
    assert "divided by its 8 atoms" in probe["maeNote"]
    # the baselines under it, in the same units: the composition-linear energy (one reference energy,
    # Cu's, fitted on the four 8-atom training cells: the mean of their energies per atom) and zero forces
    reference = sum(-3.5 + 0.01 * k / 8 for k in range(4)) / 4
    per_atom = sum(abs(8 * reference - (-28.0 + 0.01 * (10 + k))) / 8 for k in range(3)) / 3
    energy_row, forces_row = probe["baselines"]
    assert energy_row[:2] == ["energy", "meV/atom"] and float(energy_row[2]) == rounded(1000 * per_atom, 4)
    assert float(energy_row[3]) == rounded(1000 * min(energy_mae(t) for t in range(60)) / 8, 4)
    assert energy_row[5].startswith("composition-linear (1 reference")
    assert forces_row[:3] == ["forces", "eV/Å", "0"] and forces_row[5] == "zero forces"
    # the Gantt chart at its own size (its 8 pt ids 11 px tall), and a legend of what it draws
    assert probe["gantt"]["shown"] == probe["gantt"]["natural"] > 0
    drawn = {"completed", "stopped", "failed"}  # the statuses of the trials written above
    assert probe["legend"] == [str(s) for s in ALL_STATUSES if str(s) in drawn]
    assert not any("resume" in entry for entry in probe["legend"])
    # the ensemble's weights and objectives to significant digits
    assert probe["ensemble"] == [["3", "0.3333", "0.123457"], ["7", "0.6667", "0.234568"]]


def test_a_small_resumed_campaign_states_the_importance_minimum_and_shows_the_resume(tmp_path):
    files = write_report(_small_resumed_campaign(tmp_path), top=5)
    probe = _probe(files.html)
    assert probe["importanceNote"].startswith(
        f"Too few completed trials for an importance estimate: it needs at least {MIN_TRIALS} completed trials "
        "(completed, or timed out with an objective) and this campaign has 6.")
    assert probe["legend"] == ["completed", "timeout", "stopped", RESUME_LABEL]
    # the validation cells have 4 and 8 atoms: the energy MAE stays per structure, and says so
    assert "energy MAE (eV per structure)" in probe["header"]
    col = probe["header"].index("energy MAE (eV per structure)")
    trial = probe["header"].index("trial")
    for row in probe["rows"]:
        assert float(row[col]) == rounded(energy_mae(int(row[trial])), 4)
    assert "from 4 to 8 atoms" in probe["maeNote"]
    assert probe["summary"]["scrollWidth"] <= probe["summary"]["clientWidth"]
    assert probe["pageWidth"] <= probe["viewport"]
