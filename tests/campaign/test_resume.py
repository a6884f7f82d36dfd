"""kill -9 of the whole job in the middle of a campaign, then --resume: nothing lost, nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from campaign_testkit import (
    REPO,
    fault_objective,
    hpo_argv,
    of,
    replay_asha,
    results_rows,
    run_hpo,
    tiny_alloy_dataset,
    tiny_gin_config,
    trial_processes_alive,
    write_asha_campaign,
    write_campaign,
)

from hpo.journal import read_journal
from hpo.state import CampaignState
from hydragnn_ensemble.result import TrialResult

pytestmark = pytest.mark.mpi

TORN = b'{"event":"trial_finished","time":1.0,"trial_id":3,"att'


def _wait_for_mid_campaign(journal: Path, proc: subprocess.Popen, timeout: float = 90.0) -> CampaignState:
    """Poll the journal until some trials finished and some are running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the campaign ended before it could be killed"
        if journal.exists():
            state = CampaignState.replay(read_journal(journal).events)
            if state.num_finished >= 3 and state.counts["running"] >= 2:
                return state
        time.sleep(0.05)
    raise AssertionError("the campaign never reached 3 finished + 2 running trials")


def test_kill_9_then_resume(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, max_trials=10, sleep_s=1.0)
    out = tmp_path / "out"
    job = subprocess.Popen(hpo_argv(campaign, out, 4), cwd=REPO, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_mid_campaign(out / "journal.jsonl", job)
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the whole job: mpiexec, its proxy and every rank
        job.wait()
    before = CampaignState.replay(read_journal(out / "journal.jsonl").events)
    finished_before = {r.trial_id: r.objective for r in before.finished}
    cut_short = [r.trial_id for r in before.running_at_crash]
    assert len(finished_before) >= 3 and len(cut_short) >= 2
    # the trial processes died with their agents (PR_SET_PDEATHSIG): no orphan can race the re-run
    deadline = time.monotonic() + 10
    while trial_processes_alive(str(out)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert trial_processes_alive(str(out)) == []
    assert (out / "lock").exists()  # left behind by the killed rank 0: stale, taken over below
    with open(out / "journal.jsonl", "ab") as fh:  # a crash in the middle of an append
        fh.write(TORN)

    proc = run_hpo(campaign, out, 4, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "removed a stale lock of pid" in proc.stderr
    assert "dropped a torn last line" in proc.stderr
    assert (f"resuming: {len(finished_before)} trials finished before, {len(cut_short)} cut short by "
            "the stop are re-run") in proc.stderr
    contents = read_journal(out / "journal.jsonl")
    assert contents.torn_line is None and TORN not in (out / "journal.jsonl").read_bytes()
    evs = contents.events
    runs = of(evs, "campaign_started")
    assert [r["resume"] for r in runs] == [False, True]
    after = CampaignState.replay(evs)
    # every trial finished exactly once, max_trials respected
    terminal = Counter(e["trial_id"] for e in evs if e["event"] in ("trial_finished", "trial_failed"))
    assert sorted(terminal) == list(range(10)) and set(terminal.values()) == {1}
    assert after.num_finished == 10 and after.running_at_crash == []
    # finished trials kept as they were (not re-run)
    started = Counter((e["trial_id"], e["attempt"]) for e in of(evs, "trial_started"))
    for tid, objective in finished_before.items():
        assert started[(tid, 0)] == 1 and (tid, 1) not in started
        assert after.trials[tid].objective == objective
    # the trials cut short were re-run exactly once, as attempt 1, with the same parameters
    for tid in cut_short:
        assert started[(tid, 0)] == 1 and started[(tid, 1)] == 1 and (tid, 2) not in started
        record = after.trials[tid]
        assert record.params == before.trials[tid].params
        assert record.attempts[0].status == "interrupted" and record.last_attempt.status == "completed"
        config = json.loads((out / "trials" / str(tid) / "config.json").read_text())
        assert record.objective == pytest.approx(fault_objective(config))
    # everything completed with the fault trainer's objective; results.csv has one row per trial
    for record in after.finished:
        config = json.loads((out / "trials" / str(record.trial_id) / "config.json").read_text())
        assert record.status == "completed" and record.objective == pytest.approx(fault_objective(config))
    rows = results_rows(out)
    assert sorted(int(r["job_id"]) for r in rows) == list(range(10))
    assert {r["job_id"]: r["m:attempts"] for r in rows if int(r["job_id"]) in cut_short} == {
        str(t): "2" for t in cut_short}
    assert not (out / "lock").exists()


def test_resume_refuses_a_changed_campaign(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, max_trials=2, sleep_s=0.0)
    out = tmp_path / "out"
    assert run_hpo(campaign, out, 3).returncode == 0
    # more trials: allowed, continues with the new budget (ids 2 and 3)
    write_campaign(tmp_path, max_trials=4, sleep_s=0.0)
    proc = run_hpo(campaign, out, 3, "--resume")
    assert proc.returncode == 0, proc.stderr
    evs = read_journal(out / "journal.jsonl").events
    assert sorted(e["trial_id"] for e in of(evs, "trial_finished")) == [0, 1, 2, 3]
    # another search space: refused, naming the key
    write_campaign(tmp_path, max_trials=4, sleep_s=0.0, seed=99)
    proc = run_hpo(campaign, out, 3, "--resume")
    assert proc.returncode == 2
    assert "differs from its frozen copy" in proc.stderr and "seed" in proc.stderr


def test_max_time_counts_campaign_time_over_all_runs(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, max_trials=200, max_time_s=2.0, sleep_s=0.3)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, 3)
    assert proc.returncode == 0, proc.stderr
    evs = read_journal(out / "journal.jsonl").events
    assert evs[-1]["reason"] == "max_time_s (2 s) reached"
    first = CampaignState.replay(evs)
    assert 2 <= first.num_finished < 200 and first.running_at_crash == []
    used = sum(end - start for start, end, _ in first.segments)
    assert used >= 2.0
    # the budget is spent: a resume starts nothing new and ends at once for the same reason
    proc = run_hpo(campaign, out, 3, "--resume")
    assert proc.returncode == 0, proc.stderr
    evs = read_journal(out / "journal.jsonl").events
    assert evs[-1]["reason"] == "max_time_s (2 s) reached"
    second = CampaignState.replay(evs)
    assert second.num_finished == first.num_finished
    assert len(of(evs, "trial_started")) == sum(len(r.attempts) for r in first.trials.values())


def test_kill_9_while_trials_are_being_stopped_loses_nothing(tmp_path: Path) -> None:
    """Early discarding across a crash: the journal's learning curves rebuild ASHA on --resume, the
    trials cut short are re-run and judged afresh, and at the end every stop is the one a fresh
    ASHA makes from the whole journal."""
    campaign = write_asha_campaign(tmp_path, max_trials=14, epoch_s=0.15)
    out = tmp_path / "out"
    job = subprocess.Popen(hpo_argv(campaign, out, 4), cwd=REPO, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        before = _wait_for_mid_campaign(out / "journal.jsonl", job)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    before = CampaignState.replay(read_journal(out / "journal.jsonl").events)
    assert before.progress and before.running_at_crash
    proc = run_hpo(campaign, out, 4, "--resume")
    assert proc.returncode == 0, proc.stderr
    evs = read_journal(out / "journal.jsonl").events
    after = CampaignState.replay(evs)
    terminal = Counter(e["trial_id"] for e in evs if e["event"] in ("trial_finished", "trial_failed"))
    assert sorted(terminal) == list(range(14)) and set(terminal.values()) == {1}
    stopped = {r.trial_id for r in after.finished if r.status == "stopped"}
    assert stopped and all(r.status in ("stopped", "completed") for r in after.finished)
    assert stopped == {t for t, epoch in replay_asha(after.progress).items() if epoch < 9}
    for record in after.finished:  # a re-run's curve starts again at epoch 1
        assert [e for e, _ in record.last_attempt.curve] == list(range(1, record.last_attempt.result.epochs + 1))


def _descendants(pid: int) -> set[int]:
    """The processes below ``pid`` (a forked trial's command line is its fork server's: found by
    parentage, not by name)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for child, p in parents.items():
            if p == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found


def test_kill_9_then_resume_continues_the_real_trainer_after_its_last_epoch(tmp_path: Path) -> None:
    """The built-in trainer writes its training state after every epoch: after a kill -9 of the whole
    job, --resume re-runs the trials that were running, each after its last finished epoch (never an
    epoch the journal has twice), their curves go on counting, and nothing is lost or twice."""
    tiny_alloy_dataset(tmp_path / "alloy.bp")
    epochs = 50
    base = tiny_gin_config(epochs)
    space = {"NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 4, "high": 12}}
    campaign = write_campaign(tmp_path, max_trials=2, trial_time_limit_s=300, search_space=space,
                              dataset="alloy.bp", trial_program="hydragnn_ensemble")
    (tmp_path / "base.json").write_text(json.dumps(base))  # write_campaign wrote the fault config
    out = tmp_path / "out"
    job = subprocess.Popen(hpo_argv(campaign, out, 3), cwd=REPO, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            assert job.poll() is None, "the campaign ended before it could be killed"
            state = CampaignState.replay(read_journal(out / "journal.jsonl").events) \
                if (out / "journal.jsonl").exists() else CampaignState()
            if any(r.status == "running" and len(r.last_attempt.curve) >= 3 for r in state.trials.values()):
                break
            time.sleep(0.05)
        tree = _descendants(job.pid)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    while any(Path(f"/proc/{p}").exists() and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
              for p in tree if Path(f"/proc/{p}/stat").exists()):
        time.sleep(0.05)  # the trials die with their agents a moment after the job
    before = CampaignState.replay(read_journal(out / "journal.jsonl").events)
    cut = {r.trial_id: r.last_attempt.curve[-1][0] for r in before.running_at_crash if r.last_attempt.curve}
    assert cut and max(cut.values()) >= 3
    assert all((out / "trials" / str(t) / "training_state.pt").is_file() for t in cut)

    proc = run_hpo(campaign, out, 3, "--resume")
    assert proc.returncode == 0, proc.stderr
    evs = read_journal(out / "journal.jsonl").events
    after = CampaignState.replay(evs)
    terminal = Counter(e["trial_id"] for e in evs if e["event"] in ("trial_finished", "trial_failed"))
    assert sorted(terminal) == [0, 1] and set(terminal.values()) == {1}
    rows = {int(r["job_id"]): r for r in results_rows(out)}
    for tid, last_reported in cut.items():
        record, trial = after.trials[tid], out / "trials" / str(tid)
        result = TrialResult.read(trial / "result.json")
        assert record.status == result.status == "completed" and result.epochs == epochs
        # the re-run resumed after the state's epoch, at or after the last one the journal had
        assert result.resumed_from >= last_reported and len(record.attempts) == 2
        assert record.attempts[1].curve[0][0] == result.resumed_from + 1
        assert f"resumed from training_state.pt after {result.resumed_from} epoch(s)" in (trial / "train.log").read_text()
        curve = [e for e, _ in record.curve]  # one curve over both attempts, no epoch twice
        assert curve == sorted(set(curve)) and curve[-1] == epochs and curve[:last_reported] == list(range(1, last_reported + 1))
        assert (trial / "train.attempt0.log").exists() and not (trial / "training_state.pt").exists()
        assert float(rows[tid]["loss"]) == result.objective and rows[tid]["m:attempts"] == "2"
