"""Several trials per slot under real mpiexec (``resources.gpu_sharing``, :mod:`scheduler.sharing`):
one agent runs, watches and reports several trial processes side by side. On the CPU here the
slot's trials are time-sliced on its core; the same path runs them on one GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaign_testkit import events, most_at_once, of, results_rows, run_hpo, write_campaign

pytestmark = pytest.mark.mpi


def test_one_agent_runs_up_to_k_trials_at_once_and_forwards_each_ones_epochs(tmp_path: Path) -> None:
    (tmp_path / "curve.json").write_text(json.dumps({"aggregate": {"1": 1.0, "2": 1.6, "3": 2.0},
                                                     "source": "test"}))
    campaign = write_campaign(tmp_path, max_trials=6, mode="epochs", prefetch_below_s=0.0,
                              resources={"gpu_sharing": 3, "colocation_curve": "curve.json"})
    base = json.loads((tmp_path / "base.json").read_text())
    base["Fault"].update(epochs=3, epoch_s=0.5)
    (tmp_path / "base.json").write_text(json.dumps(base))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=2)  # rank 0 schedules; one agent, one slot
    assert proc.returncode == 0, proc.stderr
    assert "gpu_sharing fixed: up to 3 trials per CPU slot" in proc.stderr
    evs = events(out)
    assert {tuple(e["slots"]) for e in of(evs, "trial_started")} == {(0,)}
    ends = {e["trial_id"]: e for e in of(evs, "trial_finished")}
    assert sorted(ends) == list(range(6))
    assert all(e["result"]["status"] == "completed" for e in ends.values())
    assert most_at_once([(e["started_at"], e["ended_at"]) for e in ends.values()]) == 3
    for trial_id in ends:  # each process's learning curve reached rank 0 while others ran beside it
        epochs = [e["epoch"] for e in of(evs, "trial_progress") if e["trial_id"] == trial_id]
        assert epochs == [1, 2, 3], (trial_id, epochs)
    assert len(results_rows(out)) == 6


def test_sharing_off_keeps_one_trial_per_slot(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, max_trials=3, sleep_s=0.3, prefetch_below_s=0.0)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=2)
    assert proc.returncode == 0, proc.stderr
    ends = of(events(out), "trial_finished")
    assert len(ends) == 3 and most_at_once([(e["started_at"], e["ended_at"]) for e in ends]) == 1
    assert "gpu_sharing" not in proc.stderr


def test_a_curve_that_does_not_cover_k_is_refused_before_any_trial(tmp_path: Path) -> None:
    (tmp_path / "curve.json").write_text(json.dumps({"aggregate": {"1": 1.0, "2": 1.6}}))
    campaign = write_campaign(tmp_path, max_trials=2, resources={"gpu_sharing": 4, "colocation_curve": "curve.json"})
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=2)
    assert proc.returncode != 0
    assert f"{campaign}: resources.gpu_sharing: the co-location curve was measured for k <= 2, not k = 4" in proc.stderr
    assert not (out / "journal.jsonl").exists() or of(events(out), "trial_started") == []
