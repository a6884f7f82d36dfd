"""The simulator charges rank 0's own time (:mod:`scheduler.simulator.rank0`): what the agents
report while rank 0 is busy waits for it, then is handled in one batch; free of charge the
decisions are exactly those of a simulator that does not charge."""

from __future__ import annotations

import json

import pytest

from scheduler.simulator import SimConfig, SimTrial, generate_workload, simulate
from scheduler.simulator.rank0 import Rank0Costs


def test_reports_wait_for_a_busy_rank_0_by_hand():
    """4 slots, 12 trials of 10 s; a start costs rank 0 2 s, an end 5 s. t=0: 4 starts (busy to
    8). t=10: 4 ends (20 s) and 4 starts (8 s): busy to 38. The ends at 20 wait until 38 (18 s),
    then the third wave starts at 38 and ends at 48, handled at 66."""
    work = [SimTrial(i, 1, 10.0, 10.0) for i in range(12)]
    costs = Rank0Costs(start_s=2.0, epoch_report_s=0.0, end_s=5.0, source="by hand")
    result = simulate(work, SimConfig(nodes=1, gpus_per_node=4, retries=0, rank0_costs=costs))
    starts = sorted(r.start for r in result.records)
    assert starts == [0.0] * 4 + [10.0] * 4 + [38.0] * 4
    assert sorted(r.end for r in result.records) == [10.0] * 4 + [20.0] * 4 + [48.0] * 4  # the processes' ends
    rank0 = result.summary["rank0"]
    assert rank0["charged"] and rank0["lag_s"]["max"] == pytest.approx(18.0)
    assert rank0["busy_fraction"] == pytest.approx((3 * 8 + 3 * 20) / 48.0)
    free = simulate(work, SimConfig(nodes=1, gpus_per_node=4, retries=0))
    assert sorted(r.start for r in free.records) == [0.0] * 4 + [10.0] * 4 + [20.0] * 4
    assert free.summary["rank0"] == {"charged": False}


def test_free_of_charge_the_decisions_are_unchanged():
    work = generate_workload(200, 16, 4, 0.4, seed=5, curves=True)
    cfg = dict(nodes=16, gpus_per_node=4, block_nodes=2, early_stopping="asha")
    plain = simulate(work, SimConfig(**cfg))
    charged = simulate(work, SimConfig(**cfg, rank0_costs=Rank0Costs(0.0, 0.0, 0.0)))
    key = lambda r: (r.trial_id, r.attempt, r.start, r.end, r.held, r.ok, r.epochs)  # noqa: E731
    assert [key(r) for r in plain.records] == [key(r) for r in charged.records]
    assert charged.summary["rank0"]["lag_s"]["max"] == 0.0


def test_the_measurement_row_nearest_the_machine_is_read(tmp_path):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"rows": [
        {"slots": 1024, "first_wave_per_start_s": 1e-3, "epoch_report_s": 2e-4, "end_and_start_s": 1.5e-3},
        {"slots": 65536, "first_wave_per_start_s": 2e-3, "epoch_report_s": 4e-4, "end_and_start_s": 5e-3}]}))
    near_small = Rank0Costs.read(path, 2048)
    assert (near_small.start_s, near_small.end_s) == (1e-3, pytest.approx(5e-4))
    assert Rank0Costs.read(path, 30000).epoch_report_s == 4e-4
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(ValueError, match="bad.json: not a rank 0 cost measurement"):
        Rank0Costs.read(tmp_path / "bad.json", 8)
