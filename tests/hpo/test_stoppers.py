"""Stoppers: ASHA decision for decision as Optuna's SuccessiveHalvingPruner on the same learning
curves; the i-epoch baseline, the median rule and the multi-objective rule on curves whose answer
is known; replays rebuild the same decisions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpo.stoppers import (
    STOPPERS,
    AshaStopper,
    IEpochStopper,
    MedianStopper,
    NoStopper,
    ParetoAshaStopper,
    Stopper,
    discarding_stopper,
    front_index,
    make_stopper,
)


def curves(num_trials: int, epochs: int, seed: int) -> dict[int, list[float]]:
    """Noisy decreasing learning curves with different final levels and speeds."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in range(num_trials):
        level, scale, speed = rng.uniform(0.1, 1.0), rng.uniform(0.5, 2.0), rng.uniform(0.5, 2.0)
        out[t] = [float(level + scale / (1 + speed * e) + rng.normal(0, 0.02)) for e in range(epochs)]
    return out


def schedule(num_trials: int, epochs: int, parallel: int, seed: int):
    """(trial, epoch) reports in an asynchronous order: ``parallel`` trials run at once, each
    reports its epochs in order, a new trial starts when one ends; yields and learns stops."""
    rng = np.random.default_rng(seed + 1)
    waiting = list(range(num_trials))
    running = {waiting.pop(0): 0 for _ in range(min(parallel, num_trials))}
    while running:
        trial = int(rng.choice(sorted(running)))
        running[trial] += 1
        stopped = yield trial, running[trial]
        if stopped or running[trial] == epochs:
            del running[trial]
            if waiting:
                running[waiting.pop(0)] = 0


@pytest.mark.parametrize("min_epochs,reduction_factor,rate", [(1, 3, 0), (1, 2, 0), (2, 3, 1)])
def test_asha_makes_optunas_successive_halving_decisions(min_epochs, reduction_factor, rate):
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    num_trials, epochs = 40, 27
    values = curves(num_trials, epochs, seed=reduction_factor + rate)
    study = optuna.create_study(
        sampler=optuna.samplers.RandomSampler(seed=0),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=min_epochs, reduction_factor=reduction_factor,
                                                      min_early_stopping_rate=rate))
    theirs = {}
    ours = AshaStopper(min_epochs, reduction_factor, rate)
    decisions_ours, decisions_theirs = [], []
    order = schedule(num_trials, epochs, parallel=6, seed=reduction_factor)
    stopped = None
    while True:
        try:
            trial, epoch = order.send(stopped)
        except StopIteration:
            break
        if trial not in theirs:
            theirs[trial] = study.ask()
        value = values[trial][epoch - 1]
        theirs[trial].report(value, step=epoch)
        prune = theirs[trial].should_prune()
        stop = ours.report(trial, epoch, value)
        decisions_theirs.append((trial, epoch, prune))
        decisions_ours.append((trial, epoch, stop))
        if prune:
            study.tell(theirs[trial], state=TrialState.PRUNED)
        elif epoch == epochs:
            study.tell(theirs[trial], value)
        stopped = prune
    assert decisions_ours == decisions_theirs
    stops = [d for d in decisions_ours if d[2]]
    assert 10 < len(stops) < num_trials  # the comparison covered real decisions both ways
    assert any(e > min_epochs * reduction_factor ** rate for _, e, s in decisions_ours if s)  # beyond rung 0


def test_asha_expected_fraction_and_rungs():
    asha = AshaStopper(min_epochs=1, reduction_factor=3)
    # 27 epochs: rungs at 1, 3, 9; kept 1, 1/3, 1/9, 1/27 of the trials in the segments
    expected = (1 + (3 - 1) / 3 + (9 - 3) / 9 + (27 - 9) / 27) / 27
    assert asha.expected_fraction(27) == pytest.approx(expected)
    assert AshaStopper(min_epochs=5).expected_fraction(5) == 1.0
    # the first trial at a rung goes on; a worse second one stops; a re-run starts at rung 0 again
    assert not asha.report(0, 1, 0.5) and asha.report(1, 1, 0.9)
    assert not asha.report(1, 1, 0.1)  # re-run of trial 1 (epoch 1 again): judged afresh
    assert asha.report(2, 1, math.nan)


def test_i_epoch_keeps_the_best_third_after_its_epochs():
    stopper = IEpochStopper(epochs=2, keep=1 / 3)
    values = [0.5, 0.7, 0.3, 0.9, 0.4, 0.8]
    decisions = []
    for t, v in enumerate(values):
        assert not stopper.report(t, 1, 10.0)  # before the decision epoch nothing stops
        decisions.append(stopper.report(t, 2, v))
        assert not stopper.report(t, 3, 99.0)  # decided once
    # trial t goes on when it is within the best ceil(n/3) of the n values seen so far
    assert decisions == [False, True, False, True, False, True]
    assert stopper.expected_fraction(10) == pytest.approx((2 + 8 / 3) / 10)


