"""Issue #27: waiting trials sized again as the cost model learns, error models measured on a
journal, and load-aware's duration order."""

import json
import math

import pytest

from scheduler.cost_model import CostModel
from scheduler.dataset_stats import DatasetStats
from scheduler.efficiency import ParallelEfficiency
from scheduler.placement.base import TrialRequest
from scheduler.placement.fifo import FifoSkipPolicy
from scheduler.placement.load_aware import LoadAwarePolicy
from scheduler.resources import ResourcePool
from scheduler.simulator import SimConfig, generate_workload, simulate
from scheduler.simulator.error_model import ErrorModelError, LognormalError, ReplayedError
from scheduler.simulator.workload import SIM_ANCHORS


def test_update_keeps_fifo_order_and_load_aware_work():
    fifo = FifoSkipPolicy()
    for tid in range(3):
        fifo.submit(TrialRequest(tid, 1, 10.0))
    fifo.update(TrialRequest(0, 2, 99.0))
    assert [(r.trial_id, r.slots) for r in fifo.pending] == [(0, 2), (1, 1), (2, 1)]
    with pytest.raises(KeyError, match="trial 7 is not pending"):
        fifo.update(TrialRequest(7, 1, 1.0))

    la = LoadAwarePolicy()
    la.submit(TrialRequest(0, 1, 100.0))
    la.submit(TrialRequest(1, 1, 50.0))
    pool = ResourcePool(1, 1)
    assert la.ideal_finish(pool, 0.0) == pytest.approx(150.0)
    la.update(TrialRequest(1, 1, 400.0))  # learnt: trial 1 is the long one
    assert la.ideal_finish(pool, 0.0) == pytest.approx(500.0)
    assert [d.trial_id for d in la.schedule(pool, 0.0)] == [1]


def test_longest_duration_starts_first_and_work_order_is_an_option():
    # one node of 8 slots: a narrow long trial (work 1000) and a full-node short one (work 1600)
    requests = [TrialRequest(0, 1, 1000.0), TrialRequest(1, 8, 200.0)]
    for policy, first in ((LoadAwarePolicy(), 0), (LoadAwarePolicy(tail_margin=2.0, by_duration=False), 1)):
        for r in requests:
            policy.submit(r)
        assert [d.trial_id for d in policy.schedule(ResourcePool(1, 8), 0.0)] == [first]


def _learning_run(error_model, learn_after=2):
    # a campaign sized for this 32-node cluster: trials of up to 4 nodes, about 20 waves of them
    model = CostModel(DatasetStats(num_graphs=20_000, mean_nodes=30.0, mean_edges=600.0), device_speedup=30.0,
                      efficiency=ParallelEfficiency(slots_per_node=8), anchors=SIM_ANCHORS)
    work = generate_workload(300, 32, 8, 1.2, seed=3, error_model=error_model, max_trial_nodes=4, cost_model=model)
    seen = {"learnt": 0, "first": 0}
    by_id = {t.trial_id: t for t in work}

    def hook(state):
        for req in state.policy.pending:  # what placement is told is one of the trial's two predictions
            t = by_id[req.trial_id]
            if t.learnt_seconds is not None and req.predicted_seconds == pytest.approx(t.learnt_seconds):
                seen["learnt"] += 1
            else:
                assert req.predicted_seconds == pytest.approx(t.predicted_seconds)
                seen["first"] += 1
    summary = simulate(work, SimConfig(nodes=32, gpus_per_node=8, seed=3, learn_after=learn_after), hook=hook).summary
    return summary, seen


def test_waiting_trials_are_sized_again_once_the_model_learnt():
    learnt, seen = _learning_run(LognormalError(1.2, 0.0))  # once learnt, predictions are exact
    assert learnt["repriced_trials"] > 50 and seen["learnt"] > 0 and seen["first"] > 0
    never, seen_never = _learning_run(LognormalError(1.2))  # the same trials, no learning
    assert never["repriced_trials"] == 0 and seen_never["learnt"] == 0
    # the same trials placed on what was learnt finish sooner
    assert learnt["makespan_s"] < 0.9 * never["makespan_s"]  # measured: 15,266 s against 18,565 s
    assert learnt["utilisation"] > never["utilisation"] + 0.1  # measured: 96% against 79%


