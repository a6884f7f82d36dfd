"""Simulator workload, sim.json via the CLI, replay, plots, load-aware beats the baselines."""

import json

import numpy as np
import pytest

from hpo.stoppers import STOPPERS, make_stopper

from hydragnn_ensemble.cli import main
from scheduler.runtime.launch import kill_margin_s
from scheduler.simulator import SIM_JSON_KEYS, SimConfig, generate_workload, replay_workload, simulate


def test_workload_sizes_and_scatter():
    from scheduler.data_cost import load_data_cost
    from scheduler.simulator.workload import STARTUP_S

    w0 = generate_workload(300, 64, 8, 0.0, seed=1)
    w5 = generate_workload(300, 64, 8, 0.5, seed=1)
    assert [t.slots for t in w0] == [t.slots for t in w5]
    whole = lambda t: t.startup_s + t.epochs * t.epoch_s <= t.time_limit_s  # noqa: E731 - not cut by the limit
    assert all(t.true_seconds == pytest.approx(t.predicted_seconds) for t in w0 if whole(t))
    ratios = np.log([t.true_seconds / t.predicted_seconds for t in w5 if whole(t)])
    assert len(ratios) > 250 and 0.35 < ratios.std() < 0.65
    for t in w5:  # a start-up and its epochs; the time limit ends a trial after the epoch reaching it
        assert 0 < t.startup_s <= STARTUP_S + load_data_cost().open_s and t.epochs == t.features.num_epoch
        seconds, epochs = t.attempt(t.slots)
        assert seconds == t.true_seconds
        if seconds == t.time_limit_s + kill_margin_s(t.time_limit_s):  # killed during the epoch reaching it
            assert t.startup_s + (epochs + 1) * t.epoch_s > seconds
        else:
            assert t.startup_s + epochs * t.epoch_s == pytest.approx(seconds)
            assert epochs == t.epochs or t.startup_s + (epochs - 1) * t.epoch_s < t.time_limit_s < seconds
    sizes = {t.slots for t in w0}
    assert {1, 8}.issubset(sizes) and max(sizes) > 8


def test_cli_writes_sim_json_and_plots(tmp_path):
    out = tmp_path / "sim.json"
    rc = main(["simulate", "--no-progress", "--nodes", "16", "--gpus-per-node", "4", "--trials", "60", "--seed", "2",
               "--policy", "fifo-skip", "-o", str(out), "--plot"])
    assert rc == 0
    data = json.loads(out.read_text())
    assert tuple(data) == SIM_JSON_KEYS
    assert data["policy"] == "fifo-skip" and data["slots"] == 64 and data["trials"] == 60
    assert 0 < data["utilisation"] <= 1 and data["makespan_over_lb"] >= 1
    assert data["decision_latency_ms"]["calls"] > 0
    assert (tmp_path / "sim_util.png").stat().st_size > 1000 and (tmp_path / "sim_gantt.png").stat().st_size > 1000


def test_a_simulated_campaign_directory_reads_like_a_real_one(tmp_path, capsys):
    """``simulate -o DIR`` writes the journal the campaign loop made (no trial directories);
    ``report DIR`` reads it and prints the trials line the simulator printed, and its trial counts
    are the simulator's: every workload trial ended once, the stopped ones as sim.json counts them."""
    out = tmp_path / "simulated"
    assert main(["simulate", "--no-progress", "--nodes", "4", "--gpus-per-node", "4", "--trials", "40", "--seed", "1",
                 "--space", "demo", "-o", str(out)]) == 0
    simulated = capsys.readouterr().out.splitlines()
    assert sorted(p.name for p in out.iterdir()) == ["journal.jsonl", "results.csv", "sim.json"]
    assert main(["report", str(out)]) == 0
    reported = capsys.readouterr().out.splitlines()
    trials_line = next(line for line in reported if line.startswith("trials: "))
    assert trials_line == simulated[0] and trials_line.startswith("trials: 40 (")
    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == 41 and json.loads((out / "sim.json").read_text())["trials"] == 40
    # a second run may replace what simulate wrote; a real campaign directory is never replaced
    assert main(["simulate", "--no-progress", "--nodes", "4", "--trials", "10", "--space", "demo", "-o", str(out)]) == 0
    capsys.readouterr()
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "journal.jsonl").write_text("")
    assert main(["simulate", "--no-progress", "--trials", "10", "-o", str(tmp_path / "real")]) == 2
    assert "is not a previous output of this command (simulated campaign directory)" in capsys.readouterr().err


