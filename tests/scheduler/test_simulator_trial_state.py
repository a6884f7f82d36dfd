"""The simulator charges the training state (#46): each epoch's state write, a continuation's
restart from the state, and retries that resume after the failed attempt's last epoch, as the
runtime's trainer does; free by default (the model before the state existed)."""

from __future__ import annotations

import json

import pytest

from hpo.journal import read_journal
from scheduler.efficiency import ParallelEfficiency
from scheduler.simulator import SimConfig, SimTrial, simulate
from scheduler.simulator.trial_state import TrialStateCosts, TrialStateCostsError


def test_each_epoch_pays_its_state_write():
    w = [SimTrial(0, 1, 100.0, 105.0, epochs=10, epoch_s=10.0, startup_s=5.0)]
    free = simulate(w, SimConfig(nodes=1, gpus_per_node=1))
    charged = simulate(w, SimConfig(nodes=1, gpus_per_node=1, trial_state=TrialStateCosts(checkpoint_share=0.1)))
    assert free.summary["makespan_s"] == 105.0
    assert charged.summary["makespan_s"] == pytest.approx(5.0 + 10 * 11.0)  # by hand


def test_a_move_restart_adds_the_measured_seconds_to_its_start_up():
    """As the malleable study's case (test_simulator.py), with 3 s more for the restart:
    25 + (5 + 3) + 38 x 2.5 s."""
    eff = ParallelEfficiency(alpha=0.0, slots_per_node=4)
    w = [SimTrial(0, 1, 10.0, 405.0, epochs=40, epoch_s=10.0, startup_s=5.0, wider_sizes=(2, 4), efficiency=eff),
         SimTrial(1, 1, 10.0, 10.0, epochs=1, epoch_s=10.0)]
    moved = simulate(w, SimConfig(nodes=1, gpus_per_node=4, malleable=True,
                                  trial_state=TrialStateCosts(restart_extra_s=3.0)))
    parts = [(x.start, x.end, len(x.held), x.epochs, x.moved) for x in moved.records if x.trial_id == 0]
    assert parts == [(0.0, 25.0, 1, 2, True), (25.0, 128.0, 4, 40, False)]


@pytest.mark.parametrize("resume", [True, False])
def test_a_retry_resumes_after_the_epochs_its_failed_attempt_finished(tmp_path, resume):
    """Every attempt fails part-way (failure rate 1): with resumed retries each retry's first
    reported epoch is the one after its failed attempt's last; without, it is epoch 1 again."""
    w = [SimTrial(0, 1, 200.0, 205.0, epochs=20, epoch_s=10.0, startup_s=5.0)]
    config = SimConfig(nodes=1, gpus_per_node=1, failure_rate=1.0, retries=3, failure_threshold=1.0, seed=4,
                       trial_state=TrialStateCosts(resume_retries=resume))
    simulate(w, config, campaign_dir=tmp_path / "sim")
    events = read_journal(tmp_path / "sim" / "journal.jsonl").events
    curves: dict[int, list[int]] = {}
    for e in events:
        if e["event"] == "trial_progress":
            curves.setdefault(e["attempt"], []).append(e["epoch"])
    assert len([e for e in events if e["event"] == "trial_started"]) == 4
    firsts = [curves[a][0] for a in sorted(curves)]
    lasts = [curves[a][-1] for a in sorted(curves)]
    assert len(curves) >= 2 and lasts[-1] > lasts[0]
    if resume:
        for a in range(1, len(firsts)):
            assert firsts[a] == lasts[a - 1] + 1
    else:
        assert set(firsts) == {1}


def test_the_shipped_measurement_reads_and_a_bad_file_names_its_key(tmp_path):
    measured = TrialStateCosts.measured()
    assert 0.0 < measured.checkpoint_share < 0.05 and measured.restart_extra_s > 0 and measured.resume_retries
    bad = tmp_path / "costs.json"
    bad.write_text(json.dumps({"checkpoint_share": 0.01, "restart_extra_s": 1.0}))
    with pytest.raises(TrialStateCostsError, match="no key 'resume_retries'"):
        TrialStateCosts.read(bad)
