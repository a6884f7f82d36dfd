"""What the runtime tells placement about a trial: size, prediction and moldable alternatives."""

from __future__ import annotations

import pytest

from scheduler.cost_model import TrialFeatures
from scheduler.placement.load_aware import LoadAwarePolicy
from scheduler.resources import ResourcePool
from scheduler.sizing import trial_request
from scheduler.sizing import SizedTrial, runtime_sizer

SIZED = SizedTrial(1, 80.0, alternatives=((2, 41.0), (4, 21.0)))


def test_seconds_at_own_size_alternatives_and_ideal_scaling():
    assert SIZED.seconds_at(1) == 80.0 and SIZED.seconds_at(2) == 41.0 and SIZED.seconds_at(4) == 21.0
    assert SIZED.seconds_at(8) == 10.0  # not offered by the sizer (e.g. a fixed block): ideal scaling


def test_trial_request_carries_wider_sizes_only():
    req = trial_request(7, 1, SIZED, submit_time=5.0)
    assert (req.trial_id, req.slots, req.predicted_seconds, req.submit_time) == (7, 1, 80.0, 5.0)
    assert req.alternatives == ((2, 41.0), (4, 21.0))
    retry = trial_request(7, 2, SIZED, submit_time=6.0, min_moldable_s=30.0)  # e.g. an OOM retry on 2 slots
    assert (retry.slots, retry.predicted_seconds, retry.alternatives) == (2, 41.0, ((4, 21.0),))
    # shorter than the default minimum (60 s) at its size: rigid (start-up would eat the gain)
    assert trial_request(7, 2, SIZED, submit_time=6.0).alternatives == ()
    assert trial_request(7, 1, SizedTrial(1, 59.0, ((2, 30.0),)), 0.0).alternatives == ()


def test_load_aware_widens_a_lone_runtime_request_and_not_a_busy_queue():
    pool = ResourcePool(1, 4)
    lone = LoadAwarePolicy()
    lone.submit(trial_request(0, 1, SIZED, 0.0))
    (decision,) = lone.schedule(pool, 0.0)
    assert decision.slots == (0, 1, 2, 3)  # nothing else to run: the whole node, 21 s instead of 80 s
    busy = LoadAwarePolicy()
    for tid in range(12):  # 12 x 80 slot-s queued on 4 slots: every trial keeps its own size
        busy.submit(trial_request(tid, 1, SIZED, 0.0))
    assert [len(d.slots) for d in busy.schedule(pool, 0.0)] == [1, 1, 1, 1]


def test_runtime_sizer_alternatives_and_unreadable_config(tmp_path):
    config = {"NeuralNetwork": {"Architecture": {"mpnn_type": "PNA", "hidden_dim": 64, "num_conv_layers": 3},
                                "Training": {"batch_size": 32, "num_epoch": 2}}}
    sizer = runtime_sizer(str(tmp_path / "missing.bp"), [1, 2, 4], 4, 3600.0, lambda params: config,
                          memory_per_slot_gb=64.0)
    sized = sizer.choose({})
    model = sizer.cost_model
    assert sized.slots == 1  # far below the 900 s target: the smallest size
    assert sized.alternatives == ()  # no speed-up measured yet: no wider size is offered
    for key in ("a", "b"):  # two attempts measured 1.8x on 2 slots: alpha (2 / 1.8 - 1) = 1/9
        model.efficiency.learn(key, 2, 1.8)
    features = TrialFeatures.from_config(config)
    assert sizer.choose({}).alternatives == tuple((n, pytest.approx(model.predict_seconds(features, n)))
                                                  for n in (2, 4))
    assert model.predict_seconds(features, 4) < model.predict_seconds(features, 2) < model.predict_seconds(features, 1)
    broken = runtime_sizer(str(tmp_path / "missing.bp"), [1, 2, 4], 4, 40.0,
                           lambda params: {"NeuralNetwork": {"Architecture": {"mpnn_type": "NoSuchLayer"}}})
    assert broken.choose({}) == SizedTrial(1, 40.0)  # smallest size, the fallback time, rigid