def test_cli_bad_input(tmp_path, capsys):
    assert main(["simulate", "--trials", "0", "-o", str(tmp_path / "x.json")]) == 2
    assert "--trials must be >= 1" in capsys.readouterr().err
    assert main(["simulate", "--policy", "best-fit", "-o", str(tmp_path / "x.json")]) == 2
    assert "placement 'best-fit' is not available; choose one of ['fifo'," in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_replay_results_csv(tmp_path):
    csv = tmp_path / "results.csv"
    csv.write_text("job_id,m:wall_time_s,m:slots\n0,10,1\n1,20,2\n2,,1\n3,5,6\n")
    trials = replay_workload(csv, 4, 0.0, seed=0)
    assert [(t.slots, t.true_seconds) for t in trials] == [(1, 10.0), (2, 20.0), (8, 5.0)]
    r = simulate(trials, SimConfig(nodes=2, gpus_per_node=4))
    # the 8-slot trial (6 rounded up to whole nodes) needs the whole cluster: it waits for the 20 s one
    assert [(rec.trial_id, rec.start, rec.end) for rec in r.records] == [(0, 0.0, 10.0), (1, 0.0, 20.0), (2, 20.0, 25.0)]
    assert r.summary["makespan_s"] == 25.0


def test_load_aware_beats_fifo_on_same_workload():
    w = generate_workload(300, 64, 8, 0.0, seed=4, target_seconds=1800.0, max_trial_nodes=16)
    u = {p: simulate(w, SimConfig(nodes=64, gpus_per_node=8, policy=p, block_nodes=16)).summary["utilisation"]
         for p in ("load-aware", "fifo", "fixed-block")}
    assert u["load-aware"] > u["fifo"] > u["fixed-block"]


def test_ask_latency_delays_first_starts():
    from scheduler.simulator import SimTrial

    trials = [SimTrial(i, 1, 10.0, 10.0) for i in range(8)]
    r = simulate(trials, SimConfig(nodes=1, gpus_per_node=4, ask_latency_s=5.0, ask_batch=4, pool_factor=1.0))
    starts = sorted(rec.start for rec in r.records)
    # the runtime's top-up keeps a node's worth (4) waiting: the first batch is asked at 0 s and
    # arrives at 5 s; once it starts nothing waits, so the next 4 are asked at 5 s, arrive at 10 s
    # and start when the first ones end at 15 s
    assert starts == [5.0] * 4 + [15.0] * 4
    assert r.summary["makespan_s"] == 25.0