def test_median_rule_needs_enough_trials():
    stopper = MedianStopper(min_epochs=2, min_trials=3)
    for t, v in enumerate([0.1, 0.2, 0.3]):
        assert not stopper.report(t, 2, v)
    assert stopper.report(3, 2, 0.25)  # median of 0.1, 0.2, 0.3 is 0.2
    assert not stopper.report(4, 2, 0.15)
    assert not stopper.report(5, 1, 99.0)  # before min_epochs


def test_pareto_asha_keeps_trade_offs_and_stops_the_dominated():
    assert front_index([(1, 1), (2, 2), (0, 3), (3, 0), (2, 3)]) == [0, 1, 0, 0, 2]
    stopper = ParetoAshaStopper(min_epochs=1, reduction_factor=3)
    # error vs inference cost: three trade-offs go on, a trial worse in both than several stops
    assert not stopper.report(0, 1, (0.10, 5.0))
    assert not stopper.report(1, 1, (0.30, 1.0))
    assert not stopper.report(2, 1, (0.20, 2.0))
    assert stopper.report(3, 1, (0.35, 6.0))  # dominated by all three
    assert not stopper.report(4, 1, (0.05, 9.0))  # a new extreme of the front


@pytest.mark.parametrize("stopper", [AshaStopper(1, 3), AshaStopper(2, 2, 1), IEpochStopper(epochs=4),
                                     ParetoAshaStopper(1, 3), MedianStopper(min_epochs=2)],
                         ids=lambda s: f"{s.name}")
def test_a_stopper_stops_only_at_its_decision_epochs(stopper):
    """The trainer waits for the verdict only after ``decision_epochs``: a stopper that names them
    must never stop a trial elsewhere (else that stop lands an epoch late); one that may stop
    anywhere (the median rule) names none, and its trials never wait."""
    epochs = 27
    values = curves(40, epochs, seed=3)
    multi = isinstance(stopper, ParetoAshaStopper)
    order = schedule(40, epochs, parallel=6, seed=3)
    stopped, stop_epochs = None, set()
    while True:
        try:
            trial, epoch = order.send(stopped)
        except StopIteration:
            break
        value = values[trial][epoch - 1]
        stopped = stopper.report(trial, epoch, (value, float(trial % 5)) if multi else value)
        if stopped and epoch < epochs:  # a stop at the last epoch changes nothing
            stop_epochs.add(epoch)
    decisions = stopper.decision_epochs(epochs)
    assert stop_epochs  # the schedule made the stopper decide
    if isinstance(stopper, MedianStopper):
        assert decisions == () and len(stop_epochs) > 3
    else:
        assert stop_epochs <= set(decisions) and max(decisions) < epochs
    expected = {"asha": {(1, 3): (1, 3, 9), (2, 2): (4, 8, 16)}, "i-epoch": (4,), "pareto-asha": (1, 3, 9)}
    if isinstance(stopper, AshaStopper):
        assert decisions == expected["asha"][(stopper.min_epochs, stopper.reduction_factor)]
    elif stopper.name in expected:
        assert decisions == expected[stopper.name]


def test_replaying_the_reports_rebuilds_the_decisions():
    values = curves(20, 9, seed=5)
    reports = [(t, e, values[t][e - 1]) for e in range(1, 10) for t in range(20)]
    first = AshaStopper(1, 3)
    decided = {}
    for t, e, v in reports:
        if t not in decided:
            if first.report(t, e, v):
                decided[t] = e
    again = AshaStopper(1, 3)
    replayed = {}
    for t, e, v in reports:
        if t not in replayed and again.report(t, e, v):
            replayed[t] = e
    assert replayed == decided and decided


def test_replay_skips_the_epochs_a_trial_finished_while_its_stop_was_on_the_way():
    """The journal also holds the epochs a trial finished between the stop decision and the stop
    reaching it; the live stopper never saw them, so a resumed campaign's replay must not either
    (a naive replay files them at later rungs and then decides differently: CI caught that)."""
    values = curves(30, 9, seed=11)
    live, journal, decided = AshaStopper(1, 3), [], {}
    for t in range(24):
        for e in range(1, 10):
            journal.append((t, e, values[t][e - 1]))
            if t in decided:
                if e >= decided[t] + 2:  # two more epochs reported after the stop, then it ends
                    break
                continue
            if live.report(t, e, values[t][e - 1]):
                decided[t] = e
    naive = AshaStopper(1, 3)
    for t, e, v in journal:
        naive.report(t, e, v)
    replayed = AshaStopper(1, 3)
    assert replayed.replay(journal) == decided and decided
    # the trials after the resume are judged as the uninterrupted campaign would have judged them
    later = [(t, e, values[t][e - 1]) for t in range(24, 30) for e in range(1, 10)]
    expected = [live.report(*r) for r in later]
    assert [replayed.report(*r) for r in later] == expected
    assert [naive.report(*r) for r in later] != expected  # what this test guards against