def test_lognormal_error_model_keeps_the_trials():
    plain = generate_workload(50, 16, 8, 0.8, seed=1)
    learning = generate_workload(50, 16, 8, 0.8, seed=1, error_model=LognormalError(0.8, 0.3))
    assert [(t.slots, t.true_seconds) for t in plain] == [(t.slots, t.true_seconds) for t in learning]
    assert all(t.learnt_seconds is None for t in plain)
    ratios = [math.log(t.true_seconds / t.learnt_seconds) for t in learning if t.true_seconds < t.time_limit_s]
    assert 0.1 < max(abs(r) for r in ratios) < 1.5
    with pytest.raises(ValueError, match="sigma must be >= 0"):
        LognormalError(-0.1)


def _journal(path, ratios):
    lines = []
    for tid, r in enumerate(ratios):
        lines.append({"event": "trial_started", "trial_id": tid, "attempt": 0, "slots": [0], "hosts": ["h"],
                      "size": 1, "predicted_epoch_s": 2.0})
        for epoch in (1, 2, 3):
            lines.append({"event": "trial_progress", "trial_id": tid, "attempt": 0, "epoch": epoch,
                          "objective": 0.5, "epoch_s": 2.0 * math.exp(r) * (1.0 + 0.01 * (epoch - 2))})
    lines.append({"event": "trial_progress", "trial_id": 99, "attempt": 0, "epoch": 1, "objective": 0.5,
                  "epoch_s": 5.0})  # never started
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_replayed_error_model_from_a_journal(tmp_path):
    path = tmp_path / "journal.jsonl"
    first = [1.0, 2.0, 0.5, 1.5]
    learnt = [0.1, -0.1, 0.2, 0.0, 0.3]
    _journal(path, first + learnt)
    model = ReplayedError.from_journal(path, learn_after=4)
    assert model.first_bias == pytest.approx(1.25) and model.learnt_bias == pytest.approx(0.1)
    assert sorted(model.first_log_ratios) == pytest.approx(sorted(x - 1.25 for x in first))
    assert sorted(model.learnt_log_ratios) == pytest.approx(sorted(x - 0.1 for x in learnt))
    assert "first 4 trials" in model.describe() and "learnt 5" in model.describe()
    work = generate_workload(40, 16, 8, 0.0, seed=0, error_model=model)
    allowed = {round(x, 6) for x in model.first_log_ratios}
    for t in work:
        if max(t.true_seconds, t.predicted_seconds) < t.time_limit_s:  # neither cut by the time limit
            assert round(math.log(t.true_seconds / t.predicted_seconds), 6) in allowed
    with pytest.raises(ErrorModelError, match="more than learn_after=9"):
        ReplayedError.from_journal(path, learn_after=9)
    good = path.read_text().splitlines()[0]
    path.write_text(f"{good}\nnot json\n{good}\n")
    with pytest.raises(ErrorModelError, match=r"journal.jsonl: line 2 is not a complete JSON event \(not JSON"):
        ReplayedError.from_journal(path)


def test_the_stored_demo_journal_gives_the_documented_error_model():
    model = ReplayedError.from_journal("bench/data/demo_cost_journal.jsonl")
    assert len(model.first_log_ratios) == 10 and len(model.learnt_log_ratios) == 20
    assert model.first_bias == pytest.approx(0.57, abs=0.01) and model.learnt_bias == pytest.approx(0.12, abs=0.01)


def test_a_reprice_pass_is_spread_over_turns_and_reaches_every_waiting_trial(monkeypatch):
    """With at most 16 trials sized again per turn, the pass still reaches every trial waiting
    when the model learnt (each sized once more, none twice), over several turns; rank 0's work per
    turn stays bounded whatever the waiting pool."""
    from scheduler.loop import TrialBook, TrialSpec
    from scheduler.sizing import SizedTrial

    class CountingSizer:
        def __init__(self):
            self.asked: list[int] = []

        def choose(self, params):
            self.asked.append(params["i"])
            return SizedTrial(1, 5.0)

    sizer = CountingSizer()
    book = TrialBook(ResourcePool(1, 1), LoadAwarePolicy(), sizer, 0.0)
    for i in range(50):
        book.submit(TrialSpec(i, {"i": i}, sized=SizedTrial(1, 10.0)), 0.0)
    book.request_reprice()
    changed = [book.reprice(0.0, 16) for _ in range(4)]
    assert changed == [16, 16, 16, 2] and not book.repricing
    assert sorted(sizer.asked) == list(range(50))
    assert all(spec.sized.predicted_seconds == 5.0 for spec in book.waiting.values())
