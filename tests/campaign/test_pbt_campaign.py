"""Population-based training in the real runtime (mpiexec, the built-in trainer): a population of
four trains side by side; at every second epoch the worst takes over the best one's training state
with its learning rate perturbed (the architecture inherited), as the next attempt on its slot. The
journal records the lineage, the state and results.csv carry the final parameters, and the
continuation's curve goes on from the donor's epoch."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest
from campaign_testkit import events, of, results_rows, run_hpo, tiny_alloy_dataset, tiny_gin_config, write_campaign

from hpo.journal import read_journal
from hpo.state import CampaignState

pytestmark = pytest.mark.mpi
LR = "NeuralNetwork.Training.Optimizer.learning_rate"
WIDTH = "NeuralNetwork.Architecture.hidden_dim"


def test_a_pbt_campaign_exploits_records_lineage_and_continues_curves(tmp_path: Path) -> None:
    tiny_alloy_dataset(tmp_path / "alloy.bp", n=96)
    space = {LR: {"type": "float", "low": 1e-5, "high": 3e-2, "log": True},
             WIDTH: {"type": "categorical", "choices": [8, 12]}}
    campaign = write_campaign(tmp_path, max_trials=4, trial_time_limit_s=120, search_space=space, seed=2,
                              dataset="alloy.bp", trial_program="hydragnn_ensemble",
                              optimizer={"name": "pbt", "options": {"population": 4, "interval": 2,
                                                                    "resample_probability": 0.0}})
    (tmp_path / "base.json").write_text(json.dumps(tiny_gin_config(8)))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, 5, timeout=200)  # rank 0 and four slots: the whole population at once
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    exploits = of(evs, "trial_exploited")
    assert exploits, "no trial was exploited"
    params = {e["trial_id"]: e["params"] for e in of(evs, "trial_suggested")}
    curves: dict[int, dict[int, float]] = {t: {} for t in params}
    for e in evs:  # replay the journal by hand: each trial's parameters and curve as the loop saw them
        if e["event"] == "trial_progress":
            curves[e["trial_id"]][e["epoch"]] = e["objective"]
        elif e["event"] == "trial_exploited":
            t, d = e["trial_id"], e["donor_id"]
            assert d != t and e["epoch"] % 2 == 0 and e["donor_epoch"] >= 2
            assert curves[t][e["epoch"]] > curves[d][e["donor_epoch"]]  # the worse one took over the better
            assert e["params"][WIDTH] == params[d][WIDTH]  # the architecture: the donor's
            ratio = e["params"][LR] / params[d][LR]
            assert min(abs(ratio - 0.8), abs(ratio - 1.2)) < 1e-9 or e["params"][LR] in (1e-5, 3e-2)
            params[t] = e["params"]
    state = CampaignState.replay(read_journal(out / "journal.jsonl").events)
    rows = {int(r["job_id"]): r for r in results_rows(out)}
    for t, record in state.trials.items():
        assert record.params == params[t] and record.finished
        assert float(rows[t][f"p:{LR}"]) == pytest.approx(params[t][LR], rel=1e-12)
        mine = [e for e in exploits if e["trial_id"] == t]
        assert [s.text() for s in record.lineage] == [f"{e['epoch']}:{e['donor_id']}@{e['donor_epoch']}" for e in mine]
        assert rows[t]["m:lineage"] == ";".join(s.text() for s in record.lineage)
        assert int(rows[t]["m:attempts"]) == len(mine) + 1
        trial = out / "trials" / str(t)
        config = json.loads((trial / "config.json").read_text())
        assert config["NeuralNetwork"]["Training"]["Optimizer"]["learning_rate"] == pytest.approx(params[t][LR])
        assert not (trial / "inherit_state.pt").exists()
    from ensemble.campaign import read_campaign

    members = read_campaign(out).trials  # what select puts into a member's manifest entry
    assert {t: m.lineage for t, m in members.items()} == {t: [s.text() for s in r.lineage]
                                                          for t, r in state.trials.items()}
    assert all(m.params == params[t] for t, m in members.items())
    e = exploits[-1]
    record = state.trials[e["trial_id"]]
    continuation = record.attempts[e["attempt"] + 1]
    trial = out / "trials" / str(e["trial_id"])
    taken = re.search(rf"inherited the training state of trial directory '{e['donor_id']}' after (\d+) epoch",
                      (trial / "train.log").read_text())
    assert taken is not None and int(taken.group(1)) >= e["donor_epoch"]
    assert continuation.curve[0][0] == int(taken.group(1)) + 1  # the curve goes on from the donor's epoch
    assert continuation.curve[-1][0] == 8 and record.result.resumed_from == int(taken.group(1))
    terminal = Counter(x["trial_id"] for x in evs if x["event"] in ("trial_finished", "trial_failed"))
    assert terminal == Counter({0: 1, 1: 1, 2: 1, 3: 1})
    assert all(math.isfinite(r.objective) for r in state.trials.values())
