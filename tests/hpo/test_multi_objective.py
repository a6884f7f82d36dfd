"""Multi-objective campaigns: the objectives, the optimizers told several numbers, results.csv in
DeepHyper's multi-objective convention, the Pareto front, the Optuna export."""

from __future__ import annotations

import copy
import csv

import pytest

from hpo.campaign import CampaignConfig
from hpo.objective import Objectives
from hpo.optimizers import make_optimizer
from hpo.optuna_study import study_from_state
from hpo.report_pareto import format_pareto, pareto_front, plot_pareto
from hpo.results_table import state_from_results_csv, write_results_csv
from hpo.space import SearchSpace
from hpo.state import CampaignState
from hydragnn_ensemble.result import TrialResult

from hpo_testdata import SPACE, params, result

SMALL = SearchSpace.from_dict({"x": {"type": "float", "low": 0.0, "high": 1.0},
                               "n": {"type": "int", "low": 1, "high": 8}})


def test_objectives_parse_and_refuse():
    o = Objectives.parse(["heads.energy.val_mae", "slot_seconds", "inference_ms_per_graph", "num_parameters"])
    assert o.multi and o.primary.head == "energy" and [k.cost for k in o.keys[1:]] == [
        "slot_seconds", "inference_ms_per_graph", "num_parameters"]
    with pytest.raises(ValueError, match="must be an accuracy"):
        Objectives.parse(["slot_seconds", "objective"])
    with pytest.raises(ValueError, match="names a key twice"):
        Objectives.parse(["objective", "objective"])
    with pytest.raises(ValueError, match="or a cost: slot_seconds"):
        Objectives.parse(["objective", "latency"])


def test_cost_objectives_read_the_result():
    r = TrialResult(status="completed", objective=0.5, wall_time_s=12.0, slots=4, num_parameters=900,
                    inference_ms_per_graph=0.25)
    o = Objectives.parse(["objective", "slot_seconds", "num_parameters", "inference_ms_per_graph"])
    assert o.of_result(r) == (0.5, 48.0, 900.0, 0.25)
    assert o.of_result(TrialResult(status="completed", objective=0.5)) is None  # no inference time: a failure
    assert o.of_result(TrialResult(status="failed")) is None
    assert Objectives.parse(["objective"]).of_result(r) == 0.5


def _config(**extra) -> dict:
    return {"dataset": "/d", "base_config": "/b", "search_space": SPACE, "max_trials": 4, **extra}


def test_campaign_objectives_set_the_objective_and_refuse_a_conflict():
    cfg = CampaignConfig.model_validate(_config(objectives=["heads.energy.val_mae", "inference_ms_per_graph"]))
    assert cfg.objective == "heads.energy.val_mae" and cfg.objective_set.texts == cfg.objectives
    with pytest.raises(ValueError, match="give one"):
        CampaignConfig.model_validate(_config(objective="objective", objectives=["heads.e.val_mae", "slot_seconds"]))
    with pytest.raises(ValueError, match="two or more"):
        CampaignConfig.model_validate(_config(objectives=["objective"]))
    assert not CampaignConfig.model_validate(_config()).objective_set.multi


@pytest.mark.parametrize("name", ["random", "optuna-tpe", "optuna-nsga2", "deephyper-cbo"])
def test_every_backend_is_told_several_objectives(name):
    opt = make_optimizer(name, SMALL, seed=3, num_objectives=2)
    opt.tell_past({"x": 0.5, "n": 3}, (0.25, 3.0))
    opt.tell_past({"x": 0.1, "n": 2}, None)
    seen = []
    for _ in range(3):
        for i, s in enumerate(opt.ask(5)):
            x, n = s.params["x"], s.params["n"]
            assert 0.0 <= x <= 1.0 and 1 <= n <= 8
            told = None if i == 0 else ((x - 0.3) ** 2 + 1.0 / n, float(n))
            opt.tell(s.suggestion_id, told, stopped_after=2 if i == 1 else None)
            seen.append(told)
    assert opt.num_told == 17 and opt.num_failed == 4
    assert opt.best_objective == min([0.25] + [t[0] for t in seen if t is not None])
    s = opt.ask(1)[0]
    with pytest.raises(ValueError, match="2 objectives per trial"):
        opt.tell(s.suggestion_id, 0.3)
    if name.startswith("optuna"):
        assert len(opt.study.directions) == 2 and opt.study.best_trials


