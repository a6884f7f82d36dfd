"""results.csv kept as trials finish (:class:`hpo.results_table.ResultsCsv`): rows appended, the
table rewritten only when its header changes or the file is not the one last written; at every
step the file is byte for byte what a whole rewrite from the same state writes."""

from __future__ import annotations

from hpo_testdata import result, sample_events

from hpo.events import event_from_json
from hpo.results_table import ResultsCsv, write_results_csv
from hpo.state import CampaignState


def whole(state: CampaignState, path) -> str:
    write_results_csv(state, path)
    return path.read_text()


def finishing(trial_id: int, t: float, heads: dict | None = None) -> list[dict]:
    done = result("completed", 0.1 * trial_id)
    if heads is not None:
        done = {**done, "heads": heads}
    return [{"event": "trial_suggested", "time": t, "trial_id": trial_id, "params": {}, "attempt": 0},
            {"event": "trial_started", "time": t, "trial_id": trial_id, "attempt": 0, "slots": [0], "hosts": ["n0"],
             "size": 1},
            {"event": "trial_finished", "time": t + 1, "trial_id": trial_id, "attempt": 0, "result": done}]


def test_appended_rows_match_a_whole_rewrite_and_rewrites_are_rare(tmp_path):
    state = CampaignState()
    table = ResultsCsv(tmp_path / "results.csv")
    batches = [sample_events()] + [finishing(i, 3000.0 + i) for i in range(10, 40)]
    batches.insert(12, finishing(50, 2500.0, heads={"energy": {"val_mae": 0.02, "val_rmse": 0.03}}))  # a new head
    for batch in batches:
        for record in batch:
            state.apply(event_from_json(record))
        table.update(state)
        assert table.path.read_text() == whole(state, tmp_path / "reference.csv")
    # the first write, and the one that added the head's columns; every other batch was appended
    assert table.rewrites == 2 and len(state.gathered) == 4 + 31
    table.update(state)  # nothing new: nothing written
    assert table.rewrites == 2


def test_a_file_replaced_or_cut_under_it_is_rewritten_whole(tmp_path):
    state = CampaignState.replay(sample_events())
    table = ResultsCsv(tmp_path / "results.csv")
    table.update(state)
    table.path.write_text(table.path.read_text()[:50])  # cut by someone else
    for record in finishing(10, 3000.0):
        state.apply(event_from_json(record))
    table.update(state)
    assert table.rewrites == 2 and table.path.read_text() == whole(state, tmp_path / "reference.csv")


def test_rows_follow_the_order_trials_were_gathered(tmp_path):
    """A trial whose processes ended first but whose end rank 0 journaled last is the last row,
    gathered at the journal's time."""
    state = CampaignState.replay(sample_events())
    late = finishing(10, 100.0)
    late[-1] = {**late[-1], "time": 2000.0, "started_at": 100.0, "ended_at": 101.0}
    for record in late:
        state.apply(event_from_json(record))
    rows = whole(state, tmp_path / "r.csv").splitlines()
    header = rows[0].split(",")
    last = dict(zip(header, rows[-1].split(",")))
    assert state.gathered[-1] == 10 and last["job_id"] == "10"
    assert float(last["m:timestamp_gather"]) == 1000.0 and float(last["m:timestamp_end"]) == -899.0
