"""Journal append/read, torn and corrupt lines, replay exactly-once, results.csv."""

from __future__ import annotations

import csv
import json

import pytest
from hpo_testdata import SPACE, params, result, sample_events

from hpo.journal import (
    Journal,
    JournalCorruptError,
    JournalEventError,
    TornJournalLineWarning,
    read_events,
    read_journal,
)
from hpo.results_table import write_results_csv
from hpo.state import CampaignState


def write_journal(path, events):
    with Journal(path) as journal:
        for event in events:
            journal.append(event)


def test_append_and_read_round_trip(tmp_path):
    path = tmp_path / "journal.jsonl"
    events = sample_events()
    write_journal(path, events)
    lines = path.read_text().splitlines()
    assert len(lines) == len(events)
    assert json.loads(lines[0])["event"] == "campaign_started"
    assert read_events(path) == events
    with Journal(path) as journal:  # "time" is filled in when missing
        written = journal.append({"event": "campaign_finished", "reason": "max_trials"})
    assert isinstance(written["time"], float)
    assert read_events(path)[-1] == written


def test_append_rejects_bad_events(tmp_path):
    with Journal(tmp_path / "j.jsonl") as journal:
        with pytest.raises(JournalEventError, match="unknown journal event 'trial_done'"):
            journal.append({"event": "trial_done", "trial_id": 1})
        with pytest.raises(JournalEventError, match=r"'trial_started' is missing fields \['hosts', 'size'\]"):
            journal.append({"event": "trial_started", "trial_id": 1, "attempt": 0, "slots": [0]})
        with pytest.raises(JournalEventError, match="trial_id must be an integer >= 0, got '3'"):
            journal.append({"event": "trial_finished", "trial_id": "3", "attempt": 0, "result": None})
    assert (tmp_path / "j.jsonl").read_bytes() == b""


def test_torn_last_line_dropped_and_repaired(tmp_path):
    path = tmp_path / "journal.jsonl"
    events = sample_events()
    write_journal(path, events)
    with open(path, "ab") as fh:  # a crash in the middle of an append
        fh.write(b'{"event": "trial_finished", "trial_id": 4, "attem')
    contents = read_journal(path)
    assert contents.events == events
    assert contents.torn_line == b'{"event": "trial_finished", "trial_id": 4, "attem'
    assert contents.torn_line_number == len(events) + 1
    with pytest.warns(TornJournalLineWarning, match=f"dropped torn last line {len(events) + 1}"):
        assert read_events(path) == events
    # re-opening for append cuts the torn line off so new events do not glue onto it
    with pytest.warns(TornJournalLineWarning, match="cut off a torn last line"):
        journal = Journal(path)
    assert journal.dropped_tail.startswith(b'{"event": "trial_finished"')
    journal.append({"event": "campaign_finished", "reason": "done", "time": 2000.0})
    journal.close()
    assert read_journal(path).torn_line is None
    assert read_events(path) == events + [{"event": "campaign_finished", "reason": "done", "time": 2000.0}]


def test_valid_json_but_incomplete_last_event_is_a_torn_line(tmp_path):
    """A truncation that happens to end on a brace: valid JSON, not a complete event. Resume treats
    it like a torn line (with the notice) instead of failing with a KeyError in replay."""
    path = tmp_path / "journal.jsonl"
    events = sample_events()
    write_journal(path, events)
    with open(path, "ab") as fh:
        fh.write(b'{"event": "trial_finished", "time": 9.0}\n')
    contents = read_journal(path)
    assert contents.events == events and contents.torn_line_number == len(events) + 1
    assert CampaignState.replay(contents.events).num_finished == CampaignState.replay(events).num_finished
    with pytest.warns(TornJournalLineWarning, match="cut off a torn last line"):
        Journal(path).close()
    assert read_journal(path).torn_line is None and read_events(path) == events
    # the same event in the middle is corruption, named by its line and what is missing
    lines = path.read_bytes().split(b"\n")
    lines.insert(1, b'{"event": "trial_finished", "time": 9.0}')
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(JournalCorruptError, match=r"line 2 is not a complete JSON event \(journal event "
                                                  r"'trial_finished' is missing fields \['trial_id', 'attempt', 'result'\]"):
        read_journal(path)


