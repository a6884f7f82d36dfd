"""The campaign loop and a re-run that resumed from the trial's training state: its epochs keep
counting (its first report is the epoch after its state's), its start-up and what the sizer learns
count from there, and a stop decided before the restart stands."""

from __future__ import annotations

from hpo.stoppers import AshaStopper
from hydragnn_ensemble.result import EpochReport, TrialResult
from scheduler.loop import CampaignLoop, LoopActions, LoopRules, TrialSpec
from scheduler.placement import make_policy
from scheduler.resources import ResourcePool
from scheduler.sizing import SizedTrial

PARAMS = {"x": 1}


class Sizer:
    """A sizer that records what it is taught."""

    def __init__(self) -> None:
        self.epochs: list[tuple] = []
        self.ends: list[tuple] = []

    def choose(self, params):
        return SizedTrial(1, 20.0, epochs=10)

    def size(self, params):
        return 1, 20.0

    def observe_epoch(self, params, slots, attempt, times, node=None) -> bool:
        self.epochs.append((attempt, times))
        return False

    def observe(self, params, slots, wall_time_s, ok, epochs=None, node=None) -> None:
        self.ends.append((wall_time_s, ok, epochs))

    def larger_than(self, slots):
        return None

    def regrow(self, params, slots, epoch_s):
        return ()


class Actions(LoopActions):
    def __init__(self) -> None:
        self.stops: list[tuple[int, str]] = []

    def start(self, rt, sent_ahead=None) -> None:
        pass

    def send_ahead(self, queued, before) -> None:
        pass

    def stop_trial(self, rt, reason: str) -> None:
        self.stops.append((rt.spec.trial_id, reason))

    def go_on(self, rt, epoch: int) -> None:
        pass

    def move_trial(self, rt, slots: int, at_boundary: bool) -> None:
        pass

    def take_back(self, queued, reason: str) -> None:
        pass

    def tell(self, spec, result, objective) -> None:
        pass


def loop_with(rerun: list[int], stopper=None, history=()) -> tuple[CampaignLoop, Sizer, Actions]:
    """A loop on 4 slots that re-runs ``rerun`` as their attempt 1 (a --resume), started at time 0."""
    sizer, actions = Sizer(), Actions()
    loop = CampaignLoop(LoopRules(max_trials=8, slots_per_node=4), ResourcePool(1, 4), make_policy("fifo"), sizer,
                        actions, stopper=stopper, progress_history=history, next_trial_id=8)
    loop.resubmit([TrialSpec(t, PARAMS, attempt=1, sized=SizedTrial(1, 20.0, epochs=10)) for t in rerun], 0.0)
    assert loop.start_waiting(0.0) == len(rerun)
    return loop, sizer, actions


def report(epoch: int, objective: float = 0.5, epoch_s: float = 2.0) -> EpochReport:
    return EpochReport(epoch, objective, {}, elapsed_s=100.0 + epoch, epoch_s=epoch_s, train_s=1.5)


def test_a_resumed_attempt_counts_its_epochs_from_its_first_report():
    loop, sizer, _ = loop_with([0])
    loop.trial_progress(0, 1, [report(8)], now=10.0)  # resumed after epoch 7
    rt = loop.book.running[0]
    assert rt.resumed_from == 7 and rt.first_epoch == 7
    assert rt.startup_s == 8.0  # 10 s since its start, less one epoch of 2 s
    assert [a for a, _ in sizer.epochs] == [(0, 1)] and sizer.epochs[0][1].startup_s == 8.0  # its 1st epoch
    loop.trial_progress(0, 1, [report(9)], now=12.0)
    assert len(sizer.epochs) == 2  # its 2nd epoch (a power of two)
    assert rt.revised_end == 12.0 + 2.0  # epoch 10 of 10 left, 2 s
    loop.trial_ended(0, TrialResult("completed", objective=0.4, epochs=10, wall_time_s=14.0, resumed_from=7), 14.0)
    assert sizer.ends == [(14.0, True, 3)]  # the epochs this attempt trained


