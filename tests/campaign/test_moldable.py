"""Moldable widening in the real runtime (mpiexec): the last trial of a campaign starts on more slots
than the sizer gave it when the load-aware policy sees an idle machine, and the prediction made at
placement is journaled and reported."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from campaign_testkit import events, of, run_hpo, write_campaign

from hpo.report import format_summary, load_state, summarize
from scheduler.sizing import runtime_sizer

pytestmark = pytest.mark.mpi


def test_last_trial_widened_by_load_aware_and_prediction_reported(tmp_path: Path) -> None:
    # one trial the cost model predicts at ~200 s on 1 slot (GIN, 2,500 epochs: the fault trainer only
    # sleeps) against a 300 s target (a quarter of the time limit): sized at 1 slot, 2 allowed
    space = {"NeuralNetwork.Training.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}
    campaign = write_campaign(tmp_path, max_trials=1, sleep_s=0.1, trial_time_limit_s=1200, search_space=space,
                              resources={"slots_per_trial": [1, 2]})
    base = json.loads((tmp_path / "base.json").read_text())
    base["NeuralNetwork"]["Training"]["num_epoch"] = 2500
    (tmp_path / "base.json").write_text(json.dumps(base))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)  # 2 agent slots; load-aware is the default placement
    assert proc.returncode == 0, proc.stderr
    (started,) = of(events(out), "trial_started")
    result = json.loads((out / "trials" / "0" / "result.json").read_text())
    # what the runtime's sizer says about this trial (slots_per_node 1 by default, so the 2-slot start
    # is a two-node trial on whole nodes)
    config = json.loads((out / "trials" / "0" / "config.json").read_text())
    sized = runtime_sizer(str(tmp_path / "data.bp"), [1, 2], 1, 1200.0, lambda params: config).choose({})
    assert sized.slots == 1 and 150 < sized.predicted_seconds < 250 and [n for n, _ in sized.alternatives] == [2]
    # nothing else is pending, so load-aware starts it at the wider size, and the trainer runs with
    # that world size (both processes rendezvous; rank 0 reports 2 slots)
    assert started["size"] == 2 and sorted(started["slots"]) == [0, 1]
    assert result["status"] == "completed" and result["slots"] == 2
    assert (out / "trials" / "0" / "train.rank1.log").exists()
    # the prediction journaled at placement is for the width it started at
    assert started["predicted_slot_s"] == pytest.approx(2 * sized.seconds_at(2))
    # the report's cost-model error over this one completed trial
    summary = summarize(load_state(out))
    expected = abs(math.log(started["predicted_slot_s"] / (2 * result["wall_time_s"])))
    err = summary.cost_model_error
    assert err.count == 1 and err.median == pytest.approx(expected) and err.p90 == pytest.approx(expected)
    assert (f"cost model error |log(predicted/actual)| slot-seconds over 1 completed trials: "
            f"median {expected:.4f}, p90 {expected:.4f}") in format_summary(summary).splitlines()
