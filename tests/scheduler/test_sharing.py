"""Several trials per GPU: the co-location curve, the sharing rule, sizing, the campaign loop's
shared GPUs (real pool and load-aware policy) and processor sharing in the simulator."""

from __future__ import annotations

import collections
import json

import pytest

from hydragnn_ensemble.cli import main
from scheduler.cost_model import TrialFeatures
from scheduler.sharing import (ColocationCurve, GpuSharing, Packing, ShareDemand, SharingError, SharingMode,
                               share_key)
from scheduler.simulator import SimConfig, SimTrial, generate_workload, simulate
from scheduler.simulator.workload import make_cost_model
from scheduler.sizing import Sizer, default_sizes

CURVE = ColocationCurve({1: 1.0, 2: 1.6, 4: 2.4, 8: 2.0}, "test")


def test_colocation_curve_interpolates_and_refuses_what_was_not_measured(tmp_path) -> None:
    assert CURVE.throughput(3) == pytest.approx(2.0) and CURVE.slowdown(2) == pytest.approx(1.25)
    assert CURVE.slowdown(4) == pytest.approx(4 / 2.4) and CURVE.best_k == 4 and CURVE.max_k == 8
    with pytest.raises(SharingError, match="measured for k <= 8, not k = 9"):
        CURVE.throughput(9)
    with pytest.raises(SharingError, match="needs k = 1"):
        ColocationCurve({2: 1.5})
    with pytest.raises(SharingError, match="aggregate\\[1\\] must be 1"):
        ColocationCurve({1: 2.0, 2: 3.0})
    path = tmp_path / "curve.json"
    path.write_text(json.dumps({"aggregate": {"1": 1.0, "4": 3.0}, "source": "H100, bench"}))
    assert ColocationCurve.read(path) == ColocationCurve({1: 1.0, 4: 3.0}, "H100, bench")
    path.write_text('{"points": []}')
    with pytest.raises(SharingError, match=f"{path}: not a co-location curve"):
        ColocationCurve.read(path)


def test_sharing_rule_admits_by_memory_utilisation_and_count() -> None:
    auto = GpuSharing.parse("auto", 10.0, CURVE)
    assert auto.mode == SharingMode.AUTO and auto.per_gpu == 4  # the curve's best k
    small, big = ShareDemand(2.0, 0.3), ShareDemand(2.0, 0.5)
    assert auto.admits(small, ()) and not auto.admits(big, ())  # big uses >= 40% of a GPU alone
    assert auto.admits(small, (small, small)) and not auto.admits(small, (small, small, small))  # 1.2 > budget
    assert not auto.admits(ShareDemand(9.0, 0.1), (small,)) and auto.admits(ShareDemand(8.0, 0.1), (small,))  # 10 GB
    assert not auto.admits(ShareDemand(1.0, None), ())  # utilisation not predicted
    tiny = ShareDemand(0.5, 0.05)
    assert auto.admits(tiny, (tiny,) * 3) and not auto.admits(tiny, (tiny,) * 4)  # 4 per GPU at most
    fixed = GpuSharing.parse("2", 10.0, CURVE)
    assert fixed.admits(big, (big,)) and not fixed.admits(big, (big, big))  # utilisation not asked
    assert not GpuSharing.parse("off", 10.0, None).admits(small, ())
    with pytest.raises(SharingError, match="needs a measured co-location curve"):
        GpuSharing.parse("4", 10.0, None)
    with pytest.raises(SharingError, match="not k = 16"):
        GpuSharing.parse("16", 10.0, CURVE)
    with pytest.raises(SharingError, match="off, auto or a number"):
        GpuSharing.parse("many", 10.0, CURVE)


def test_no_resident_is_packed_past_the_time_limit() -> None:
    """The curve's slowdowns at k = 1..4 are 1, 1.25, 1.5 (k = 3 interpolated: aggregate 2.0) and
    1.67. Time limit 100 s: a 70 s trial may share with one other (87.5 s), not be one of three
    (105 s); a 90 s one runs only alone; a 101 s one never shares."""
    rule = GpuSharing.parse("4", 64.0, CURVE, time_limit_s=100.0)
    short, mid, long_ = ShareDemand(1.0, 0.1, 30.0), ShareDemand(1.0, 0.1, 70.0), ShareDemand(1.0, 0.1, 90.0)
    assert rule.slowdowns == pytest.approx((1.0, 1.25, 1.5, 4 / 2.4))
    assert rule.admits(mid, (short,)) and not rule.admits(short, (short, mid))  # the resident would pass it
    assert rule.admits(short, (short, short, short))  # 30 s x 1.67 = 50 s
    assert rule.admits(long_, ()) and not rule.admits(short, (long_,))
    assert not rule.admits(ShareDemand(1.0, 0.1, 101.0), ())
    assert GpuSharing.parse("4", 64.0, CURVE).admits(short, (long_, long_, long_))  # no limit: count and memory


