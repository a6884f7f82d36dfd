"""The HTML report in a real headless browser (Debian's Chromium): the page loads without console
errors, every figure decodes, the tables are there, and a screenshot is taken. Skipped (with the
reason) where no Chromium is installed; ``.ci/run`` installs it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_optuna_study import synthetic_campaign, write_journal

from hpo.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")


def _campaign_dir(root: Path) -> Path:
    """60 completed trials, one failed, one with a learning curve that was stopped."""
    state = synthetic_campaign(60, seed=3)
    end = max(r.last_attempt.end for r in state.trials.values())
    with write_journal(root, state) as journal:
        params = state.trials[0].params
        for tid, status in ((60, "failed"), (61, "stopped")):
            journal.append({"event": "trial_suggested", "time": end, "trial_id": tid, "params": params, "attempt": 0})
            journal.append({"event": "trial_started", "time": end, "trial_id": tid, "attempt": 0, "slots": [0],
                            "hosts": ["n0"], "size": 1})
            if status == "stopped":
                for epoch, value in ((1, 2.0), (2, 1.5)):
                    journal.append({"event": "trial_progress", "time": end + epoch, "trial_id": tid,
                                    "attempt": 0, "epoch": epoch, "objective": value})
                journal.append({"event": "trial_finished", "time": end + 3, "trial_id": tid, "attempt": 0,
                                "result": {"status": "stopped", "objective": 1.5, "epochs": 2, "wall_time_s": 3.0,
                                           "heads": {}, "failure_reason": "asha: rung 0"}})
            else:
                journal.append({"event": "trial_failed", "time": end + 1, "trial_id": tid, "attempt": 0,
                                "reason": "out of memory", "log_tail": "Killed",
                                "result": {"status": "failed", "objective": None}})
            end += 4
    return root


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", *args], capture_output=True, text=True, timeout=120)


def test_html_report_loads_in_chromium_with_every_figure(tmp_path):
    files = write_report(_campaign_dir(tmp_path), top=5)
    assert files.html == tmp_path / "report" / "index.html"
    url = files.html.resolve().as_uri()
    page = files.html.read_text()
    assert "http://" not in page and "https://" not in page  # nothing fetched at view time
    dom = _chromium("--virtual-time-budget=5000", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dom.stdout).group(1)
    figures = int(re.search(r'data-figures="(\d+)"', body).group(1))
    loaded = int(re.search(r'data-figures-loaded="(\d+)"', body).group(1))
    assert figures == loaded == 5  # objective, parallel coordinates, gantt, learning curves, importance
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