def _multi_state() -> CampaignState:
    """Four trials on (objective, inference ms): 0 and 2 on the front, 1 dominated by 0, 3 stopped
    early with the best numbers (never on the front), 4 failed."""
    campaign = {"search_space": SPACE, "objective": "objective",
                "objectives": ["objective", "inference_ms_per_graph"], "max_trials": 8}
    ev = [{"event": "campaign_started", "time": 0.0, "campaign": campaign, "resume": False, "ranks": 2, "slots": 1}]
    rows = [("completed", 0.2, 2.0), ("completed", 0.3, 3.0), ("completed", 0.5, 0.5), ("stopped", 0.1, 0.1),
            ("failed", None, None)]
    for i, (status, objective, ms) in enumerate(rows):
        res = result(status, objective)
        res["inference_ms_per_graph"] = ms
        ev += [{"event": "trial_suggested", "time": i, "trial_id": i, "params": params(i), "attempt": 0},
               {"event": "trial_started", "time": i, "trial_id": i, "attempt": 0, "slots": [0], "hosts": ["n"], "size": 1},
               {"event": "trial_finished" if status != "failed" else "trial_failed", "time": i + 0.5,
                "trial_id": i, "attempt": 0, "result": res, **({"reason": "boom", "log_tail": ""} if status == "failed" else {})}]
    return CampaignState.replay(ev)


def test_results_csv_has_objective_0_and_1_negated_and_reads_back(tmp_path):
    state = _multi_state()
    assert state.trials[0].objective_values == (0.2, 2.0) and state.trials[4].objective_values is None
    assert state.history()[2][1] == (0.5, 0.5)
    path = tmp_path / "results.csv"
    write_results_csv(state, path)
    with open(path, newline="") as fh:
        rows = {int(r["job_id"]): r for r in csv.DictReader(fh)}
    assert "objective" not in rows[0] and float(rows[0]["objective_0"]) == -0.2 and float(rows[0]["objective_1"]) == -2.0
    assert rows[4]["objective_0"] == rows[4]["objective_1"] == "F"
    assert float(rows[2]["m:inference_ms_per_graph"]) == 0.5
    for r in rows.values():
        del r["loss"]  # a DeepHyper table: the loss is read from objective_0
    stripped = tmp_path / "deephyper.csv"
    with open(stripped, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows.values())
    back = state_from_results_csv(stripped)
    assert back.trials[1].objective == 0.3 and back.trials[4].objective is None


def test_pareto_front_text_and_plot(tmp_path):
    front = pareto_front(_multi_state())
    assert [r.trial_id for r in front.front] == [0, 2]
    assert sorted(r.trial_id for r in front.others) == [1, 3]
    text = format_pareto(front)
    assert "Pareto front (2 of 4 trials" in text and text.splitlines()[2].split() == ["0", "0.2", "2"]
    png = tmp_path / "pareto.png"
    assert plot_pareto(front, png) and png.stat().st_size > 10_000
    single = copy.deepcopy(_multi_state())
    single.objectives = Objectives.parse(["objective"])
    assert pareto_front(single) is None


def test_optuna_export_of_a_multi_objective_campaign():
    study = study_from_state(_multi_state(), SearchSpace.from_dict(SPACE))
    assert len(study.directions) == 2
    assert sorted(t.user_attrs["trial_id"] for t in study.best_trials) == [0, 2]
    pruned = [t for t in study.trials if t.user_attrs["trial_id"] == 3][0]
    assert pruned.state.name == "PRUNED" and pruned.values is None