def test_an_attempt_from_scratch_is_unchanged():
    loop, sizer, _ = loop_with([0])
    loop.trial_progress(0, 1, [report(1), report(2)], now=10.0)
    rt = loop.book.running[0]
    assert rt.resumed_from == 0 and rt.startup_s == 6.0
    loop.trial_ended(0, TrialResult("completed", objective=0.4, epochs=10, wall_time_s=30.0), 30.0)
    assert sizer.ends == [(30.0, True, 10)]


def test_a_resumed_attempt_that_trained_nothing_teaches_no_duration():
    loop, sizer, _ = loop_with([0])
    loop.trial_ended(0, TrialResult("completed", objective=0.4, epochs=10, wall_time_s=3.0, resumed_from=10), 3.0)
    assert sizer.ends == [(3.0, False, None)]


def asha_history() -> list[tuple[int, int, float, float]]:
    """Trials 1 and 2 reach the rung at 3 epochs with good values, trial 0 passes the rung at 1
    epoch and reaches it with a bad one: ASHA (rungs 1, 3, 9; keeps a third) tells it to stop
    after epoch 3."""
    history = [(t, e, value, float(e)) for t, value in ((1, 0.1), (2, 0.05)) for e in (1, 2, 3)]
    return history + [(0, 1, 0.01, 1.0), (0, 2, 0.5, 2.0), (0, 3, 0.9, 3.0)]


def test_a_stop_decided_before_the_restart_stands_for_a_resumed_attempt():
    stopper = AshaStopper(1, 3)
    assert AshaStopper(1, 3).replay((t, e, v) for t, e, v, _ in asha_history()) == {0: 3}
    loop, _, actions = loop_with([0], stopper, asha_history())
    before = [dict(r) for r in stopper.rungs.values]
    loop.trial_progress(0, 1, [report(4, objective=0.01)], now=5.0)  # resumed after epoch 3
    assert actions.stops == [(0, "early stopping (asha) after epoch 3, decided before the attempt resumed")]
    assert [dict(r) for r in stopper.rungs.values] == before  # not told again: a replay would not tell it
    assert loop.book.running[0].stopping is not None


def test_a_rerun_from_scratch_is_judged_afresh():
    stopper = AshaStopper(1, 3)
    loop, _, actions = loop_with([0], stopper, asha_history())
    loop.trial_progress(0, 1, [report(1, objective=0.05)], now=5.0)  # started again at epoch 1
    assert actions.stops == [] and loop.book.running[0].stopping is None


def test_the_trial_has_one_curve_over_its_attempts():
    """Attempt 0 reported epochs 1-3 and was cut; attempt 1 resumed after epoch 3 and reported 4-5:
    the journal keeps both attempts, the trial's curve runs 1-5. A re-run from scratch starts it again."""
    from hpo.state import CampaignState

    first, _, _ = loop_with([])
    first.resubmit([TrialSpec(0, PARAMS, attempt=0, sized=SizedTrial(1, 20.0, epochs=10)),
                    TrialSpec(1, PARAMS, attempt=0, sized=SizedTrial(1, 20.0, epochs=10))], 0.0)
    first.start_waiting(0.0)
    first.trial_progress(0, 0, [report(e, objective=1.0 / e) for e in (1, 2, 3)], now=6.0)
    first.trial_progress(1, 0, [report(e, objective=1.0 / e) for e in (1, 2)], now=6.0)
    again, _, _ = loop_with([0, 1])  # the campaign restarted: both re-run as attempt 1
    again.trial_progress(0, 1, [report(e, objective=1.0 / e) for e in (4, 5)], now=4.0)
    again.trial_progress(1, 1, [report(1, objective=2.0)], now=4.0)  # its state was not this trial's
    state = CampaignState()
    for event in first.take_events() + again.take_events():
        state.apply(event)
    resumed, restarted = state.trials[0], state.trials[1]
    assert [e for e, _ in resumed.attempts[0].curve] == [1, 2, 3] and [e for e, _ in resumed.attempts[1].curve] == [4, 5]
    assert resumed.curve == [(e, 1.0 / e) for e in (1, 2, 3, 4, 5)]
    assert restarted.curve == [(1, 2.0)]
