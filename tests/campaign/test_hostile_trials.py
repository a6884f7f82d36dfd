"""Nothing a trial program or a full disk does can stop a campaign for good: hostile progress files
are the trial's named problem, a trial that ignores a stop request is ended and the journal says
so, and the machine's faults stop the campaign with one line so that --resume re-runs what they cut
short, never counted as failures."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from campaign_testkit import events, fault_objective, of, run_hpo, write_asha_campaign, write_campaign

from hpo.state import CampaignState

pytestmark = pytest.mark.mpi


def _log(out: Path, trial: int) -> str:
    return (out / "trials" / str(trial) / "train.log").read_text(errors="replace")


def _temporary_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".tmp" in p.name)


def test_hostile_progress_files_are_the_trials_problem_and_the_campaign_finishes(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, modes={0: "huge_epoch", 1: "progress_fifo", 2: "long_line"},
                              max_trials=4, trial_time_limit_s=4, sleep_s=0.1, failure_threshold=1.0)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    state = CampaignState.replay(evs)
    assert [r.trial_id for r in state.finished] == [0, 1, 2, 3]
    # an epoch beyond any sane range is skipped and named in the trial's log; the next line counts
    assert state.trials[0].last_attempt.curve == [(1, pytest.approx(
        fault_objective(json.loads((out / "trials" / "0" / "config.json").read_text())) + 1.0))]
    assert "progress.jsonl: a line that is no epoch report was skipped" in _log(out, 0)
    assert state.trials[0].status == "completed"
    # a named pipe is never opened for reading (the agent would block): the time limit still applies
    assert state.trials[1].status == "timeout"
    assert "is a named pipe, not a regular file" in _log(out, 1)
    # a line over 1 MiB is skipped; the lines after it are read
    assert [e for e, _ in state.trials[2].last_attempt.curve] == [1, 2, 3]
    assert "a line longer than 1048576 bytes was skipped" in _log(out, 2)
    # resuming the finished campaign replays its journal without trouble
    again = run_hpo(campaign, out, 4, "--resume")
    assert again.returncode == 0, again.stderr


def test_a_trial_that_ignores_a_stop_request_is_ended_and_the_journal_says_so(tmp_path: Path) -> None:
    campaign = write_asha_campaign(tmp_path, max_trials=6, epoch_s=0.2)
    text = campaign.read_text() + "stop_grace_s: 0.3\n"
    campaign.write_text(text)
    base = json.loads((tmp_path / "base.json").read_text())
    base["Fault"].update(mode="ignore_stop", epochs=20)  # never done before the grace period ends
    (tmp_path / "base.json").write_text(json.dumps(base))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    asked = {e["trial_id"]: e["reason"] for e in of(evs, "trial_stop_requested")}
    assert asked, "ASHA stopped no trial: the test proves nothing"
    ends = {e["trial_id"]: e for e in of(evs, "trial_finished")}
    state = CampaignState.replay(evs)
    for tid, reason in asked.items():
        end = ends[tid]
        assert end["stop"] == "ignored", end
        result = end["result"]
        assert result["status"] == "stopped" and reason in result["failure_reason"]
        assert "did not stop after the campaign's stop request" in result["failure_reason"]
        best = min(v for _, v in state.trials[tid].last_attempt.curve if v is not None)
        assert result["objective"] == pytest.approx(best)  # the best epoch it reported
        assert state.trials[tid].last_attempt.stop_requested == reason
        assert state.trials[tid].last_attempt.stop_obeyed is False
    assert all("stop" not in e for tid, e in ends.items() if tid not in asked)
    assert state.num_failed == 0


def test_an_infrastructure_fault_stops_the_campaign_and_resume_reruns_the_trial(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, modes={2: "infra_once"}, max_trials=5, sleep_s=0.2,
                              min_trials_for_threshold=1, failure_threshold=0.1)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 75, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "infrastructure fault" in lines[0] and "--resume" in lines[0]
    assert "trial 2" in lines[0] and "Traceback" not in proc.stderr
    evs = events(out)
    assert evs[-1]["event"] == "campaign_finished" and evs[-1]["reason"].startswith("infrastructure fault")
    assert 2 in {e["trial_id"] for e in of(evs, "trial_started")}
    assert 2 not in {e["trial_id"] for e in of(evs, "trial_finished") + of(evs, "trial_failed")}
    again = run_hpo(campaign, out, 3, "--resume")
    assert again.returncode == 0, again.stderr
    state = CampaignState.replay(events(out))
    assert [r.trial_id for r in state.finished] == [0, 1, 2, 3, 4]
    assert state.trials[2].status == "completed" and state.num_failed == 0  # never counted as a failure
    assert _temporary_files(out) == []


def _mount_small_disk(path: Path, size: str) -> bool:
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True)
    return done.returncode == 0


def test_a_full_disk_stops_the_campaign_with_one_line_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    disk = Path("/tmp") / f"hydragnn-small-disk-{uuid.uuid4().hex[:8]}"
    if not _mount_small_disk(disk, "6m"):
        pytest.skip("a small tmpfs cannot be mounted here (needs root and CAP_SYS_ADMIN)")
    try:
        campaign = write_campaign(tmp_path, modes={1: "fill_disk_once"}, max_trials=4, sleep_s=0.2)
        out = disk / "out"
        proc = run_hpo(campaign, out, ranks=3)
        assert proc.returncode == 75, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and "ENOSPC" in lines[0] and "free space" in lines[0] and "--resume" in lines[0]
        assert "Traceback" not in proc.stderr
        (out / "trials" / "1" / "junk").unlink()  # the user frees space
        again = run_hpo(campaign, out, 3, "--resume")
        assert again.returncode == 0, again.stderr
        state = CampaignState.replay(events(out))
        assert [r.trial_id for r in state.finished] == [0, 1, 2, 3] and state.num_failed == 0
        assert _temporary_files(out) == []
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
        disk.rmdir()