def test_complete_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"event": "campaign_finished", "reason": "x", "time": 1.0}')
    assert read_journal(path).events == [{"event": "campaign_finished", "reason": "x", "time": 1.0}]
    with Journal(path) as journal:
        journal.append({"event": "campaign_finished", "reason": "y", "time": 2.0})
    assert [e["reason"] for e in read_events(path)] == ["x", "y"]


def test_corruption_in_the_middle_names_the_line(tmp_path):
    path = tmp_path / "journal.jsonl"
    write_journal(path, sample_events())
    lines = path.read_bytes().split(b"\n")
    lines[4] = lines[4][:20]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(JournalCorruptError, match=r"journal.jsonl: line 5 is not a complete JSON event \(not JSON; corruption inside"):
        read_events(path)


def test_replay_counts_best_running_and_next_id():
    state = CampaignState.replay(sample_events())
    assert [r.trial_id for r in state.finished] == [0, 1, 2, 3]
    assert [r.status for r in state.finished] == ["completed", "failed", "completed", "diverged"]
    assert [r.trial_id for r in state.running_at_crash] == [4]
    assert state.running_at_crash[0].next_attempt == 1
    assert [r.trial_id for r in state.suggested_only] == [5]
    assert state.next_trial_id == 6
    assert state.num_finished == 4 and state.num_completed == 2 and state.num_failed == 2
    assert state.counts == {"completed": 2, "diverged": 1, "timeout": 0, "stopped": 0, "failed": 1, "running": 1,
                            "interrupted": 0, "retrying": 0, "moved": 0, "suggested": 1}
    assert state.best_trial.trial_id == 2 and state.best_objective == 0.25
    assert state.history() == [(params(0), 0.5), (params(1), None), (params(2), 0.25), (params(3), None)]
    assert state.trials[1].last_attempt.reason == "out of memory"
    assert state.trials[2].last_attempt.slots == [0, 1]


def test_replay_exactly_once_with_duplicated_events():
    events = sample_events()
    doubled = []
    for event in events:  # every event written twice (e.g. a retried append)
        doubled += [event, dict(event)]
    state = CampaignState.replay(doubled)
    reference = CampaignState.replay(events)
    assert state.num_duplicates == len(events) - 1  # all but the campaign_started
    assert [(r.trial_id, r.status, r.objective) for r in state.finished] == \
           [(r.trial_id, r.status, r.objective) for r in reference.finished]
    assert state.num_finished == 4 and len(state.trials[0].attempts) == 1
    assert [r.trial_id for r in state.running_at_crash] == [4]


def test_resume_reruns_interrupted_trial_once():
    events = sample_events()
    events.append({"event": "campaign_started", "time": 2000.0, "campaign": events[0]["campaign"],
                   "resume": True, "ranks": 3, "slots": 2})
    mid = CampaignState.replay(events)
    assert mid.trials[4].status == "interrupted" and mid.trials[4].last_attempt.end == 1038.0
    assert [r.trial_id for r in mid.running_at_crash] == [4]
    events += [
        {"event": "trial_started", "time": 2001.0, "trial_id": 4, "attempt": 1, "slots": [0], "hosts": ["n0"], "size": 1},
        {"event": "trial_finished", "time": 2011.0, "trial_id": 4, "attempt": 1, "result": result("completed", 0.125)},
    ]
    state = CampaignState.replay(events)
    assert state.running_at_crash == []
    assert [a.status for a in state.trials[4].attempts.values()] == ["interrupted", "completed"]
    assert state.best_trial.trial_id == 4 and state.num_finished == 5
    assert [s[0] for s in state.segments] == [1000.0, 2000.0]


