"""Malleable trials in the real runtime (mpiexec, the built-in trainer): at the tail of a campaign a
running trial grows onto the slot another trial left idle. It stops after its epoch keeping its
training state, its continuation resumes from that state on two processes (the global batch
unchanged), its learning curve goes on counting, and the journal has one end for it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from campaign_testkit import events, of, results_rows, run_hpo, tiny_alloy_dataset, tiny_gin_config, write_campaign

from hpo.journal import read_journal
from hpo.state import CampaignState
from hydragnn_ensemble.result import TrialResult

pytestmark = pytest.mark.mpi


def test_a_trial_grows_onto_an_idle_slot_and_its_curve_goes_on(tmp_path: Path) -> None:
    tiny_alloy_dataset(tmp_path / "alloy.bp", n=160)
    # two trials: one of 4 epochs, one of 300; when the short one ends, the long one has most of
    # its epochs ahead of it and the slot next to it idles (nothing else waits)
    space = {"NeuralNetwork.Training.num_epoch": {"type": "categorical", "choices": [4, 300]}}
    campaign = write_campaign(tmp_path, max_trials=2, trial_time_limit_s=300, search_space=space, seed=3,
                              dataset="alloy.bp", trial_program="hydragnn_ensemble",
                              resources={"slots_per_trial": [1, 2]})
    (tmp_path / "base.json").write_text(json.dumps(tiny_gin_config(4)))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, 3, timeout=300)  # rank 0 and two agent slots
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    epochs = {e["trial_id"]: e["params"]["NeuralNetwork.Training.num_epoch"] for e in of(evs, "trial_suggested")}
    assert sorted(epochs.values()) == [4, 300]
    long_id = next(t for t, n in epochs.items() if n == 300)
    (moved,) = of(evs, "trial_moved")
    assert (moved["trial_id"], moved["attempt"], moved["size"]) == (long_id, 0, 2)
    starts = [e for e in of(evs, "trial_started") if e["trial_id"] == long_id]
    assert [(s["attempt"], len(s["slots"])) for s in starts] == [(0, 1), (1, 2)]
    # the continuation resumed from the moved attempt's state: its curve goes on counting
    state = CampaignState.replay(read_journal(out / "journal.jsonl").events)
    record = state.trials[long_id]
    done = moved["epochs_done"]
    assert [e for e, _ in record.attempts[0].curve] == list(range(1, done + 1))
    assert record.attempts[1].curve[0][0] == done + 1
    assert [e for e, _ in record.curve] == list(range(1, 301))
    trial = out / "trials" / str(long_id)
    first = TrialResult.read(trial / "result.attempt0.json")
    assert first.status == "stopped" and first.epochs == done and first.failure_reason.startswith("moving from 1 to 2")
    result = TrialResult.read(trial / "result.json")
    assert (result.status, result.slots, result.resumed_from, result.epochs) == ("completed", 2, done, 300)
    assert f"resumed from training_state.pt after {done} epoch(s)" in (trial / "train.log").read_text()
    assert not (trial / "training_state.pt").exists() and not (trial / "move").exists()
    # one end per trial; results.csv counts the move as an attempt
    terminal = Counter(e["trial_id"] for e in evs if e["event"] in ("trial_finished", "trial_failed"))
    assert terminal == Counter({0: 1, 1: 1})
    rows = {int(r["job_id"]): r for r in results_rows(out)}
    assert rows[long_id]["m:attempts"] == "2" and float(rows[long_id]["loss"]) == result.objective
