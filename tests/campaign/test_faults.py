"""Trials that raise, diverge, hang, segfault or get SIGKILLed: each a recorded failure, the campaign
goes on; retries (also on more slots after an OOM-like kill); the failure threshold stops a campaign."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaign_testkit import events, fault_objective, of, results_rows, run_hpo, write_campaign

from hpo.campaign import TRIAL_LAUNCHERS
from hpo.state import CampaignState

pytestmark = pytest.mark.mpi

MODES = {0: "raise", 1: "nan", 2: "hang", 3: "segfault", 4: "sigkill", 5: "crash_once"}
OOM = "killed (SIGKILL, possibly out of memory)"
RAISE = "exited with code 1 without writing result.json; last log line: RuntimeError: injected failure"


@pytest.mark.parametrize("launcher", TRIAL_LAUNCHERS)
def test_every_fault_is_a_recorded_trial_and_the_campaign_finishes(tmp_path: Path, launcher: str) -> None:
    campaign = write_campaign(
        tmp_path, modes=MODES, max_trials=8, trial_time_limit_s=3, retries=1, failure_threshold=1.0,
        resources={"slots_per_node": 1, "slots_per_trial": [1]}, sleep_s=0.1, trial_launcher=launcher)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=5)
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    assert evs[-1]["reason"] == "max_trials (8) finished"
    state = CampaignState.replay(evs)
    assert [r.trial_id for r in state.finished] == list(range(8))

    def attempts(tid: int) -> list[tuple[int, str, int]]:
        rec = state.trials[tid]
        return [(a.attempt, a.status, a.size) for _, a in sorted(rec.attempts.items())]

    def final(tid: int) -> tuple[str, str | None]:
        last = state.trials[tid].last_attempt
        return last.status, last.reason

    # raise: failed with the exception in reason and log tail, retried once (retries: 1)
    assert attempts(0) == [(0, "failed", 1), (1, "failed", 1)]
    assert final(0) == ("failed", RAISE)
    assert "RuntimeError: injected failure" in state.trials[0].last_attempt.log_tail
    # NaN: diverged, never retried
    assert attempts(1) == [(0, "diverged", 1)] and final(1) == ("diverged", "validation loss is NaN at epoch 1")
    # hang: killed at the time limit
    assert attempts(2) == [(0, "timeout", 1)]
    assert final(2) == ("timeout", "exceeded the trial time limit of 3 s; killed")
    assert "mode hang" in state.trials[2].last_attempt.result.log_tail
    # segfault: failed with the signal, retried once
    assert attempts(3) == [(0, "failed", 1), (1, "failed", 1)] and final(3) == ("failed", "segmentation fault (SIGSEGV)")
    # SIGKILL (what the kernel's OOM killer does), no larger size allowed: retried once (retries: 1)
    assert attempts(4) == [(0, "failed", 1), (1, "failed", 1)] and final(4) == ("failed", OOM)
    # a transient crash: the retry completes
    assert attempts(5) == [(0, "failed", 1), (1, "completed", 1)]
    for tid in (5, 6, 7):
        config = json.loads((out / "trials" / str(tid) / "config.json").read_text())
        assert state.trials[tid].objective == pytest.approx(fault_objective(config))
    # every synthesised result.json on disk says the same as the journal
    for tid in (0, 2, 3, 4):
        on_disk = json.loads((out / "trials" / str(tid) / "result.json").read_text())
        assert (on_disk["status"], on_disk["failure_reason"]) == final(tid)
    # the first attempt's files were kept aside
    assert (out / "trials" / "0" / "train.attempt0.log").exists()
    # slots were returned: no slot was held by two trials at once, all starts used real slots
    spans = []
    for rec in state.trials.values():
        for a in rec.attempts.values():
            spans.extend((s, a.start, a.end) for s in a.slots)
    for i, (s1, b1, e1) in enumerate(spans):
        assert 0 <= s1 < 4
        for s2, b2, e2 in spans[i + 1:]:
            if s1 == s2:
                assert e1 <= b2 or e2 <= b1
    statuses = {r["job_id"]: (r["job_status"], r["m:status"]) for r in results_rows(out)}
    assert statuses["0"] == ("FAILED", "failed") and statuses["2"] == ("DONE", "timeout")
    # the diverged and the hung trial have no objective: failures, counted under their own status
    assert ("trials finished: 8 (3 completed, 1 diverged (1 without an objective), 1 timeout (1 without an "
            "objective), 3 failed)") in proc.stdout
    assert "failures by reason (5 trials without an objective: diverged 1, timeout 1, failed 3;" in proc.stdout
    assert "       1 x timeout: exceeded the trial time limit of 3 s; killed\n" in proc.stdout


def test_oom_kill_is_retried_on_more_slots_with_a_rendezvous(tmp_path: Path) -> None:
    # trial 0 dies of SIGKILL on 1 slot and completes on 2 (its two processes all-reduce through
    # torch.distributed); trial 1 dies of SIGKILL at every size: one retry on 2 slots, then it fails;
    # trial 2 on 2 slots: rank 1 raises, rank 0 would wait in the rendezvous for ever: it is killed
    campaign = write_campaign(
        tmp_path, modes={0: "sigkill_once", 1: "sigkill", 2: "sigkill_then_rank1_raises"},
        max_trials=3, trial_time_limit_s=120,
        failure_threshold=1.0, resources={"slots_per_node": 1, "slots_per_trial": [1, 2]}, sleep_s=0.0)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 0, proc.stderr
    state = CampaignState.replay(events(out))
    first, second = state.trials[0], state.trials[1]
    assert [(a.status, a.size, a.reason) for a in first.attempts.values()] == [
        ("failed", 1, OOM), ("completed", 2, None)]
    assert [(a.status, a.size) for a in second.attempts.values()] == [("failed", 1), ("failed", 2)]
    assert second.last_attempt.reason == f"rank 0: {OOM}"
    assert sorted(first.attempts[1].slots) == [0, 1]
    third = state.trials[2]
    assert [(a.status, a.size) for a in third.attempts.values()] == [("failed", 1), ("failed", 2)]
    assert third.last_attempt.reason == ("rank 1: exited with code 1 without writing result.json; "
                                         "last log line: RuntimeError: injected failure on rank 1")
    # rank 0 was stopped by the runtime long before the 120 s limit
    assert third.last_attempt.end - third.last_attempt.start < 60
    trial = out / "trials" / "0"
    assert "all-reduce of ranks = 1" in (trial / "train.log").read_text()
    assert "all-reduce of ranks = 1" in (trial / "train.rank1.log").read_text()
    result = json.loads((trial / "result.json").read_text())
    assert result["slots"] == 2 and result["status"] == "completed"
    assert result["objective"] == pytest.approx(fault_objective(json.loads((trial / "config.json").read_text())))


def test_failure_threshold_stops_the_campaign(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, mode="raise", max_trials=30, failure_threshold=0.5, sleep_s=0.0)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 1
    assert ("stopping the campaign: 8 of 8 finished trials failed (more than failure_threshold=0.5); "
            "this usually means a configuration error") in proc.stderr
    assert f"Most common failure (8x): {RAISE}" in proc.stderr
    assert "Example log tail:\nfault_trainer: trial" in proc.stderr
    assert 'raise RuntimeError("injected failure")' in proc.stderr
    evs = events(out)
    assert evs[-1]["reason"] == "failure threshold exceeded"
    finished = of(evs, "trial_failed")
    # the ones running at the stop finish, and a trial sent ahead (prefetch) that began before the
    # stop reached its agent; nothing else starts
    assert 8 <= len(finished) <= 8 + 2 * 3
    assert len(of(evs, "trial_started")) == len(finished)
    assert "campaign finished: failure threshold exceeded" in proc.stdout


def test_a_node_that_keeps_failing_is_drained_and_stays_out_on_resume(tmp_path: Path) -> None:
    # 3 agents, one node each; the trials on rank 2's node die of a device error
    campaign = write_campaign(tmp_path, mode="bad_node", max_trials=12, sleep_s=0.3, retries=2,
                              drain_after_node_failures=2)
    base = json.loads((tmp_path / "base.json").read_text())
    base["Fault"]["bad_rank"] = 2
    (tmp_path / "base.json").write_text(json.dumps(base))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 0, proc.stderr[-3000:]
    evs = events(out)
    drained = of(evs, "node_drained")
    assert len(drained) == 1, drained
    bad = drained[0]["node"]
    assert drained[0]["failures"] == 2 and "CUDA error: an illegal memory access" in drained[0]["reason"]
    assert f"node {drained[0]['hostname']} (node {bad}) drained after 2 node-level failures" in proc.stderr
    at = evs.index(drained[0])
    starts = of(evs, "trial_started")
    on_bad = [e for e in starts if bad in e["slots"]]  # slots_per_node 1: slot id == node id
    assert len(on_bad) >= 2 and all(evs.index(e) < at for e in on_bad)
    failed = of(evs, "trial_failed")
    assert len(failed) == 2 and all("CUDA error" in e["reason"] for e in failed)
    assert all(e["will_retry"] for e in failed)  # both retried elsewhere: the campaign lost nothing
    rows = results_rows(out)
    assert len(rows) == 12 and all(r["m:status"] == "completed" for r in rows)
    assert [d.node for d in CampaignState.replay(evs).drained] == [bad]

    # a resume in the same allocation (more trials) keeps the node out
    campaign.write_text(campaign.read_text().replace("max_trials: 12", "max_trials: 16"))
    proc = run_hpo(campaign, out, 4, "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"nodes drained by an earlier run stay out of service: {drained[0]['hostname']} (node {bad})" in proc.stderr
    evs2 = events(out)
    later = evs2[len(evs):]
    assert not [e for e in of(later, "trial_started") if bad in e["slots"]]
    assert len(of(later, "trial_finished")) == 4
