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


def test_no_widening_before_a_speed_up_is_measured_and_the_prediction_reported(tmp_path: Path) -> None:
    # one trial the cost model predicts at ~200 s on 1 slot (GIN, 650 epochs: the fault trainer only
    # sleeps) against a 300 s target (a quarter of the time limit); 2 slots allowed, but no attempt has
    # measured what a second slot gains, so the runtime's sizer offers no wider size and load-aware
    # starts it on one slot although the other is idle
    space = {"NeuralNetwork.Training.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}
    campaign = write_campaign(tmp_path, max_trials=1, sleep_s=0.1, trial_time_limit_s=1200, search_space=space,
                              resources={"slots_per_trial": [1, 2]})
    base = json.loads((tmp_path / "base.json").read_text())
    base["NeuralNetwork"]["Training"]["num_epoch"] = 650
    (tmp_path / "base.json").write_text(json.dumps(base))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)  # 2 agent slots; load-aware is the default placement
    assert proc.returncode == 0, proc.stderr
    (started,) = of(events(out), "trial_started")
    result = json.loads((out / "trials" / "0" / "result.json").read_text())
    config = json.loads((out / "trials" / "0" / "config.json").read_text())
    sized = runtime_sizer(str(tmp_path / "data.bp"), [1, 2], 1, 1200.0, lambda params: config).choose({})
    assert sized.slots == 1 and 150 < sized.predicted_seconds < 250 and sized.alternatives == ()
    assert started["size"] == 1 and result["status"] == "completed" and result["slots"] == 1
    # the prediction journaled at placement: its start-up and epoch terms and their sum
    assert started["predicted_startup_s"] == pytest.approx(sized.startup_s)
    assert started["predicted_epoch_s"] == pytest.approx(sized.epoch_s_at(1))
    assert started["predicted_slot_s"] == pytest.approx(sized.startup_s + 650 * sized.epoch_s_at(1))
    # the report's cost-model error over this one attempt: start-up + the epochs it trained
    summary = summarize(load_state(out))
    predicted = started["predicted_startup_s"] + result["epochs"] * started["predicted_epoch_s"]
    expected = abs(math.log(predicted / result["wall_time_s"]))
    err = summary.cost_model_error.per_attempt
    assert err.count == 1 and err.median == pytest.approx(expected)
    assert any(line.startswith("cost model error |log(predicted/actual)| of start-up + the epochs trained")
               and f"median {expected:.4f}" in line for line in format_summary(summary).splitlines())
