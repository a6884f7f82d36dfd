"""Everything a trial writes is read bounded, typed and without blocking: named pipes, links,
over-long lines, integers beyond any range; writes leave no temporary file when the disk refuses."""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path

import pytest

from hydragnn_ensemble.result import EpochReport, HeadMetrics, TrialResult
from hydragnn_ensemble.untrusted_files import NotRegularFileError, read_bytes, write_atomic
from scheduler.runtime.faults import disk_full, infrastructure_cause
from scheduler.runtime.progress_tail import MAX_EPOCH, ProgressTail, parse_line
from scheduler.runtime.outcome import read_log_tail


def _in_time(fn, seconds: float = 5.0):
    """Run ``fn`` in a thread and fail (instead of hanging the suite) when it blocks."""
    out: dict = {}

    def call() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn} blocked"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_a_named_pipe_is_refused_at_once_everywhere(tmp_path: Path) -> None:
    pipe = tmp_path / "result.json"
    os.mkfifo(pipe)
    with pytest.raises(NotRegularFileError, match="named pipe"):
        _in_time(lambda: read_bytes(pipe, 100))
    with pytest.raises(ValueError, match="named pipe"):
        _in_time(lambda: TrialResult.read(pipe))
    assert _in_time(lambda: read_log_tail(pipe)) == ""
    tail = ProgressTail(pipe)
    assert _in_time(tail.read) == [] and tail.unreadable and "named pipe" in tail.problems[0]


def test_a_symbolic_link_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"status": "completed"}')
    link = tmp_path / "result.json"
    link.symlink_to(target)
    with pytest.raises(ValueError, match="symbolic link"):
        TrialResult.read(link)


def test_progress_lines_out_of_range_are_skipped_and_named(tmp_path: Path) -> None:
    assert parse_line(json.dumps({"epoch": 2**64, "objective": 1.0})) is None
    assert parse_line(json.dumps({"epoch": MAX_EPOCH + 1})) is None
    assert parse_line(json.dumps({"epoch": 0})) is None and parse_line(json.dumps({"epoch": True})) is None
    assert parse_line(json.dumps({"epoch": 1, "heads": {f"h{i}": {} for i in range(300)}})) is None
    assert parse_line(json.dumps({"epoch": 1, "heads": {"x" * 101: {}}})) is None
    assert parse_line("[" * 100_000) is None  # nesting deeper than the parser takes
    huge = parse_line(json.dumps({"epoch": 3, "objective": 10**400, "heads": {"e": {"val_mae": -10**400}}}))
    assert huge == EpochReport(3, None, {"e": HeadMetrics(val_mae=None, val_rmse=None)})
    path = tmp_path / "progress.jsonl"
    path.write_text(json.dumps({"epoch": 2**64}) + "\n" + json.dumps({"epoch": 1, "objective": 0.5}) + "\n")
    tail = ProgressTail(path)
    assert [r.epoch for r in tail.read()] == [1]
    assert tail.skipped == 1 and "no epoch report" in tail.problems[0]


