"""The campaign loop under PBT: at an interval epoch the worst running trial is exploited (one
action, nothing journaled yet); when it has stopped, its continuation starts on the same slot as
the next attempt with the donor's epoch and the new parameters, and ``trial_exploited`` is
journaled; a resumed loop ranks with the earlier runs' reports."""

from __future__ import annotations

from test_resumed_attempts import Actions, Sizer, report

from hpo.events import TrialExploited, TrialStarted
from hpo.pbt import Exploiter, PbtOptions
from hpo.space import SearchSpace
from scheduler.loop import CampaignLoop, LoopRules, TrialSpec
from scheduler.placement import make_policy
from scheduler.resources import ResourcePool
from scheduler.sizing import SizedTrial

LR = "NeuralNetwork.Training.Optimizer.learning_rate"
SPACE = SearchSpace.from_dict({LR: {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
                               "NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 8, "high": 64}})


class PbtActions(Actions):
    def __init__(self) -> None:
        super().__init__()
        self.exploits: list = []
        self.started: list[TrialSpec] = []

    def exploit_trial(self, rt, exploit) -> None:
        self.exploits.append(exploit)

    def start(self, rt, sent_ahead=None) -> None:
        self.started.append(rt.spec)


def pbt_loop(history=()) -> tuple[CampaignLoop, PbtActions]:
    actions = PbtActions()
    rules = LoopRules(max_trials=4, slots_per_node=4,
                      pbt=Exploiter(PbtOptions.parse({"interval": 2, "resample_probability": 0.0}), SPACE, 7))
    loop = CampaignLoop(rules, ResourcePool(1, 4), make_policy("fifo"), Sizer(), actions, next_trial_id=4,
                        progress_history=history)
    loop.resubmit([TrialSpec(t, {LR: 0.001 * (t + 1), "NeuralNetwork.Architecture.hidden_dim": 8 * (t + 1)},
                             sized=SizedTrial(1, 20.0, epochs=10)) for t in range(4)], 0.0)
    assert loop.start_waiting(0.0) == 4
    loop.take_events()
    actions.started.clear()
    return loop, actions


def test_the_worst_trial_takes_over_the_best_and_continues_as_its_next_attempt():
    loop, actions = pbt_loop()
    for t, value in [(0, 0.4), (2, 0.3), (3, 0.2), (1, 0.1)]:  # each better than those before: none is the worst
        loop.trial_progress(t, 0, [report(1, value), report(2, value)], now=5.0)
    assert actions.exploits == []
    loop.trial_progress(0, 0, [report(3, 0.4)], now=6.0)  # not an interval epoch
    assert actions.exploits == []
    loop.trial_progress(0, 0, [report(4, 0.4)], now=7.0)
    (exploit,) = actions.exploits  # trial 0 (0.4) is the worst quarter, trial 1 (0.1) the best
    assert (exploit.trial_id, exploit.epoch, exploit.donor_id, exploit.donor_epoch) == (0, 4, 1, 2)
    assert exploit.params["NeuralNetwork.Architecture.hidden_dim"] == 16
    assert exploit.params[LR] in (0.002 * 0.8, 0.002 * 1.2)
    assert not [e for e in loop.take_events() if isinstance(e, TrialExploited)]  # journaled when it happens
    loop.trial_progress(0, 0, [report(5, 0.4)], now=8.0)  # the epoch it was in when asked
    loop.trial_progress(2, 0, [report(3, 0.3), report(4, 0.3)], now=8.0)  # trial 0 is leaving: 2 ranks last
    assert [e.trial_id for e in actions.exploits] == [0, 2]
    slots = loop.book.running[0].slots
    loop.trial_moved(0, 0, 5, now=9.0)
    (spec,) = actions.started
    assert (spec.trial_id, spec.attempt, spec.resume_epoch, spec.inherit_from, spec.params) == (
        0, 1, 2, 1, exploit.params)
    assert loop.book.running[0].slots == slots and loop.book.pool.free_slots == 0
    events = loop.take_events()
    assert [type(e) for e in events if not hasattr(e, "report")] == [TrialExploited, TrialStarted]
    (journaled,) = [e for e in events if isinstance(e, TrialExploited)]
    assert (journaled.epoch, journaled.donor_id, journaled.donor_epoch, journaled.params) == (4, 1, 2, exploit.params)


def test_a_resumed_loop_ranks_with_the_earlier_reports():
    history = [(t, 2, value, 10.0) for t, value in enumerate([0.4, 0.1, 0.3, 0.2])]
    loop, actions = pbt_loop(history)
    loop.trial_progress(2, 0, [report(4, 0.5)], now=5.0)  # now the worst, against the others' epoch 2
    (exploit,) = actions.exploits
    assert (exploit.trial_id, exploit.donor_id, exploit.donor_epoch) == (2, 1, 2)