def test_early_discarding_in_the_simulator_stops_losers_and_saves_slot_time():
    """The simulator drives the campaign loop's stopper: trials with learning curves report each
    epoch, ASHA stops the losers at its rungs (the trainer waits there for the verdict; without the
    wait the stop lands inside the next epoch); the best trial still runs to the end."""
    # (seed 0: the best trial is found 4x sooner with ASHA; in 5 of seeds 0-5 sooner, at seed 3 it
    # starts later under ASHA's re-ordered queue)
    w = generate_workload(120, 16, 4, 0.5, seed=0, target_seconds=600.0, max_trial_nodes=2, curves=True,
                          time_limit_s=1e6)  # no trial cut by a time limit: all epochs to discard from
    plain = simulate(w, SimConfig(nodes=16, gpus_per_node=4, block_nodes=2))
    asha = simulate(w, SimConfig(nodes=16, gpus_per_node=4, block_nodes=2, early_stopping="asha",
                                 early_stopping_options={"min_epochs": 1, "reduction_factor": 3}))
    p, a = plain.summary, asha.summary
    assert p["stopped_trials"] == 0 and a["stopped_trials"] > 60
    held = lambda r: sum(len(x.held) * (x.end - x.start) for x in r.records)  # noqa: E731
    assert held(asha) < 0.6 * held(plain)
    stopped = [x for x in asha.records if x.stopped]
    by_id = {t.trial_id: t for t in w}
    assert all(0 < x.needed_slot_s < by_id[x.trial_id].true_work and x.ok for x in stopped)
    # a stopped trial's objective is the best of the epochs it trained, and it trained fewer epochs
    for x in stopped:
        curve = by_id[x.trial_id].curve
        assert 1 <= x.epochs < len(curve) and x.objective == min(curve[:x.epochs])
    # the best trial of the plain run is found with ASHA too, sooner
    assert a["best_objective"] == p["best_objective"] and a["time_to_best_s"] < p["time_to_best_s"]
    rungs = {1, 3, 9, 27}
    assert {x.epochs for x in stopped} <= rungs
    late = simulate(w, SimConfig(nodes=16, gpus_per_node=4, block_nodes=2, early_stopping="asha",
                                 early_stopping_options={"min_epochs": 1, "reduction_factor": 3}, verdict_wait=False))
    late_stopped = [x for x in late.records if x.stopped]
    # without the wait the trainer has begun the next epoch and stops inside it (STOP_LATENCY_S later):
    # the same epochs trained, the slots held a little longer
    assert late_stopped and {x.epochs for x in late_stopped} <= rungs
    assert held(late) > held(asha)


@pytest.mark.parametrize("method", sorted(STOPPERS))
def test_every_registered_stopper_works_in_the_campaign_loop(method):
    """A registered stopper is one the campaign can use: each one runs through the shared loop (the
    simulator drives it as the runtime does) with its example options; every trial runs, none is
    stopped before the first epoch the stopper judges at, a stopped one trained fewer epochs than
    its curve. A stopper that discards (pareto-asha judges the objective and the seconds trained,
    both reported with every epoch) stops some trials and saves slot time; one that does not (none)
    runs the campaign as without a stopper."""
    w = generate_workload(60, 8, 4, 0.5, seed=5, target_seconds=600.0, max_trial_nodes=2, curves=True,
                          time_limit_s=1e6)  # no trial cut by a time limit: all epochs to discard from
    plain = simulate(w, SimConfig(nodes=8, gpus_per_node=4, block_nodes=2))
    options = dict(STOPPERS[method].EXAMPLE_OPTIONS)
    stopper = make_stopper(method, options)
    run = simulate(w, SimConfig(nodes=8, gpus_per_node=4, block_nodes=2, early_stopping=method,
                                early_stopping_options=options))
    assert run.summary["early_stopping"] == method
    assert {r.trial_id for r in run.records} == {t.trial_id for t in w}  # every trial ran
    by_id = {t.trial_id: t for t in w}
    for x in (x for x in run.records if x.stopped):
        assert stopper.first_judged_epoch(len(by_id[x.trial_id].curve)) <= x.epochs < len(by_id[x.trial_id].curve)
    held = lambda r: sum(len(x.held) * (x.end - x.start) for x in r.records)  # noqa: E731
    if stopper.discards:
        assert run.summary["stopped_trials"] > 0 and held(run) < 0.9 * held(plain)
    else:
        assert run.summary["stopped_trials"] == 0 and held(run) == held(plain)
        assert [(x.trial_id, x.start, x.end, x.held) for x in run.records] == \
            [(x.trial_id, x.start, x.end, x.held) for x in plain.records]