def test_epoch_times_the_cost_model_cannot_use_are_dropped_and_named(tmp_path: Path) -> None:
    """A negative, non-finite or textual epoch time keeps the report (the stopper still sees the
    epoch) but not the time (the cost model does not learn from it), and the trial's log says so."""
    path = tmp_path / "progress.jsonl"
    lines = [{"epoch": 1, "objective": 0.5, "epoch_s": -3.0, "train_s": 1.0},
             {"epoch": 2, "objective": 0.4, "epoch_s": "1e999", "train_s": "fast"},
             {"epoch": 3, "objective": 0.3, "epoch_s": 2.5, "train_s": 2.0}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    tail = ProgressTail(path)
    got = [(r.epoch, r.objective, r.epoch_s, r.train_s) for r in tail.read()]
    assert got == [(1, 0.5, None, 1.0), (2, 0.4, None, None), (3, 0.3, 2.5, 2.0)]
    assert tail.skipped == 0 and len(tail.problems) == 3
    assert tail.problems[0] == "progress.jsonl: epoch 1: epoch_s '-3.0' is not a time in seconds (finite, >= 0): not learnt from"
    assert "epoch 2: train_s 'fast'" in tail.problems[2]
    # a time longer than the trial has run (what the agent's clock says) is impossible: dropped too
    path.write_text(json.dumps({"epoch": 1, "objective": 0.5, "epoch_s": 1.7e308, "elapsed_s": 9.0}) + "\n")
    tail = ProgressTail(path)
    assert [(r.epoch_s, r.elapsed_s) for r in tail.read(max_seconds=10.0)] == [(None, 9.0)]
    assert tail.problems == ["progress.jsonl: epoch 1: epoch_s '1.7e+308' is not a time in seconds (finite, >= 0, "
                             "at most the 10 s the trial has run): not learnt from"]


def test_a_line_over_a_mebibyte_is_skipped_and_the_curve_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    tail = ProgressTail(path)
    with open(path, "w") as fh:
        fh.write("x" * (3 << 19))  # 1.5 MiB, no newline yet
    assert tail.read() == [] and tail.read() == []  # the first MiB skipped; the rest waits for its newline
    with open(path, "a") as fh:
        fh.write("y\n" + "".join(json.dumps({"epoch": e, "objective": 1.0 / e}) + "\n" for e in (1, 2)))
    assert [r.epoch for r in tail.read()] == [1, 2]
    with open(path, "a") as fh:
        fh.write(json.dumps({"epoch": 3, "objective": 0.3}) + "\n")
    assert [r.epoch for r in tail.read()] == [3]
    assert tail.skipped == 1 and "longer than" in tail.problems[0]


def test_result_json_integers_beyond_the_journals_range_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    for key in ("epochs", "num_parameters", "best_epoch", "slots"):
        path.write_text(json.dumps({"status": "completed", "objective": 1.0, key: 2**70}))
        with pytest.raises(ValueError, match=f"'{key}' must be within"):
            TrialResult.read(path)
    path.write_text(json.dumps({"status": "completed", "objective": 10**400}))
    with pytest.raises(ValueError, match="'objective' must be within"):
        TrialResult.read(path)
    path.write_text(json.dumps({"status": "completed", "heads": {f"h{i}": {} for i in range(300)}}))
    with pytest.raises(ValueError, match="at most 256 heads"):
        TrialResult.read(path)


def test_a_stopped_result_with_a_non_finite_objective_says_so(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text('{"status": "stopped", "objective": NaN, "failure_reason": "asha: rung 1"}')
    result = TrialResult.read(path)
    assert result.status == "stopped" and result.objective is None
    assert result.failure_reason == "asha: rung 1; not finite (dropped): objective"


def test_writes_leave_no_temporary_file_when_they_fail(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    (tmp_path / f"config.json.tmp{os.getpid()}").mkdir()  # planted: cannot be removed as a file
    with pytest.raises(OSError):
        write_atomic(target, "{}")
    os.rmdir(tmp_path / f"config.json.tmp{os.getpid()}")
    os.mkfifo(tmp_path / f"config.json.tmp{os.getpid()}")  # planted: never opened, replaced
    _in_time(lambda: write_atomic(target, '{"a": 1}'))
    assert json.loads(target.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_what_counts_as_the_machines_fault() -> None:
    full = OSError(errno.ENOSPC, "No space left on device", "/c/journal.jsonl")
    assert infrastructure_cause(full) == "no space left on the device [ENOSPC] (/c/journal.jsonl)"
    try:
        try:
            raise full
        except OSError as exc:
            raise RuntimeError("writing the journal failed") from exc
    except RuntimeError as wrapped:
        assert infrastructure_cause(wrapped).startswith("no space left")
    assert infrastructure_cause(OSError(errno.ENOTDIR, "Not a directory")) is None
    assert infrastructure_cause(ValueError("x")) is None
    assert disk_full(Path(__file__).parent) is None  # the test machine has room
