"""The campaign as an Optuna study (export for optuna-dashboard, loaded back with optuna.load_study)
and hyperparameter importance with its spread over half-samples."""

from __future__ import annotations

import math
import random

import optuna
import pytest
from hpo_testdata import SPACE, result, sample_events

from hpo.importance import campaign_importances, format_importances
from hpo.optuna_study import STUDY_NAME, write_optuna_storage
from hpo.space import SearchSpace
from hpo.state import CampaignState

LR = "NeuralNetwork.Training.Optimizer.learning_rate"
HIDDEN = "NeuralNetwork.Architecture.hidden_dim"
LAYERS = "NeuralNetwork.Architecture.num_conv_layers"
TYPE = "NeuralNetwork.Architecture.mpnn_type"


def with_curves_and_a_stop() -> list[dict]:
    events = sample_events()
    for epoch, value in ((1, 0.9), (2, 0.6), (3, 0.5)):
        events.append({"event": "trial_progress", "time": 1040.0 + epoch, "trial_id": 4, "attempt": 0,
                       "epoch": epoch, "objective": value})
    stopped = {**result("stopped", 0.5, 8.0, "asha: rung 1"), "epochs": 3,
               "heads": {"energy": {"val_mae": 0.3}}}
    events.append({"event": "trial_finished", "time": 1044.0, "trial_id": 4, "attempt": 0, "result": stopped})
    events.append({"event": "trial_started", "time": 1045.0, "trial_id": 5, "attempt": 0, "slots": [0],
                   "hosts": ["node0"], "size": 1})
    events.append({"event": "trial_finished", "time": 1055.0, "trial_id": 5, "attempt": 0,
                   "result": result("timeout", 0.4, 10.0, "time budget of 10 s reached")})
    return events


@pytest.mark.parametrize("suffix", ["journal.log", "study.db"])
def test_exported_storage_loads_back_in_optuna_as_the_journal_says(tmp_path, suffix):
    state = CampaignState.replay(with_curves_and_a_stop())
    path = write_optuna_storage(state, SearchSpace.from_dict(SPACE), tmp_path / suffix)
    if suffix.endswith(".db"):
        storage = f"sqlite:///{path}"
    else:
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        storage = JournalStorage(JournalFileBackend(str(path)))
    study = optuna.load_study(study_name=STUDY_NAME, storage=storage)
    trials = study.get_trials()
    finished = sorted(state.finished, key=lambda r: r.trial_id)
    assert [t.user_attrs["trial_id"] for t in trials] == [r.trial_id for r in finished] == [0, 1, 2, 3, 4, 5]
    # a timeout trained to its time limit and kept its best epoch: a complete trial with its value
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "COMPLETE", "FAIL", "PRUNED", "COMPLETE"]
    assert [t.value for t in trials] == [0.5, None, 0.25, None, 0.5, 0.4]
    assert trials[5].user_attrs["status"] == "timeout"
    assert study.best_trial.user_attrs["trial_id"] == 2 and study.best_value == 0.25
    for t, r in zip(trials, finished):
        assert t.params == r.params
        assert t.user_attrs["status"] == r.status and t.user_attrs["slots"] == r.last_attempt.slots
    assert trials[2].user_attrs["slot_seconds"] == pytest.approx(20.0 * 2)  # two slots for 20 s
    assert trials[1].user_attrs["failure_reason"] == "out of memory"
    assert trials[4].intermediate_values == {1: 0.9, 2: 0.6, 3: 0.5}
    assert trials[4].user_attrs["val_mae:energy"] == 0.3
    span = trials[2].datetime_complete - trials[2].datetime_start
    assert abs(span.total_seconds() - 20.0) < 1e-3
    with pytest.raises(FileExistsError):
        write_optuna_storage(state, SearchSpace.from_dict(SPACE), path)


def synthetic_campaign(n: int, seed: int = 0) -> CampaignState:
    """Trials whose objective depends strongly on the learning rate, weakly on hidden_dim and not
    on the layer count or type; their cost grows with hidden_dim only."""
    rng = random.Random(seed)
    events = [{"event": "campaign_started", "time": 0.0, "campaign": {"search_space": SPACE},
               "resume": False, "ranks": 2, "slots": 1}]
    t = 0.0
    for i in range(n):
        p = {TYPE: rng.choice(["GIN", "PNA", "SchNet"]), HIDDEN: 16 * rng.randint(1, 8),
             LAYERS: rng.randint(1, 6), LR: 10 ** rng.uniform(-4, -2)}
        loss = (math.log10(p[LR]) + 3.0) ** 2 + 0.02 * p[HIDDEN] / 16 + rng.gauss(0, 0.02)
        wall = 2.0 * p[HIDDEN] + rng.uniform(0, 5)
        events += [{"event": "trial_suggested", "time": t, "trial_id": i, "params": p, "attempt": 0},
                   {"event": "trial_started", "time": t, "trial_id": i, "attempt": 0, "slots": [0],
                    "hosts": ["n0"], "size": 1},
                   {"event": "trial_finished", "time": t + wall, "trial_id": i, "attempt": 0,
                    "result": result("completed", loss, wall)}]
        t += wall
    return CampaignState.replay(events)