def test_a_running_trial_is_re_estimated_from_its_epochs_and_backfill_uses_it():
    """Trial 0 is predicted 20 s but runs 10 epochs of 10 s. After its first epoch the loop revises
    its end to 100 s, so the 2-slot trial 1 is reserved at 100 s, not at 80 s (when trial 2 frees
    its slot), and the 19 s trial 3 backfills that slot at 80 s. Without the epoch reports placement
    keeps the stale end, holds the slot for trial 1 and trial 3 runs last."""
    from scheduler.simulator import SimTrial

    w = [SimTrial(0, 1, 20.0, 100.0, epochs=10, epoch_s=10.0), SimTrial(1, 2, 30.0, 30.0, epochs=3, epoch_s=10.0),
         SimTrial(2, 1, 80.0, 80.0, epochs=8, epoch_s=10.0), SimTrial(3, 1, 19.0, 19.0, epochs=1, epoch_s=19.0)]
    runs = {reveal: simulate(w, SimConfig(nodes=1, gpus_per_node=2, reveal_epochs=reveal, pool_factor=4.0))
            for reveal in (False, True)}
    spans = {reveal: sorted((x.trial_id, x.start, x.end) for x in r.records) for reveal, r in runs.items()}
    assert spans[True] == [(0, 0.0, 100.0), (1, 100.0, 130.0), (2, 0.0, 80.0), (3, 80.0, 99.0)]
    assert spans[False] == [(0, 0.0, 100.0), (1, 100.0, 130.0), (2, 0.0, 80.0), (3, 130.0, 149.0)]


def test_a_malleable_trial_found_long_moves_wider_at_an_epoch_boundary():
    """The simulator's malleable study: trial 0 (predicted 10 s) shows 10 s epochs after a 5 s
    start-up; with 3 slots idle it checkpoints after its second epoch (25 s) and continues on the
    whole node, paying its start-up again: 25 + 5 + 38 x 2.5 s. Every epoch is trained once."""
    from scheduler.efficiency import ParallelEfficiency
    from scheduler.simulator import SimTrial

    eff = ParallelEfficiency(alpha=0.0, slots_per_node=4)
    w = [SimTrial(0, 1, 10.0, 405.0, epochs=40, epoch_s=10.0, startup_s=5.0, wider_sizes=(2, 4), efficiency=eff),
         SimTrial(1, 1, 10.0, 10.0, epochs=1, epoch_s=10.0)]
    rigid = simulate(w, SimConfig(nodes=1, gpus_per_node=4))
    moved = simulate(w, SimConfig(nodes=1, gpus_per_node=4, malleable=True))
    assert rigid.summary["makespan_s"] == 405.0 and not any(x.moved for x in rigid.records)
    parts = [(x.start, x.end, len(x.held), x.epochs, x.moved) for x in moved.records if x.trial_id == 0]
    assert parts == [(0.0, 25.0, 1, 2, True), (25.0, 125.0, 4, 40, False)]
    assert moved.summary["makespan_s"] == 125.0
    assert moved.summary["utilisation"] > 3 * rigid.summary["utilisation"]


