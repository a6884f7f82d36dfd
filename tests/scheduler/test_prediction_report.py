"""The cost model's own prediction error in ``hydragnn-ensemble report``, from the journal alone."""

from __future__ import annotations

import math

from hpo.journal import Journal
from hydragnn_ensemble.cli import main

# (predicted slot-s, slots, wall s, status): |log(pred / (slots x wall))| = 0.3, 0.1, 1.0, 0.4, 0.2
TRIALS = [
    (100.0 * math.exp(0.3), 1, 100.0, "completed"),
    (400.0 * math.exp(-0.1), 4, 100.0, "completed"),
    (50.0 * math.exp(1.0), 2, 25.0, "completed"),
    (80.0 * math.exp(-0.4), 8, 10.0, "completed"),
    (30.0 * math.exp(0.2), 1, 30.0, "completed"),
    (10.0, 1, 100.0, "failed"),  # a failed attempt: its prediction does not count
]


def _result(status: str, wall: float, slots: int) -> dict:
    return {"status": status, "objective": 1.0 if status == "completed" else None, "heads": {},
            "num_parameters": 1, "epochs": 1, "best_epoch": 0, "wall_time_s": wall, "peak_memory_mb": None,
            "slots": slots, "device": "cpu", "failure_reason": None if status == "completed" else "boom",
            "traceback": None, "log_tail": None, "checkpoint": None}


def _write_journal(directory, with_predictions: bool) -> None:
    directory.mkdir()
    t = 1000.0
    with Journal(directory / "journal.jsonl") as journal:
        journal.append({"event": "campaign_started", "time": t, "campaign": {"objective": "objective"},
                        "resume": False, "ranks": 9, "slots": 8})
        for tid, (predicted, slots, wall, status) in enumerate(TRIALS):
            journal.append({"event": "trial_suggested", "time": t, "trial_id": tid,
                            "params": {"hidden_dim": 8 + tid}, "attempt": 0})
            start = {"event": "trial_started", "time": t + 1, "trial_id": tid, "attempt": 0,
                     "slots": list(range(slots)), "hosts": ["n0"] * slots, "size": slots}
            if with_predictions:
                start["predicted_slot_s"] = predicted
            journal.append(start)
            end = {"event": "trial_finished" if status == "completed" else "trial_failed",
                   "time": t + 1 + wall, "trial_id": tid, "attempt": 0, "result": _result(status, wall, slots)}
            if status != "completed":
                end.update(reason="boom", log_tail="")
            journal.append(end)
            t += wall + 2
        journal.append({"event": "campaign_finished", "time": t, "reason": "max_trials (6) finished"})


def test_report_prints_median_and_p90_of_prediction_error(tmp_path, capsys):
    _write_journal(tmp_path / "new", with_predictions=True)
    assert main(["report", str(tmp_path / "new")]) == 0
    lines = capsys.readouterr().out.splitlines()
    # errors sorted 0.1 0.2 0.3 0.4 1.0: median 0.3; p90 at rank 3.6 = 0.4 + 0.6 x (1.0 - 0.4) = 0.76
    assert ("cost model error |log(predicted/actual)| slot-seconds over 5 completed trials: "
            "median 0.3000, p90 0.7600") in lines


def test_report_of_an_old_journal_without_predictions(tmp_path, capsys):
    _write_journal(tmp_path / "old", with_predictions=False)
    assert main(["report", str(tmp_path / "old")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "cost model: no predictions recorded" in out
    assert not any(line.startswith("cost model error") for line in out)
