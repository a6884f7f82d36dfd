"""Nothing in one trial's output can raise in rank 0: NaN/Infinity objectives, result.json of the
wrong shape or a directory in its place, a log that never stops; each is that trial's outcome, the
campaign finishes, and --resume finishes too. Campaign directories never overlap their inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from campaign_testkit import events, run_hpo, write_campaign

from hpo.state import CampaignState

pytestmark = pytest.mark.mpi

MODES = {0: "nan_objective", 1: "inf_metric", 2: "bad_result", 3: "result_is_dir", 4: "flood"}


def test_odd_trial_output_is_that_trials_outcome_and_resume_finishes(tmp_path: Path) -> None:
    campaign = write_campaign(
        tmp_path, modes=MODES, max_trials=6, trial_time_limit_s=20, retries=0, failure_threshold=1.0,
        resources={"slots_per_node": 1, "slots_per_trial": [1]}, sleep_s=0.0, trial_log_max_mb=0.25)
    base = json.loads((tmp_path / "base.json").read_text())
    base["Fault"]["flood_mb"] = 2.0
    (tmp_path / "base.json").write_text(json.dumps(base))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 0, proc.stderr
    state = CampaignState.replay(events(out))
    assert len(state.finished) == 6

    def outcome(tid: int) -> tuple[str, str | None, float | None]:
        last = state.trials[tid].last_attempt
        return last.status, last.reason, state.trials[tid].objective

    assert outcome(0) == ("diverged", "not finite: objective", None)
    assert outcome(1) == ("diverged", "not finite: heads.energy.val_mae", None)
    status, reason, objective = outcome(2)
    assert status == "failed" and objective is None
    assert reason.endswith("trials/2/result.json: not a valid result.json ('heads' must be dict or null, got list)")
    status, reason, _ = outcome(3)
    assert status == "failed" and "result.json" in reason and "could not write" in reason
    assert outcome(4)[0] == "completed" and outcome(5)[0] == "completed"
    # the flood was cut to its tail, with a line saying so
    log = out / "trials" / "4" / "train.log"
    assert log.stat().st_size < 1024 * 1024
    text = log.read_text()
    assert "log cut by the campaign agent" in text and "trial_log_max_mb cap of 262144 bytes" in text
    # what is on disk says the same as the journal; no temporary file left anywhere
    assert json.loads((out / "trials" / "0" / "result.json").read_text())["objective"] is None
    assert sorted(p.name for p in out.rglob("*.tmp*")) == []
    # resume: nothing is re-run, nothing raises
    again = run_hpo(campaign, out, 4, "--resume")
    assert again.returncode == 0, again.stderr
    assert len(CampaignState.replay(events(out)).finished) == 6


def test_campaign_directory_never_overlaps_its_inputs_or_a_foreign_directory(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c", max_trials=1)
    inside = run_hpo(campaign, tmp_path / "c", ranks=2)  # the directory holding campaign.yaml
    assert inside.returncode == 2
    assert f"campaign directory {tmp_path / 'c'} contains the input {campaign}" in inside.stderr
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["base.json", "campaign.yaml", "data.bp"]
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    refused = run_hpo(campaign, foreign, ranks=2)
    assert refused.returncode == 2
    assert f"{foreign} is not empty (notes.txt) and holds no campaign" in refused.stderr
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_result_json_reading_is_strict(tmp_path: Path) -> None:
    from hydragnn_ensemble.result import MAX_RESULT_BYTES, TrialResult

    path = tmp_path / "result.json"
    for text, message in [
        ('{"status": "completed", "heads": []}', "'heads' must be dict or null, got list"),
        ('{"status": "completed", "heads": {"e": {"val_mae": "x"}}}', "heads.e.val_mae must be a number"),
        ('{"status": "done"}', "'status' must be one of"),
        ('{"objective": 1.0}', "'status' is missing"),
        ('[1, 2]', "must be a JSON object, got list"),
        ('{"status": "completed", "wall_time_s": Infinity}', "'wall_time_s' must be finite"),
        ('{"status": "completed", "extra": 1}', "unknown result.json keys: ['extra']"),
        ("[" * 100000, "not a valid result.json"),
    ]:
        path.write_text(text)
        with pytest.raises(ValueError, match=re.escape(message)):
            TrialResult.read(path)
    path.write_text(" " * (MAX_RESULT_BYTES + 1))
    with pytest.raises(ValueError, match=f"more than the {MAX_RESULT_BYTES} a result may have"):
        TrialResult.read(path)
    path.write_text(json.dumps({"status": "completed", "objective": float("nan"), "traceback": "t" * 50000}))
    result = TrialResult.read(path)
    assert (result.status, result.objective, result.failure_reason) == ("diverged", None, "not finite: objective")
    assert result.traceback == "t" * 20000
    # a value that cannot be written leaves neither a result.json nor a temporary file
    bad = TrialResult(status="completed", objective=float("nan"))
    with pytest.raises(ValueError, match="Out of range float values"):
        bad.write(tmp_path / "w.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_log_cap_keeps_the_tail_behind_a_note(tmp_path: Path) -> None:
    from scheduler.runtime.log_cap import cap_log

    log = tmp_path / "train.log"
    log.write_text("".join(f"line {i:06d}\n" for i in range(20000)))  # 240,000 bytes
    assert cap_log(log, 300_000) == 0
    dropped = cap_log(log, 100_000)
    lines = log.read_text().splitlines()
    assert lines[0].startswith("[") and f"the first {dropped} bytes were dropped" in lines[0]
    assert lines[-1] == "line 019999" and all(ln.startswith("line ") for ln in lines[1:])
    assert 11_000 <= log.stat().st_size <= 12_700  # 1/8 of the cap, from a line start, plus the note
    with open(log, "a") as fh:  # later appends land after the kept tail
        fh.write("after\n")
    assert log.read_text().splitlines()[-1] == "after"


def test_failures_group_by_message_without_trial_paths() -> None:
    from hpo.failures import failure_group, most_common_failure

    reasons = [f"ConfigError: /c/trials/{i}/config.json: hiden_dim: unknown key" for i in (3, 8, 11)]
    reasons.append("killed (SIGKILL, possibly out of memory)")
    assert failure_group(reasons[0]) == "ConfigError: config.json: hiden_dim: unknown key"
    assert most_common_failure(reasons) == ("ConfigError: config.json: hiden_dim: unknown key", 3)
    assert failure_group("RuntimeError in 'trials/12/train.log'") == "RuntimeError in 'train.log'"