def test_a_real_optimizer_searches_on_the_virtual_clock_and_is_told_every_outcome():
    """An :class:`OptimizerSource`: Optuna's TPE suggests the trials as the simulated campaign runs
    (each a curve that depends on its parameters), ASHA stops losers at its rungs, and every ended
    trial is told back as the runtime tells it: a stopped one PRUNED at the epoch it reached with
    its best value so far, a completed one COMPLETE with its best; after its start-up trials TPE
    finds better configurations than random search does on the same clock."""
    from optuna.trial import TrialState

    from hpo.optimizers import make_optimizer
    from hpo.space import SearchSpace
    from scheduler.simulator import SimTrial
    from scheduler.simulator.search import OptimizerSource

    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0.0, "high": 1.0},
                                   "y": {"type": "float", "low": 0.0, "high": 1.0}})

    def make_trial(trial_id: int, params: dict) -> SimTrial:
        final = 0.1 + (params["x"] - 0.3) ** 2 + (params["y"] - 0.7) ** 2
        curve = tuple(final * (1.0 + 2.0 / e) for e in range(1, 10))
        return SimTrial(trial_id, slots=1, predicted_seconds=10.0, true_seconds=10.0, curve=curve, epochs=9,
                        startup_s=1.0, epoch_s=1.0)

    def search(name: str, seed: int) -> tuple[OptimizerSource, object]:
        source = OptimizerSource(make_optimizer(name, space, seed=seed), make_trial, max_trials=60)
        result = simulate(source, SimConfig(nodes=1, gpus_per_node=4, node_group_size=1, early_stopping="asha",
                                            early_stopping_options={"min_epochs": 1, "reduction_factor": 3},
                                            prefetch_below_s=0.0, seed=seed))
        return source, result

    source, result = search("optuna-tpe", 0)
    records = {r.trial_id: r for r in result.records}
    assert len(records) == 60 and len(source.by_id) == 60
    study = source.pool.optimizer.study
    told = study.get_trials(deepcopy=False)
    assert len(told) == 60
    by_params = {(t.params["x"], t.params["y"]): t for t in told}
    stopped = 0
    for tid, rec in records.items():
        t = by_params[(source.params[tid]["x"], source.params[tid]["y"])]
        if rec.stopped:
            stopped += 1
            assert t.state == TrialState.PRUNED and rec.epochs in (1, 3)
            assert t.intermediate_values[rec.epochs] == pytest.approx(rec.objective)
        else:
            assert t.state == TrialState.COMPLETE and t.value == pytest.approx(rec.objective) and rec.epochs == 9
    assert 20 < stopped < 60
    best = lambda name: np.median([min(r.objective for r in search(name, s)[1].records if not r.stopped)  # noqa: E731
                                   for s in range(3)])
    assert best("optuna-tpe") < best("random")


def test_fill_tail_keeps_idle_slots_busy_without_delaying_the_campaign():
    """``fill_tail``: 8 slots, max_trials 8; trial 0 trains 20 epochs of 10 s, the others 5 of 1 s.
    Without it 7 slots idle for most of the run; with it the workload's extra trials run there,
    none starts unless it can report an epoch before trial 0's predicted end, the ones running when
    trial 0 ends stop inside their epoch, and the campaign ends when it did."""
    from scheduler.simulator import SimTrial
    from scheduler.simulator.cluster import STOP_LATENCY_S

    def trial(i: int) -> SimTrial:
        epochs, epoch_s = (20, 10.0) if i == 0 else (5, 1.0)
        return SimTrial(i, slots=1, predicted_seconds=1.0 + epochs * epoch_s, true_seconds=1.0 + epochs * epoch_s,
                        epochs=epochs, startup_s=1.0, epoch_s=epoch_s, curve=tuple(1.0 / e for e in range(1, epochs + 1)))

    work = [trial(i) for i in range(400)]
    cfg = dict(nodes=1, gpus_per_node=8, node_group_size=1, prefetch_below_s=0.0, max_trials=8)
    plain = simulate(work, SimConfig(**cfg))
    filled = simulate(work, SimConfig(**cfg, fill_tail=True))
    p, f = plain.summary, filled.summary
    assert {r.trial_id for r in plain.records} == set(range(8)) and p["makespan_s"] == pytest.approx(201.0)
    extra = [r for r in filled.records if r.trial_id >= 8]
    assert len(extra) > 100  # 7 slots x ~195 s / 6 s per extra trial
    assert f["makespan_s"] <= p["makespan_s"] + STOP_LATENCY_S + 1e-9
    assert all(r.start + 1.0 + 1.0 <= p["makespan_s"] + 1e-9 for r in extra)  # each reports an epoch in time
    cut = [r for r in extra if r.stopped]
    assert cut and all(r.end == pytest.approx(p["makespan_s"] + STOP_LATENCY_S) for r in cut)
    assert p["utilisation"] < 0.2 and f["utilisation"] > 0.9
    assert f["best_objective"] == p["best_objective"]