def test_objective_key_from_campaign():
    events = sample_events()
    events[0] = {**events[0], "campaign": {**events[0]["campaign"], "objective": "heads.energy.val_mae"}}
    finished = events[-1]["result"]
    events[-1] = {**events[-1], "result": {**finished, "status": "completed", "objective": 9.0,
                                           "heads": {"energy": {"val_mae": 0.01}}}}
    state = CampaignState.replay(events)
    assert state.trials[3].objective == 0.01 and state.trials[0].objective is None  # no energy head


def test_results_csv_columns_and_values(tmp_path):
    state = CampaignState.replay(sample_events())
    path = tmp_path / "results.csv"
    write_results_csv(state, path)
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    header = list(rows[0])
    assert header[:4] == [f"p:{k}" for k in SPACE]
    assert header[4:8] == ["objective", "loss", "job_id", "job_status"]
    assert {"m:timestamp_submit", "m:timestamp_gather", "m:timestamp_suggested", "m:timestamp_start", "m:timestamp_end", "m:slots",
            "m:host", "m:status", "m:wall_time_s", "m:failure_reason"} <= set(header)
    # DeepHyper's conventions: finished trials only (trial 4 still runs), objective maximised
    # in the order they were gathered (their end events in the journal; the gather time is the
    # event's, rank 0's clock, and this hand-written journal's clock goes back once)
    assert [r["job_id"] for r in rows] == ["0", "1", "2", "3"]
    assert [float(r["m:timestamp_gather"]) for r in rows] == [11.0, 5.0, 32.0, 38.0]
    rows = sorted(rows, key=lambda r: int(r["job_id"]))
    assert [r["job_status"] for r in rows] == ["DONE", "FAILED", "DONE", "DONE"]
    assert [r["objective"] for r in rows] == ["-0.5", "F", "-0.25", "F"]
    assert [r["loss"] for r in rows] == ["0.5", "", "0.25", ""]
    assert [r["m:status"] for r in rows] == ["completed", "failed", "completed", "diverged"]
    assert rows[2]["m:timestamp_gather"] == rows[2]["m:timestamp_end"] == "32.000000"
    two = rows[2]
    assert two["m:slots"] == "0;1" and two["m:host"] == "node0" and two["m:size"] == "2"
    assert two["m:timestamp_start"] == "12.000000" and two["m:timestamp_end"] == "32.000000"
    assert two["m:wall_time_s"] == "20.0"
    assert rows[1]["m:failure_reason"] == "out of memory"
    assert rows[3]["m:failure_reason"] == "loss is NaN at epoch 2"
    assert float(rows[0]["p:NeuralNetwork.Training.Optimizer.learning_rate"]) == params(0)["NeuralNetwork.Training.Optimizer.learning_rate"]
    assert not (tmp_path / "results.csv.tmp").exists()


def test_event_split_over_two_lines_is_corruption(tmp_path):
    """Joined, the two halves would parse; line by line they are a corrupt line in the middle."""
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"event": "campaign_finished", "time": 1.0, "reason": [1\n2]}\n'
                     b'{"event": "campaign_finished", "time": 2.0, "reason": "x"}\n')
    with pytest.raises(JournalCorruptError, match="line 1 is not a complete JSON event"):
        read_journal(path)


