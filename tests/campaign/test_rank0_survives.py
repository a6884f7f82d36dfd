"""Rank 0 survives every trial program and every valid config (issue #42): each defect reproduced
first, then a campaign and a ``--resume`` finish."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from campaign_testkit import REPO, events, hpo_argv, of, run_hpo, write_asha_campaign, write_campaign

from hpo.campaign import TRIAL_LAUNCHERS
from hpo.state import CampaignState

pytestmark = pytest.mark.mpi


def _log(out: Path, trial: int) -> str:
    return (out / "trials" / str(trial) / "train.log").read_text(errors="replace")


def _set_fault(tmp: Path, **fault) -> None:
    base = json.loads((tmp / "base.json").read_text())
    base["Fault"].update(fault)
    (tmp / "base.json").write_text(json.dumps(base))


def test_early_stopping_with_num_epoch_left_to_the_schema_default(tmp_path: Path) -> None:
    """N1: a base config without NeuralNetwork.Training.num_epoch (valid: the schema says 100) under
    ASHA: rank 0 read the budget from a dict key and died at the first start, again on --resume."""
    campaign = write_asha_campaign(tmp_path, max_trials=6, epoch_s=0.1)
    base = json.loads((tmp_path / "base.json").read_text())
    del base["NeuralNetwork"]["Training"]["num_epoch"]
    (tmp_path / "base.json").write_text(json.dumps(base))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = CampaignState.replay(events(out))
    assert state.num_finished == 6 and state.counts["stopped"] >= 1  # ASHA decided at its rungs
    verdicts = json.loads((out / "trials" / "0" / "verdicts.json").read_text())
    assert verdicts["epochs"][:3] == [1, 3, 9]  # the rungs below the default budget of 100 epochs
    again = run_hpo(campaign, out, 3, "--resume")
    assert again.returncode == 0, again.stderr[-3000:]


def test_lying_epoch_times_are_refused_and_move_no_later_prediction(tmp_path: Path) -> None:
    """N2/N3: trial 0 claims epochs of 1.7e308 s (and 1e300 s trained), trial 1 epochs of 1e-59 s.
    The first is impossible by the agent's clock: refused with one line in its log; the second is
    clipped by the cost model. Every later prediction stays finite and within 20x of what the
    honest trials took (before: NaN and a dead rank 0, or 1e-59 s)."""
    campaign = write_campaign(tmp_path, max_trials=10, mode="epochs", failure_threshold=1.0,
                              modes={0: "lie", 1: "lie"})
    _set_fault(tmp_path, epochs=3, epoch_s=0.1,
               lies={"0": {"epoch_s": 1.7e308, "elapsed_s": 1e300}, "1": {"epoch_s": 1e-59, "train_s": 1e-59}})
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 0, proc.stderr[-3000:]
    evs = events(out)
    state = CampaignState.replay(evs)
    assert state.num_finished == 10 and state.num_failed == 0
    assert "epoch_s '1.7e+308' is not a time in seconds" in _log(out, 0)
    assert "elapsed_s '1e+300' is not a time in seconds" in _log(out, 0)
    walls = [e["result"]["wall_time_s"] for e in of(evs, "trial_finished") if e["trial_id"] > 1]
    typical = sorted(walls)[len(walls) // 2]
    later = [e for e in of(evs, "trial_started") if e["trial_id"] >= 4]
    assert later
    for start in later:
        predicted = start["predicted_slot_s"]
        assert math.isfinite(predicted) and typical / 20 < predicted < 20 * typical, (predicted, typical)
    again = run_hpo(campaign, out, 3, "--resume")
    assert again.returncode == 0, again.stderr[-3000:]


@pytest.mark.parametrize("then", ["fail", "hang"])
def test_a_rerun_copes_with_whatever_the_trial_left_in_its_run_directory(tmp_path: Path, then: str) -> None:
    """N4: trial 0 turns stop, go_on, verdicts.json, config.json and progress.jsonl into
    directories, result.json into a dangling link and a log into a pipe; its re-run (a retry, or
    kill -9 of the campaign then --resume) used to kill rank 0."""
    campaign = write_campaign(tmp_path, max_trials=4, sleep_s=0.2, retries=1, failure_threshold=1.0,
                              modes={0: "plant_once"})
    _set_fault(tmp_path, then=then)
    out = tmp_path / "out"
    if then == "fail":  # a retry
        proc = run_hpo(campaign, out, ranks=3)
    else:  # kill -9 while the trial hangs over what it planted, then --resume
        job = subprocess.Popen(hpo_argv(campaign, out, 3), cwd=REPO, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        marker = out / "trials" / "0.planted"
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            assert job.poll() is None, "the campaign ended before it could be killed"
            time.sleep(0.05)
        time.sleep(0.3)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        proc = run_hpo(campaign, out, 3, "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = CampaignState.replay(events(out))
    assert state.num_finished == 4 and state.trials[0].status == "completed"
    assert len(state.trials[0].attempts) == 2
    trial = out / "trials" / "0"
    assert (trial / "config.json").is_file() and json.loads((trial / "config.json").read_text())["Fault"]
    assert not (trial / "stop").exists() and not (trial / "go_on").exists()
    assert (trial / "result.json").is_file()
    if then == "fail":  # the first attempt's leftovers were moved aside under its name
        assert (trial / "progress.attempt0.jsonl").is_dir()  # (its result.json link was replaced by
        assert json.loads((trial / "result.attempt0.json").read_text())["status"] == "failed"  # rank 0's)


@pytest.mark.parametrize("launcher", TRIAL_LAUNCHERS)
def test_a_process_that_left_the_trials_group_ends_with_the_trial(tmp_path: Path, launcher: str) -> None:
    """N5: a trial's grandchild that called setsid() outlived the campaign."""
    campaign = write_campaign(tmp_path, max_trials=2, sleep_s=0.2, modes={0: "daemon"}, trial_launcher=launcher)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pid = int((out / "trials" / "0" / "daemon.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_retry_after_a_node_level_failure_goes_to_another_node(tmp_path: Path) -> None:
    """N7: the retry of a trial that died of a device error on one node starts on another."""
    campaign = write_campaign(tmp_path, mode="bad_node", max_trials=6, sleep_s=0.3, retries=1,
                              drain_after_node_failures=0, failure_threshold=1.0)
    _set_fault(tmp_path, bad_rank=1)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 0, proc.stderr[-3000:]
    evs = events(out)
    failed = [e for e in of(evs, "trial_failed") if e["will_retry"]]
    assert failed, "no trial failed on the bad node: the test proves nothing"
    starts = {(e["trial_id"], e["attempt"]): e["slots"] for e in of(evs, "trial_started")}
    for e in failed:
        first, retry = starts[(e["trial_id"], e["attempt"])], starts[(e["trial_id"], e["attempt"] + 1)]
        assert set(first) != set(retry), (first, retry)  # slots_per_node 1: a slot is a node


def test_a_campaign_whose_every_node_is_drained_ends_non_zero_saying_why(tmp_path: Path) -> None:
    """N8: every trial dies of a device error on every node; both nodes are drained and the
    campaign used to exit 0 with 0 trials finished."""
    campaign = write_campaign(tmp_path, mode="bad_node", max_trials=6, sleep_s=0.1, retries=3,
                              drain_after_node_failures=1, failure_threshold=1.0)
    _set_fault(tmp_path, bad_rank="all")
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 75, (proc.returncode, proc.stderr[-3000:])
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "no node left in service can run its trials" in lines[0]
    assert "2 drained after node-level failures" in lines[0]
    assert "Traceback" not in proc.stderr


def test_a_directory_where_results_csv_belongs_is_named_once_and_nothing_is_left(tmp_path: Path) -> None:
    """N12: results.csv a directory gave a traceback at the end and left results.csv.tmp."""
    campaign = write_campaign(tmp_path, max_trials=2, sleep_s=0.1)
    out = tmp_path / "out"
    assert run_hpo(campaign, out, ranks=2).returncode == 0
    (out / "results.csv").unlink()
    (out / "results.csv").mkdir()
    campaign.write_text(campaign.read_text().replace("max_trials: 2", "max_trials: 4"))
    proc = run_hpo(campaign, out, 2, "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("results.csv is not a regular file") == 1 and "Traceback" not in proc.stderr
    assert (out / "results.csv").is_dir() and not [p for p in out.iterdir() if ".tmp" in p.name]
    assert CampaignState.replay(events(out)).num_finished == 4