def write_journal(directory, state: CampaignState):
    """``state``'s finished trials as a campaign journal in ``directory`` (the search space in its
    campaign_started event); returns the open Journal for more events."""
    from hpo.journal import Journal

    journal = Journal(directory / "journal.jsonl")
    journal.append({"event": "campaign_started", "time": 0.0, "campaign": {"search_space": SPACE},
                    "resume": False, "ranks": 2, "slots": 1})
    for record in sorted(state.trials.values(), key=lambda r: r.trial_id):
        a = record.last_attempt
        journal.append({"event": "trial_suggested", "time": a.start, "trial_id": record.trial_id,
                        "params": record.params, "attempt": 0})
        journal.append({"event": "trial_started", "time": a.start, "trial_id": record.trial_id, "attempt": 0,
                        "slots": [0], "hosts": ["n0"], "size": 1})
        journal.append({"event": "trial_finished", "time": a.end, "trial_id": record.trial_id, "attempt": 0,
                        "result": a.result})
    return journal


def test_importance_finds_what_drives_the_objective_and_the_cost():
    found = {f.target: f for f in campaign_importances(synthetic_campaign(300), SearchSpace.from_dict(SPACE))}
    assert set(found) == {"objective", "slot_seconds"}
    objective = found["objective"].params
    assert objective[0].key == LR and objective[0].importance > 0.5
    assert objective[0].rank_stability == 1.0 and objective[0].low > 0.5
    by_key = {p.key: p for p in objective}
    assert by_key[HIDDEN].importance > by_key[LAYERS].importance
    assert by_key[LAYERS].importance < 0.1 and by_key[TYPE].importance < 0.1
    for p in objective:
        assert 0.0 <= p.low <= p.high <= 1.0
    cost = found["slot_seconds"].params
    assert cost[0].key == HIDDEN and cost[0].importance > 0.8
    text = format_importances(list(found.values()), short=lambda k: k.rsplit(".", 1)[1])
    assert "importance for objective (PED-ANOVA, 300 completed trials" in text
    assert text.splitlines()[1].split()[0] == "learning_rate"


def test_too_few_trials_give_no_estimate():
    assert campaign_importances(synthetic_campaign(15), SearchSpace.from_dict(SPACE)) == []


def test_report_shows_the_importances(tmp_path):
    from hpo.report import write_report

    write_journal(tmp_path, synthetic_campaign(60, seed=2)).close()
    files = write_report(tmp_path)
    assert "importance for objective (PED-ANOVA, 60 completed trials" in files.text
    assert "importance for slot_seconds" in files.text
    assert files.importance_png is not None and files.importance_png.read_bytes()[:4] == b"\x89PNG"
    assert files.importance_png.stat().st_size > 10_000


def test_watch_rewrites_the_report_until_the_campaign_finishes(tmp_path):
    """``report --watch``: each refresh reads the journal as it is (no lock); the loop ends with the
    refresh after campaign_finished is journaled."""
    from hpo_testdata import sample_events

    from hpo.journal import Journal
    from hpo.report import watch_report

    journal = Journal(tmp_path / "journal.jsonl")
    for event in sample_events():
        journal.append(event)
    seen: list[str] = []

    def sleep(_: float) -> None:  # the campaign goes on between refreshes
        if len(seen) == 2:
            journal.append({"event": "campaign_finished", "time": 1050.0, "reason": "max_trials (12) finished"})

    files = watch_report(tmp_path, 0.01, sleep=sleep, on_refresh=lambda f: seen.append(f.text.splitlines()[0]))
    journal.close()
    assert len(seen) == 3 and files.html.exists()
    assert "campaign finished: max_trials (12) finished" in files.text


def test_stopped_trials_count_at_the_fidelity_they_reached():
    """An ASHA-like campaign: 40 trials, 30 stopped after 3 epochs, 10 completed after 9. Completed
    ones are too few for an estimate; every trial reached epoch 3, where the curves are driven by
    the learning rate: the importance at epoch 3 over all 40 finds it."""
    rng = random.Random(5)
    events = [{"event": "campaign_started", "time": 0.0, "campaign": {"search_space": SPACE},
               "resume": False, "ranks": 2, "slots": 1}]
    for i in range(40):
        p = {TYPE: rng.choice(["GIN", "PNA", "SchNet"]), HIDDEN: 16 * rng.randint(1, 8),
             LAYERS: rng.randint(1, 6), LR: 10 ** rng.uniform(-4, -2)}
        base = (math.log10(p[LR]) + 3.0) ** 2 + rng.gauss(0, 0.02)
        epochs = 9 if i < 10 else 3
        t = 100.0 * i
        events += [{"event": "trial_suggested", "time": t, "trial_id": i, "params": p, "attempt": 0},
                   {"event": "trial_started", "time": t, "trial_id": i, "attempt": 0, "slots": [0],
                    "hosts": ["n0"], "size": 1}]
        events += [{"event": "trial_progress", "time": t + e, "trial_id": i, "attempt": 0, "epoch": e,
                    "objective": base + 1.0 / e} for e in range(1, epochs + 1)]
        status = "completed" if epochs == 9 else "stopped"
        events.append({"event": "trial_finished", "time": t + 10, "trial_id": i, "attempt": 0,
                       "result": {**result(status, base + 1.0 / epochs, 10.0, None if epochs == 9 else "asha"),
                                  "epochs": epochs}})
    found = campaign_importances(CampaignState.replay(events), SearchSpace.from_dict(SPACE))
    assert [f.target for f in found] == ["objective at epoch 3"]
    at_3 = found[0]
    assert at_3.num_trials == 40 and at_3.params[0].key == LR and at_3.params[0].importance > 0.5
    text = format_importances(found)
    assert "importance for objective at epoch 3 (PED-ANOVA, 40 trials that reached it, stopped ones included" in text