def test_a_decided_retry_is_not_a_finished_trial():
    """A crash between ``trial_failed ... will_retry`` and the retry's start: on resume the trial is
    re-run (on the decided size), not counted as finished-failed."""
    events = sample_events()
    n_finished = CampaignState.replay(events).num_finished
    events += [
        {"event": "trial_suggested", "time": 1050.0, "trial_id": 9, "params": params(9), "attempt": 0},
        {"event": "trial_started", "time": 1051.0, "trial_id": 9, "attempt": 0, "slots": [0], "hosts": ["n0"], "size": 1},
        {"event": "trial_failed", "time": 1052.0, "trial_id": 9, "attempt": 0, "reason": "killed (SIGKILL, possibly out of memory)",
         "log_tail": "", "result": result("failed", None), "will_retry": True, "retry_size": 2},
    ]
    state = CampaignState.replay(events)
    record = state.trials[9]
    assert (record.status, record.finished, record.next_attempt) == ("retrying", False, 1)
    assert record.last_attempt.retry_size == 2 and record.last_attempt.status == "failed"
    assert [r.trial_id for r in state.running_at_crash] == [4, 9]
    assert state.num_finished == n_finished and state.counts["retrying"] == 1
    # the retry ran: finished once
    events += [
        {"event": "trial_started", "time": 1060.0, "trial_id": 9, "attempt": 1, "slots": [0, 1], "hosts": ["n0", "n0"], "size": 2},
        {"event": "trial_finished", "time": 1070.0, "trial_id": 9, "attempt": 1, "result": result("completed", 0.5)},
    ]
    state = CampaignState.replay(events)
    assert state.trials[9].status == "completed" and state.num_finished == n_finished + 1
    assert [r.trial_id for r in state.running_at_crash] == [4]


def test_attempt_times_are_the_processes_times_when_journaled():
    """End events carry started_at/ended_at (the agents' clocks): a trial sent ahead is journaled as
    started only after the end of the one it followed, but really started before that line."""
    events = [
        {"event": "campaign_started", "time": 0.0, "campaign": {}, "resume": False, "ranks": 2, "slots": 1},
        {"event": "trial_suggested", "time": 0.0, "trial_id": 0, "params": params(0), "attempt": 0},
        {"event": "trial_suggested", "time": 0.0, "trial_id": 1, "params": params(1), "attempt": 0},
        {"event": "trial_started", "time": 0.1, "trial_id": 0, "attempt": 0, "slots": [0], "hosts": ["h"], "size": 1},
        {"event": "trial_finished", "time": 1.3, "trial_id": 0, "attempt": 0, "result": result("completed", 0.5),
         "started_at": 0.12, "ended_at": 1.2},
        {"event": "trial_started", "time": 1.31, "trial_id": 1, "attempt": 0, "slots": [0], "hosts": ["h"],
         "size": 1, "queued_after": 0},
        {"event": "trial_finished", "time": 2.5, "trial_id": 1, "attempt": 0, "result": result("completed", 0.4),
         "started_at": 1.21, "ended_at": 2.4},
    ]
    state = CampaignState.replay(events)
    first, second = (state.trials[i].last_attempt for i in (0, 1))
    assert (first.start, first.end) == (0.12, 1.2)
    assert (second.start, second.end) == (1.21, 2.4)
    assert first.end <= second.start  # one slot, no overlap


def test_an_event_for_a_trial_the_journal_never_started_names_the_file_and_line(tmp_path):
    """N11: the error named neither the journal nor the line."""
    from hpo.campaign_dir import CampaignDir
    from hpo.campaign_reader import _state

    cdir = CampaignDir(tmp_path)
    progress = {"event": "trial_progress", "time": 2.0, "trial_id": 5, "attempt": 0, "epoch": 1, "objective": 0.5}
    finished = {"event": "campaign_finished", "time": 1.0, "reason": "x"}
    cdir.journal.write_text(json.dumps(finished) + "\n\n" + json.dumps(progress) + "\n")  # a blank line 2
    with pytest.raises(ValueError, match=rf"{cdir.journal}: cannot replay the journal: line 3: progress of trial 5 "
                                         "attempt 0, which never started"):
        _state(cdir)
    cdir.journal.write_text(json.dumps(finished) + "\n" + json.dumps(progress) + "\n")  # the fast path
    with pytest.raises(ValueError, match=rf"{cdir.journal}: cannot replay the journal: line 2: progress of trial 5"):
        _state(cdir)
