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


def test_report_gives_the_error_per_attempt_and_per_epoch_and_draws_it(tmp_path, capsys):
    """Predicted start-up 1 s and 10 s per epoch at each start; trial i trained 2 epochs (predicted
    21 s) in 21 x e^(0.1 i) s, its epochs measured at 10 x e^(-0.05 i) s: the report's figures are the
    medians of those logs, trials 11+ on their own, and the parity plot is drawn."""
    directory = tmp_path / "c"
    directory.mkdir()
    with Journal(directory / "journal.jsonl") as journal:
        journal.append({"event": "campaign_started", "time": 0.0, "campaign": {"objective": "objective"},
                        "resume": False, "ranks": 2, "slots": 1})
        t = 1.0
        for tid in range(12):
            wall = 21.0 * math.exp(0.1 * tid)
            journal.append({"event": "trial_suggested", "time": t, "trial_id": tid, "params": {"h": tid}, "attempt": 0})
            journal.append({"event": "trial_started", "time": t, "trial_id": tid, "attempt": 0, "slots": [0],
                            "hosts": ["n0"], "size": 1, "predicted_slot_s": 21.0, "predicted_startup_s": 1.0,
                            "predicted_epoch_s": 10.0})
            for epoch in (1, 2):
                journal.append({"event": "trial_progress", "time": t + epoch, "trial_id": tid, "attempt": 0,
                                "epoch": epoch, "objective": 1.0, "epoch_s": 10.0 * math.exp(-0.05 * tid)})
            result = {**_result("completed", wall, 1), "epochs": 2}
            journal.append({"event": "trial_finished", "time": t + wall, "trial_id": tid, "attempt": 0,
                            "result": result})
            t += wall + 1
        journal.append({"event": "campaign_finished", "time": t, "reason": "max_trials (12) finished"})
    assert main(["report", str(directory)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("cost model error"))
    # per attempt 0.0 .. 1.1: median 0.55, p90 0.99; trials 11 and 12: 1.0, 1.1 -> 1.05;
    # per epoch 0.05 x (0 .. 11), each twice: median 0.275, p90 at rank 20.7 of 24 -> 0.5 + 0.7 x 0.0 = 0.5
    assert line == ("cost model error |log(predicted/actual)| of start-up + the epochs trained, predicted at each "
                    "start: median 0.5500, p90 0.9900 over 12 attempts (trials 11+: median 1.0500 over 2); "
                    "per epoch: median 0.2750, p90 0.5000 over 24")
    assert (directory / "report" / "cost.png").stat().st_size > 5000
    assert "the cost model: predicted vs actual" in (directory / "report" / "index.html").read_text()