def test_utilisation_alone_grows_with_the_model_and_small_trials_are_sized_at_one_slot() -> None:
    from scheduler.data_cost import DataCost

    model = make_cost_model(8)
    model.data = DataCost()  # the sizing rule on the device's work alone (reading 2 M graphs would dominate)
    small, large = TrialFeatures("GIN", 32, 2, 16, 60, 1), TrialFeatures("SchNet", 1024, 6, 128, 60, 1)
    u_small, u_large = model.utilisation_alone(small), model.utilisation_alone(large)
    assert 0 < u_small < 0.05 < 0.9 < u_large < 1
    assert model.utilisation_alone(TrialFeatures("GIN", 64, 2, 16, 60, 1)) > u_small
    sizes = default_sizes(8, 4)
    spread = Sizer(model, sizes, target_seconds=60.0).choose(small)
    packed = Sizer(model, sizes, target_seconds=60.0, packing=Packing(0.4)).choose(small)
    assert spread.slots > 1 and spread.alternatives  # the target duration alone spreads it
    assert packed.slots == 1 and packed.alternatives == ()
    moldable = Sizer(model, sizes, target_seconds=60.0, packing=Packing(0.4, rigid=False)).choose(small)
    assert moldable.slots == 1 and {n for n, _ in moldable.alternatives} >= {spread.slots}  # placement may spread it
    rule = GpuSharing.parse("auto", 64.0, CURVE)
    assert rule.packing(3.9).rigid is False and rule.packing(4.0).rigid is True  # few trials per GPU: moldable
    assert GpuSharing().packing(100.0) is None
    too_long = Sizer(model, sizes, target_seconds=60.0, packing=Packing(0.4, 0.5 * packed.predicted_seconds))
    assert too_long.choose(small) == spread  # beyond the time limit on one GPU: sized as without sharing
    assert Sizer(model, sizes, target_seconds=60.0, packing=Packing(0.4)).choose(large).slots > 1


def _residents(state) -> dict[int, list[int]]:
    on = collections.defaultdict(list)
    for tid, slots in state.running.items():
        if len(slots) == 1:
            on[slots[0]].append(tid)
    return on


def test_the_loop_packs_small_trials_within_memory_and_count_and_returns_every_gpu() -> None:
    """Real pool, load-aware policy and campaign loop on the virtual clock: 300 trials of the demo's
    space (0.50-0.75 GB each) on 2 nodes x 4 GPUs of 2.2 GB, 4 per GPU at most: at every event no GPU
    holds more than 4 trials or more than its memory, a shared GPU is held in the pool by its share
    key; every trial finishes."""
    trials = generate_workload(300, 2, 4, 0.3, seed=1, space="demo", packing=Packing(0.4))
    sharing = GpuSharing.parse("4", 2.2, CURVE)
    memory = {t.trial_id: t.memory_per_slot_gb for t in trials}
    seen = collections.Counter()

    def hook(state) -> None:
        for slot, tids in _residents(state).items():
            seen[len(tids)] += 1
            assert len(tids) <= 4 and sum(memory[t] for t in tids) <= 2.2 + 1e-9
            if len(tids) > 1:
                assert state.pool.owner_of(slot) == share_key(slot)

    result = simulate(trials, SimConfig(nodes=2, gpus_per_node=4, gpu_sharing=sharing, colocation=CURVE, seed=1),
                      hook=hook)
    assert result.summary["gpu_sharing"]["shared_attempts"] == 300
    assert max(seen) == 4 and seen[4] > 0  # GPUs did fill up
    assert len([r for r in result.records if r.ok]) == 300
    assert max(memory.values()) + 3 * min(memory.values()) > 2.2  # some fours do not fit: memory decides


def test_processor_sharing_at_the_curve_s_rate() -> None:
    """One GPU, 2 per GPU, rate 1.6 / 2 = 0.8 each while both run: trial 0 (100 s alone) ends at
    125 s; trial 1 (200 s alone) has done 100 s of its work by then and runs alone: it ends at 225 s.
    Without sharing they run one after the other (300 s)."""
    w = [SimTrial(0, 1, 100.0, 100.0), SimTrial(1, 1, 200.0, 200.0)]
    shared = simulate(w, SimConfig(nodes=1, gpus_per_node=1, gpu_sharing=GpuSharing.parse("2", 64.0, CURVE),
                                   colocation=CURVE, reveal_epochs=False))
    ends = sorted((r.trial_id, r.start, r.end) for r in shared.records)
    assert ends == [(0, 0.0, 125.0), (1, 0.0, 225.0)]
    assert simulate(w, SimConfig(nodes=1, gpus_per_node=1)).summary["makespan_s"] == 300.0