def run_schedule(stopper: Stopper, epochs: int, seed: int) -> list[tuple[int, int, object, bool]]:
    """Drive ``stopper`` through an asynchronous campaign of 40 trials (finite values; pairs with the
    trial's seconds for a stopper of two objectives); the reports ``(trial, epoch, value, stop)``."""
    values = curves(40, epochs, seed=seed)
    order = schedule(40, epochs, parallel=6, seed=seed)
    reports, stopped = [], None
    while True:
        try:
            trial, epoch = order.send(stopped)
        except StopIteration:
            return reports
        value = values[trial][epoch - 1]
        value = (value, float(epoch * (1 + trial % 5))) if stopper.objectives == 2 else value
        stopped = stopper.report(trial, epoch, value)
        reports.append((trial, epoch, value, stopped))


@pytest.mark.parametrize("method", sorted(STOPPERS))
def test_every_registered_stopper_keeps_the_contract(method):
    """What any stopper must do (:class:`hpo.stoppers.Stopper`), useful or not: it is built from its
    example options and refuses an unknown one; its answers are booleans; it never stops a trial
    before the first epoch it judges at, and where it names decision epochs only at them; its
    expected fraction is a share of the budget; a replay of the reports gives the same decisions.
    One that does not discard never stops a trial and the campaign runs without it."""
    epochs = 27
    options = dict(STOPPERS[method].EXAMPLE_OPTIONS)
    stopper = make_stopper(method, options)
    assert isinstance(stopper, Stopper) and stopper.name == method and stopper.objectives in (1, 2)
    with pytest.raises(ValueError, match=f"{method} does not accept"):
        make_stopper(method, {**options, "no_such_option": 1})
    reports = run_schedule(stopper, epochs, seed=3)
    assert all(isinstance(stop, bool) for *_, stop in reports)
    stops = {(trial, epoch) for trial, epoch, _, stop in reports if stop}
    decisions = stopper.decision_epochs(epochs)
    assert all(1 <= e < epochs for e in decisions) and 1 <= stopper.first_judged_epoch(epochs) <= epochs
    assert all(epoch >= stopper.first_judged_epoch(epochs) for _, epoch in stops)
    if decisions:
        assert {epoch for _, epoch in stops if epoch < epochs} <= set(decisions)
    assert 0.0 < stopper.expected_fraction(epochs) <= 1.0
    replayed = make_stopper(method, options).replay((t, e, v) for t, e, v, _ in reports)
    assert set(replayed.items()) == stops
    if not stopper.discards:
        assert stops == set() and decisions == () and stopper.expected_fraction(epochs) == 1.0
        assert discarding_stopper(method, options) is None
    else:
        assert discarding_stopper(method, options) is not None


def test_none_is_the_registered_stopper_that_never_stops():
    stopper = make_stopper("none", {})
    assert isinstance(stopper, NoStopper) and not stopper.discards
    assert not any(stopper.report(t, e, v) for t in range(5) for e in range(1, 10) for v in (1e9, math.nan))
    assert stopper.first_judged_epoch(9) == 9 and stopper.decision_epochs(9) == ()


def test_make_stopper_names_bad_input():
    assert isinstance(make_stopper("asha", {"min_epochs": 2}), AshaStopper)
    with pytest.raises(ValueError, match="choose one of"):
        make_stopper("hyperband", {})
    with pytest.raises(ValueError, match="asha does not accept"):
        make_stopper("asha", {"keep": 0.5})


def test_a_stopped_trial_is_told_to_optuna_as_pruned_at_its_epoch():
    from hpo.optimizers.optuna_tpe import OptunaTPE
    from hpo.space import SearchSpace

    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0.0, "high": 1.0}})
    opt = OptunaTPE(space, seed=0)
    first, second = opt.ask(2)
    opt.tell(first.suggestion_id, 0.5, stopped_after=3)
    opt.tell(second.suggestion_id, 0.2)
    trials = opt.study.get_trials()
    assert [t.state.name for t in trials] == ["PRUNED", "COMPLETE"]
    assert trials[0].intermediate_values == {3: 0.5} and trials[1].value == 0.2
    assert opt.best_objective == 0.2 and opt.num_told == 2
