"""Population-based training's exploit-and-explore decision (hpo.pbt), its campaign checks, and its
journal event folded into the state (params replaced, lineage kept)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hpo_testdata import SPACE

from hpo.campaign import CampaignConfigError, load_campaign
from hpo.events import TrialExploited, event_from_json
from hpo.optimizers import make_optimizer
from hpo.pbt import Exploit, Exploiter, Member, PbtOptions
from hpo.space import SearchSpace
from hpo.state import CampaignState

LR = "NeuralNetwork.Training.Optimizer.learning_rate"
BATCH = "NeuralNetwork.Training.batch_size"
WIDTH = "NeuralNetwork.Architecture.hidden_dim"
KIND = "NeuralNetwork.Architecture.mpnn_type"
PBT_SPACE = SearchSpace.from_dict({
    KIND: {"type": "categorical", "choices": ["GIN", "PNA", "SchNet"]},
    WIDTH: {"type": "int", "low": 16, "high": 128, "step": 16},
    LR: {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
    BATCH: {"type": "categorical", "choices": [16, 32, 64, 128]},
})


def params(i: int) -> dict:
    return {KIND: ["GIN", "PNA", "SchNet"][i % 3], WIDTH: 16 * (i + 1), LR: 1e-3 * (i + 1), BATCH: [16, 32, 64, 128][i % 4]}


def population(values: list[float | None], epoch: int = 4) -> list[Member]:
    return [Member(i, params(i), epoch, v) for i, v in enumerate(values)]


def exploiter(seed: int = 0, **options) -> Exploiter:
    return Exploiter(PbtOptions.parse({"interval": 2, **options}), PBT_SPACE, seed)


def test_the_bottom_quantile_exploits_the_top_quantile_only_at_interval_epochs():
    rule = exploiter(quantile=0.25)
    pop = population([0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4])  # ranked: 1, 5, 3, 7, 0, 4, 6, 2
    # k = floor(0.25 x 8) = 2: trials 6 and 2 are the bottom, 1 and 5 the top
    decided = {t: rule.decide(t, 4, pop) for t in range(8)}
    assert {t for t, d in decided.items() if d is not None} == {2, 6}
    assert {decided[2].donor_id, decided[6].donor_id} <= {1, 5}
    assert rule.decide(2, 3, pop) is None  # not a multiple of the interval
    # members with fewer than `interval` epochs are not ranked, nor is a trial ranking alone
    assert rule.decide(2, 2, [Member(2, params(2), 2, 9.0), Member(1, params(1), 1, 0.1)]) is None
    # a non-finite objective ranks last and never donates
    d = rule.decide(0, 4, population([None, 0.1, 0.2, 0.3]))
    assert d is not None and d.donor_id == 1
    # a tie is no reason to take over: two clones of one donor that trained alike stay as they are
    assert rule.decide(1, 4, population([0.5, 0.5])) is None and rule.decide(0, 4, population([0.5, 0.5])) is None


def test_the_new_params_are_the_donors_with_only_the_perturbable_keys_moved_within_the_space():
    rule = exploiter(resample_probability=0.0)
    donor = params(3)
    lrs, batches = set(), set()
    for epoch in range(2, 400, 2):
        d = rule.decide(0, epoch, [Member(0, params(0), epoch, 9.0), Member(3, donor, epoch, 0.1)])
        assert d is not None and (d.donor_id, d.donor_epoch) == (3, epoch)
        assert d.params[KIND] == donor[KIND] and d.params[WIDTH] == donor[WIDTH]  # architecture: inherited
        assert d.params[LR] in (pytest.approx(donor[LR] * 0.8), pytest.approx(donor[LR] * 1.2))
        lrs.add(round(d.params[LR] / donor[LR], 6))
        batches.add(d.params[BATCH])
        PBT_SPACE.validate(d.params)
    assert lrs == {0.8, 1.2} and batches == {64, 128}  # donor 128, the last choice: one down, or clipped
    # clipped to the space; with resampling always, a fresh draw anywhere in it
    top = dict(donor, **{LR: 1e-2})
    for epoch in range(2, 100, 2):
        d = rule.decide(0, epoch, [Member(0, params(0), epoch, 9.0), Member(3, top, epoch, 0.1)])
        assert d.params[LR] <= 1e-2 and d.params[LR] in (pytest.approx(1e-2), pytest.approx(8e-3))
    always = exploiter(resample_probability=1.0)
    drawn = [always.decide(0, e, [Member(0, params(0), e, 9.0), Member(3, donor, e, 0.1)]).params[LR]
             for e in range(2, 200, 2)]
    assert all(1e-4 <= v <= 1e-2 for v in drawn) and min(drawn) < 5e-4 and max(drawn) > 5e-3


def test_the_decision_is_a_function_of_seed_trial_and_epoch():
    pop = population([0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4])
    first = [exploiter(seed=5).decide(t, 6, pop) for t in range(8)]
    again = [exploiter(seed=5).decide(t, 6, list(reversed(pop))) for t in range(8)]  # any order of members
    assert first == again
    others = [exploiter(seed=6).decide(t, e, pop) for t in (2, 6) for e in range(2, 40, 2)]
    mine = [exploiter(seed=5).decide(t, e, pop) for t in (2, 6) for e in range(2, 40, 2)]
    assert others != mine


def test_options_and_campaign_checks(campaign_files):
    with pytest.raises(ValueError, match="interval must be an integer >= 1"):
        PbtOptions.parse({"interval": 0})
    with pytest.raises(ValueError, match="unknown option 'period'"):
        PbtOptions.parse({"period": 2})
    with pytest.raises(CampaignConfigError, match="early_stopping.method 'asha'.*set early_stopping.method: none"):
        load_campaign(campaign_files(optimizer={"name": "pbt"}, early_stopping={"method": "asha"}))
    no_perturbable = {k: v for k, v in SPACE.items() if k != LR}
    with pytest.raises(CampaignConfigError, match="no key PBT may perturb"):
        load_campaign(campaign_files(optimizer={"name": "pbt"}, search_space=no_perturbable))
    with pytest.raises(CampaignConfigError, match="population 4 and max_trials 12"):
        load_campaign(campaign_files(optimizer={"name": "pbt", "options": {"population": 4}}))
    with pytest.raises(CampaignConfigError, match="optimizer 'pbt': quantile"):
        load_campaign(campaign_files(optimizer={"name": "pbt", "options": {"quantile": 0.9}}))
    config = load_campaign(campaign_files(optimizer={"name": "pbt", "options": {"interval": 3}}))
    assert config.pbt.interval == 3 and not config.moves_trials
    assert load_campaign(campaign_files()).pbt is None
    suggestions = make_optimizer("pbt", config.space, 3).ask(12)
    assert len({s.params[LR] for s in suggestions}) == 12  # the population: random draws


def test_the_journal_event_round_trips_and_replaces_the_params_keeping_lineage():
    new = dict(params(1), **{LR: 0.0024})
    event = TrialExploited(time=5.0, trial_id=0, attempt=0, epoch=4, donor_id=1, donor_epoch=4, params=new)
    assert event_from_json(event.to_json()) == event
    records = [
        {"event": "campaign_started", "time": 1.0, "campaign": {"search_space": PBT_SPACE.to_dict(), "max_trials": 2},
         "resume": False, "ranks": 3, "slots": 2},
        {"event": "trial_suggested", "time": 1.0, "trial_id": 0, "params": params(0), "attempt": 0},
        {"event": "trial_started", "time": 1.0, "trial_id": 0, "attempt": 0, "slots": [0], "hosts": ["h"], "size": 1},
        event.to_json(),
        {"event": "trial_started", "time": 5.0, "trial_id": 0, "attempt": 1, "slots": [0], "hosts": ["h"], "size": 1},
    ]
    state = CampaignState.replay(records)
    record = state.trials[0]
    assert record.params == new
    (step,) = record.lineage
    assert (step.epoch, step.donor_id, step.donor_epoch, step.params_before, step.text()) == (4, 1, 4, params(0), "4:1@4")
    assert record.attempts[0].moved_after == 4 and record.status == "running"
    assert math.isclose(record.params[LR], 0.0024)


def test_report_prints_the_lineage_and_an_older_manifest_member_loads_without_one():
    from ensemble.manifest import MemberEntry
    from hpo.report import format_summary, summarize

    new = dict(params(1), **{LR: 0.0024})
    records = [
        {"event": "campaign_started", "time": 1.0, "campaign": {"search_space": PBT_SPACE.to_dict(), "max_trials": 2},
         "resume": False, "ranks": 3, "slots": 2},
        {"event": "trial_suggested", "time": 1.0, "trial_id": 0, "params": params(0), "attempt": 0},
        {"event": "trial_started", "time": 1.0, "trial_id": 0, "attempt": 0, "slots": [0], "hosts": ["h"], "size": 1},
        TrialExploited(time=5.0, trial_id=0, attempt=0, epoch=4, donor_id=1, donor_epoch=3, params=new).to_json(),
    ]
    text = format_summary(summarize(CampaignState.replay(records + records[-1:])))  # written twice: once
    assert "population-based training: 1 trials exploited others" in text
    assert "  trial 0: after epoch 4 took trial 1 (its epoch 3)" in text
    assert text.count("took trial") == 1
    old = {"trial_id": 3, "checkpoint": "members/trial_3.pt", "sha256": "0" * 64, "weight": 1.0, "config": {},
           "radius": 5.0}
    assert MemberEntry.model_validate(old).lineage == []
    assert MemberEntry.model_validate(dict(old, lineage=["4:1@3"])).lineage == ["4:1@3"]