def test_a_shared_trial_stretched_past_its_time_limit_ends_after_the_epoch_in_progress() -> None:
    """As above, but trial 0 is 10 epochs of 10 s with a 110 s limit: at 110 s it has done 88 s of
    work (rate 0.8), so it ends after epoch 9 (90 s of work, at 112.5 s), a timeout with 9 epochs;
    trial 1 has done 90 s by then and ends at 222.5 s."""
    w = [SimTrial(0, 1, 100.0, 100.0, time_limit_s=110.0, epochs=10, epoch_s=10.0), SimTrial(1, 1, 200.0, 200.0)]
    shared = simulate(w, SimConfig(nodes=1, gpus_per_node=1, gpu_sharing=GpuSharing.parse("2", 64.0, CURVE),
                                   colocation=CURVE, reveal_epochs=False))
    ends = {r.trial_id: r for r in shared.records}
    assert (ends[0].end, ends[0].epochs) == (pytest.approx(112.5), 9)
    assert ends[1].end == pytest.approx(222.5) and ends[1].epochs == 1


def test_simulate_cli_with_sharing(tmp_path, capsys) -> None:
    curve = tmp_path / "curve.json"
    curve.write_text(json.dumps({"aggregate": {"1": 1.0, "2": 1.8, "4": 3.0}, "source": "assumed"}))
    out = tmp_path / "sim.json"
    assert main(["simulate", "--no-progress", "--nodes", "2", "--gpus-per-node", "4", "--trials", "120",
                 "--space", "demo", "--graphs", "200000", "--gpu-sharing", "auto", "--colocation-curve", str(curve),
                 "-o", str(out)]) == 0
    data = json.loads(out.read_text())["gpu_sharing"]
    assert data["mode"] == "auto" and data["per_gpu"] == 4 and data["curve_source"] == "assumed"
    assert 0 < data["shared_attempts"] <= 120
    assert main(["simulate", "--gpu-sharing", "4", "-o", str(tmp_path / "x.json")]) == 2
    assert "needs a measured co-location curve (--colocation-curve FILE)" in capsys.readouterr().err


def test_the_colocation_bench_writes_a_curve_that_simulate_reads(tmp_path) -> None:
    """``bench/gpu_colocation.py`` (what a device session runs) on the CPU: real trial processes,
    alone and two at once; its output is a co-location curve with the trial's figures."""
    from bench.gpu_colocation import main as bench_main

    out = tmp_path / "curve.json"
    assert bench_main(["--device", "cpu", "--ks", "1", "2", "--alone", "GIN:16", "--epochs", "3", "--graphs", "40",
                       "--workdir", str(tmp_path / "work"), "--out", str(out)]) == 0
    curve = ColocationCurve.read(out)
    # no bound on the k = 2 figure: it is a timing on a shared machine (one batch per epoch here)
    assert curve.aggregate[1] == 1.0 and curve.aggregate[2] > 0 and "on cpu (time-sliced)" in curve.source
    assert sorted(json.loads(out.read_text())["graphs_per_s"]) == ["1", "2"]
    alone = json.loads(out.read_text())["alone"]["GIN:16"]
    assert alone["graphs_per_s"] > 0 and alone["peak_memory_mb"] > 0 and alone["device"] == "cpu"


def test_simulate_cli_names_the_search_spaces(tmp_path, capsys) -> None:
    assert main(["simulate", "--space", "alloys", "-o", str(tmp_path / "x.json")]) == 2
    assert "--space 'alloys' is not a search space; choose one of hydragnn, demo" in capsys.readouterr().err


def test_a_huge_k_is_refused_at_once_and_a_losing_curve_is_named() -> None:
    """N10: gpu_sharing 100000000 with a curve that covers it hung at set-up (a slowdown per k);
    N9: a curve on which k trials together run slower than one alone was used without a word."""
    from hpo.campaign import MAX_TRIALS_PER_GPU, ResourcesConfig

    huge = ColocationCurve({1: 1.0, 100_000_000: 2.0})
    with pytest.raises(SharingError, match=f"2..{MAX_TRIALS_PER_GPU} trials per GPU, got '100000000'"):
        GpuSharing.parse("100000000", 64.0, huge)  # refused before any per-k work
    with pytest.raises(ValueError, match="2 to 48"):
        ResourcesConfig(gpu_sharing="100000000", colocation_curve="c.json")
    losing = GpuSharing.parse("2", 64.0, ColocationCurve({1: 1.0, 2: 0.9}))
    assert "gives 2 trials per GPU 0.90x the throughput of one alone" in losing.loss_warning()
    assert GpuSharing.parse("2", 64.0, ColocationCurve({1: 1.0, 2: 1.7})).loss_warning() is None
