"""The campaign runtime under real mpiexec: each optimizer backend, journal/results consistency, the lock,
and the pieces (layout, GPU binding, trial argv) it is built from."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
import yaml
from campaign_testkit import (
    REPO,
    events,
    fault_objective,
    of,
    replay_asha,
    results_rows,
    run_hpo,
    tiny_alloy_dataset,
    tiny_gin_config,
    write_asha_campaign,
    write_campaign,
)

from hpo.space import apply_params
from hpo.state import CampaignState
from hpo.stoppers import STOPPERS
from hpo.campaign_dir import CampaignDirError, CampaignLock, _proc_start
from scheduler.runtime.layout import RESERVED_TRIAL_ID, build_layout
from scheduler.runtime.messages import AgentHello, StartTrial
from scheduler.runtime.sizing import usable_sizes
from scheduler.runtime.launch import device_binding, trial_argv

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("backend,own_process", [("random", False), ("optuna-tpe", False),
                                                 ("deephyper-cbo", False), ("deephyper-cbo", True)])
def test_campaign_completes_with_each_backend(tmp_path: Path, backend: str, own_process: bool) -> None:
    """Each backend on rank 0's thread, and DeepHyper in a process of its own (hpo.optimizer_process:
    no MPI there, under mpiexec)."""
    campaign = write_campaign(tmp_path, optimizer={"name": backend, "own_process": own_process}, max_trials=8,
                              sleep_s=0.1)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 0, proc.stderr
    assert (f"hpo: optimizer {backend}: in a process of its own" in proc.stderr) == own_process
    evs = events(out)
    assert [e["event"] for e in evs][0] == "campaign_started"
    assert evs[0]["ranks"] == 4 and evs[0]["slots"] == 3 and evs[0]["resume"] is False
    assert evs[-1] == {**evs[-1], "event": "campaign_finished", "reason": "max_trials (8) finished"}
    # the fault trainer's dataset is no graph store: the cost model says it sizes on defaults
    assert f"hpo: cost model: dataset statistics of {tmp_path / 'data.bp'} not readable" in proc.stderr
    finished = of(evs, "trial_finished")
    assert sorted(e["trial_id"] for e in finished) == list(range(8))
    assert sorted(e["trial_id"] for e in of(evs, "trial_started")) == list(range(8))
    assert of(evs, "trial_failed") == []
    params = {e["trial_id"]: e["params"] for e in of(evs, "trial_suggested")}
    base = json.loads((out / "base_config.json").read_text())
    for e in finished:
        tid = e["trial_id"]
        config = json.loads((out / "trials" / str(tid) / "config.json").read_text())
        assert config == apply_params(base, params[tid])
        expected = fault_objective(config)
        assert e["result"]["objective"] == pytest.approx(expected, abs=1e-12)
        on_disk = json.loads((out / "trials" / str(tid) / "result.json").read_text())
        assert on_disk["status"] == "completed" and on_disk["objective"] == pytest.approx(expected)
    # slots: every start used one of the 3 agents' slots, and no slot ran two trials at once
    starts = {e["trial_id"]: e for e in of(evs, "trial_started")}
    ends = {e["trial_id"]: e["time"] for e in finished}
    for a in starts:
        assert len(starts[a]["slots"]) == 1 and 0 <= starts[a]["slots"][0] < 3
        for b in starts:
            if a < b and starts[a]["slots"] == starts[b]["slots"]:
                assert ends[a] <= starts[b]["time"] or ends[b] <= starts[a]["time"]
    rows = results_rows(out)
    assert sorted(int(r["job_id"]) for r in rows) == list(range(8))
    best = min(fault_objective(json.loads((out / "trials" / r["job_id"] / "config.json").read_text()))
               for r in rows)
    for r in rows:
        assert r["job_status"] == "DONE" and r["m:status"] == "completed"
        loss = finished[[e["trial_id"] for e in finished].index(int(r["job_id"]))]["result"]["objective"]
        assert float(r["loss"]) == pytest.approx(loss) and float(r["objective"]) == pytest.approx(-loss)
        assert float(r["p:NeuralNetwork.Architecture.hidden_dim"]) == params[int(r["job_id"])]["NeuralNetwork.Architecture.hidden_dim"]
    assert f"best objective: {best:.6g}" in proc.stdout
    assert not (out / "lock").exists()


def test_lock_refuses_a_second_campaign(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, max_trials=2)
    out = tmp_path / "out"
    out.mkdir()
    me = os.getpid()  # this test process plays the campaign that holds the directory
    (out / "lock").write_text(json.dumps({"host": socket.gethostname(), "pid": me,
                                          "proc_start": _proc_start(me), "time": time.time()}))
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 2
    assert f"is in use by pid {me} on host {socket.gethostname()}" in proc.stderr
    assert proc.stderr.count("error:") == 1  # printed once, by rank 0
    assert not (out / "journal.jsonl").exists()
    assert json.loads((out / "lock").read_text())["pid"] == me  # not taken over


def test_new_campaign_refused_over_an_existing_one(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, max_trials=2)
    out = tmp_path / "out"
    assert run_hpo(campaign, out, ranks=3).returncode == 0
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 2
    assert f"{out} already holds a campaign" in proc.stderr and "--resume" in proc.stderr
    assert len(of(events(out), "campaign_started")) == 1


def test_lock_stale_and_foreign(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    # a dead process on this host: taken over, with a notice
    path.write_text(json.dumps({"host": socket.gethostname(), "pid": 2**22 + 12345,
                                "proc_start": 1, "time": 0.0}))
    lock = CampaignLock(path)
    lock.acquire()
    assert lock.held and "stale lock of pid 4206649" in lock.notice
    assert json.loads(path.read_text())["pid"] == os.getpid()
    lock.release()
    assert not path.exists()
    # another host: refused unless forced
    path.write_text(json.dumps({"host": "frontier00042", "pid": 77, "proc_start": None, "time": 0.0}))
    with pytest.raises(CampaignDirError, match="by pid 77 on host frontier00042 .*--force-unlock"):
        CampaignLock(path).acquire()
    forced = CampaignLock(path)
    forced.acquire(force=True)
    assert "forced removal of the lock of pid 77 on host frontier00042" in forced.notice
    forced.release()


def test_layout_groups_agents_per_host_and_reserves_missing_slots() -> None:
    # srun --ntasks-per-node=4: rank 0 and agents 1-3 on host a, agents 4-7 on host b
    hellos = [AgentHello(r, "a" if r < 4 else "b", {}) for r in range(1, 8)]
    layout = build_layout(hellos, slots_per_node=4)
    assert layout.node_hosts == ["a", "b"]
    assert layout.slot_to_rank == {0: 1, 1: 2, 2: 3, 4: 4, 5: 5, 6: 6, 7: 7}
    assert layout.reserved_slots == [3]
    assert layout.slots_on_nodes() == [3, 4]
    assert [layout.assignments[r].local_index for r in (1, 2, 3, 4, 7)] == [0, 1, 2, 0, 3]
    pool = layout.make_pool()
    assert pool.free_slots == 7 and pool.held_by(RESERVED_TRIAL_ID) == (3,)
    # sizes: 4 fits only node b, 8 needs two complete nodes (there is one)
    assert usable_sizes([1, 4, 8], 4, layout.slots_on_nodes()) == [1, 4]
    with pytest.raises(ValueError, match="no size fits this run"):
        usable_sizes([8], 4, layout.slots_on_nodes())
    single = build_layout([AgentHello(r, "h", {}) for r in (1, 2, 3)], slots_per_node=1)
    assert single.num_nodes == 3 and single.reserved_slots == []


def test_device_binding() -> None:
    assert device_binding("cpu", {"CUDA_VISIBLE_DEVICES": "0"}, 2) == {
        "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    # srun --gpus-per-task=1 bound one GCD to the rank: keep it
    assert device_binding("gpu", {"ROCR_VISIBLE_DEVICES": "5"}, 2) == {"ROCR_VISIBLE_DEVICES": "5"}
    # every rank sees the node's list: pick this agent's entry
    assert device_binding("gpu", {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, 6) == {"CUDA_VISIBLE_DEVICES": "2"}
    assert device_binding("gpu", {}, 3) == {"CUDA_VISIBLE_DEVICES": "3", "ROCR_VISIBLE_DEVICES": "3"}


def test_trial_argv_matches_the_trainer_contract() -> None:
    start = StartTrial(trial_id=4, attempt=1, rank=1, world_size=2, program="hydragnn_ensemble",
                       config_path="/c/trials/4/config.json", data_path="/d.bp", run_dir="/c/trials/4",
                       log_path="/c/trials/4/train.rank1.log", time_budget_s=90.0, kill_after_s=94.5,
                       init_method="file:///c/trials/4/rendezvous.1", device="cpu", read_result=False)
    assert trial_argv(start, "/py") == [
        "/py", "-m", "hydragnn_ensemble", "train", "/c/trials/4/config.json", "--dataset", "/d.bp",
        "-o", "/c/trials/4", "--time-budget", "90", "--device", "cpu", "--no-progress",
        "--rank", "1", "--world-size", "2", "--init-method", "file:///c/trials/4/rendezvous.1"]
    # the real trainer's CLI accepts exactly these flags
    from hydragnn_ensemble.cli import build_parser

    args = build_parser().parse_args(trial_argv(start, "/py")[3:])
    assert (args.config, args.dataset, args.output, args.time_budget, args.device, args.rank,
            args.world_size, args.init_method, args.no_progress) == (
        "/c/trials/4/config.json", "/d.bp", "/c/trials/4", 90.0, "cpu", 1, 2,
        "file:///c/trials/4/rendezvous.1", True)
    gpu = trial_argv(StartTrial(**{**start.__dict__, "device": "gpu"}), "/py")
    assert gpu[gpu.index("--device") + 1] == "cuda" and gpu[gpu.index("--local-rank") + 1] == "0"
    assert REPO.joinpath("tests", "campaign", "fault_trainer.py").exists()


@pytest.mark.parametrize("slots", [1, 2])
def test_campaign_with_the_real_trainer(tmp_path: Path, slots: int) -> None:
    """Trials forked from fork servers that preloaded torch; with 2 slots they train data-parallel
    (gloo rendezvous between two forked processes)."""
    tiny_alloy_dataset(tmp_path / "alloy.bp")
    base = tiny_gin_config(2)
    (tmp_path / "base.json").write_text(json.dumps(base))
    space = {"NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 4, "high": 12},
             "NeuralNetwork.Training.Optimizer.learning_rate": {"type": "float", "low": 1e-3, "high": 1e-2}}
    campaign = write_campaign(tmp_path, max_trials=2, trial_time_limit_s=300, search_space=space,
                              dataset="alloy.bp", trial_program="hydragnn_ensemble",
                              resources={"slots_per_trial": [slots]})
    (tmp_path / "base.json").write_text(json.dumps(base))  # write_campaign wrote the fault config
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3, timeout=400)
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    finished = {e["trial_id"]: e for e in of(evs, "trial_finished")}
    params = {e["trial_id"]: e["params"] for e in of(evs, "trial_suggested")}
    assert sorted(finished) == [0, 1]
    for tid, event in finished.items():
        trial = out / "trials" / str(tid)
        result = json.loads((trial / "result.json").read_text())
        assert result["status"] == "completed" and result["epochs"] == 2 and result["slots"] == slots
        assert result["objective"] == event["result"]["objective"] and result["objective"] > 0
        assert (trial / "train.rank1.log").exists() == (slots == 2)
        assert (trial / result["checkpoint"]).is_file()
        config = json.loads((trial / "config.json").read_text())
        assert config["NeuralNetwork"]["Architecture"]["hidden_dim"] == params[tid]["NeuralNetwork.Architecture.hidden_dim"]
        assert " val_loss " in (trial / "train.log").read_text()


def test_budgets_that_cannot_fit_are_named_before_trial_1(tmp_path: Path) -> None:
    """Wide PaiNN models of 50 epochs under a 4 s trial limit: rank 0 warns before any trial runs
    (from the cost model), and the campaign still runs its trial."""
    tiny_alloy_dataset(tmp_path / "alloy.bp")
    base = {"NeuralNetwork": {
        "Architecture": {"mpnn_type": "PAINN", "hidden_dim": 256, "num_conv_layers": 4,
                         "output_heads": {"graph": {"num_sharedlayers": 1, "dim_sharedlayers": 8,
                                                    "num_headlayers": 1, "dim_headlayers": [8]}},
                         "task_weights": [1.0]},
        "Variables_of_interest": {"input_node_features": [0], "output_names": ["energy"],
                                  "type": ["graph"], "output_dim": [1]},
        "Training": {"num_epoch": 50, "batch_size": 8, "Optimizer": {"learning_rate": 0.005}}}}
    space = {"NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 256, "high": 512}}
    campaign = write_campaign(tmp_path, max_trials=1, trial_time_limit_s=4, search_space=space,
                              dataset="alloy.bp", trial_program="hydragnn_ensemble")
    (tmp_path / "base.json").write_text(json.dumps(base))  # write_campaign wrote the fault config
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=2, timeout=300)
    assert proc.returncode == 0, proc.stderr
    warning = next(line for line in proc.stderr.splitlines() if "sampled configurations" in line)
    assert warning.startswith("hpo: warning: 256 of 256 sampled configurations are predicted to need more than "
                              "trial_time_limit_s = 4 s for the 50 epoch(s) of their whole budget")
    evs = events(out)
    assert len(of(evs, "trial_finished")) + len(of(evs, "trial_failed")) == 1  # it ran all the same


def test_background_journal_writes_batches_in_order(tmp_path: Path) -> None:
    from hpo.journal import Journal, read_journal
    from hpo.journal_writer import BackgroundJournal

    writer = BackgroundJournal(Journal(tmp_path / "journal.jsonl"))
    batches = [[{"event": "trial_suggested", "trial_id": i, "params": {"a": i}, "attempt": 0}]
               for i in range(5)]
    batches.append([{"event": "campaign_finished", "reason": "done", "time": 7.0}])
    written = [r for b in batches for r in writer.submit(b)]
    assert read_journal(tmp_path / "journal.jsonl").events == written  # written at once, fsync later
    writer.sync()
    assert read_journal(tmp_path / "journal.jsonl").events == written
    assert [e.get("trial_id") for e in written] == [0, 1, 2, 3, 4, None] and written[-1]["time"] == 7.0
    with pytest.raises(ValueError, match="missing fields"):
        writer.submit([{"event": "trial_started", "trial_id": 1, "attempt": 0}])
    writer.close()
    assert 1 <= writer.fsyncs <= 6


def test_progress_line() -> None:
    import io

    from scheduler.runtime.progress import ProgressLine, ProgressSnapshot

    snap = ProgressSnapshot(finished=5, max_trials=16, running=3, failed=1, best=0.01234567,
                            busy_slots=3, total_slots=3, utilisation=0.915, elapsed_s=42.0)
    assert snap.line() == ("[hpo    42.0s] done 5/16  running 3  failed 1  best 0.0123457  "
                           "slots 3/3 busy, utilisation 92%")
    stream = io.StringIO()  # not a terminal: whole lines, at most every log_interval_s
    line = ProgressLine(stream, log_interval_s=10.0)
    assert line.due(100.0)
    line.show(snap, now=100.0)
    assert not line.due(105.0) and line.due(110.0)
    assert stream.getvalue() == snap.line() + "\n"


@pytest.mark.parametrize("prefetch_below_s", [0.0, 10.0])
def test_short_trials_are_sent_ahead_to_their_slot(tmp_path: Path, prefetch_below_s: float) -> None:
    """Prefetch: a short trial's successor starts on the same slot once it exits (journaled after its
    end, with the processes' own start and end times); prefetch_below_s 0 turns it off."""
    campaign = write_campaign(tmp_path, max_trials=16, sleep_s=0.05, prefetch_below_s=prefetch_below_s)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    ends = {e["trial_id"]: e for e in of(evs, "trial_finished")}
    assert sorted(ends) == list(range(16))
    sent_ahead = [e for e in of(evs, "trial_started") if "queued_after" in e]
    if prefetch_below_s == 0.0:
        assert sent_ahead == []
        return
    assert len(sent_ahead) >= 4  # the first wave is sized before anything was observed
    position = {id(e): i for i, e in enumerate(evs)}
    for e in sent_ahead:
        before = ends[e["queued_after"]]
        assert position[id(e)] > position[id(before)]  # journaled after the end of the one it followed
        started = next(s for s in of(evs, "trial_started") if s["trial_id"] == before["trial_id"])
        assert e["slots"] == started["slots"]
        assert ends[e["trial_id"]]["started_at"] >= before["ended_at"]  # the same agent's clock
    for e in ends.values():
        assert e["started_at"] < e["ended_at"]
        assert e["ended_at"] - e["started_at"] >= e["result"]["wall_time_s"]


def test_a_stop_takes_back_the_trials_sent_ahead(tmp_path: Path) -> None:
    """max_time_s: trials sent ahead that have not started are dropped (they stay suggested)."""
    # the agents' start-up (fork servers importing torch) takes 1-3 s of the budget on 2 loaded cores
    campaign = write_campaign(tmp_path, max_trials=100, max_time_s=5.0, sleep_s=1.5, prefetch_below_s=10.0)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    assert evs[-1]["reason"] == "max_time_s (5 s) reached"
    assert any("queued_after" in e for e in of(evs, "trial_started"))
    # that none starts after the budget is checked on a virtual clock (test_time_budget_note.py::
    # test_the_budget_takes_back_the_trials_sent_ahead): a wall-clock bound here fails on a loaded machine
    state_started = {e["trial_id"] for e in of(evs, "trial_started")}
    assert len(state_started) == len(of(evs, "trial_finished"))
    assert len(of(evs, "trial_suggested")) > len(state_started)


def test_a_trial_sent_ahead_of_a_slow_one_is_taken_back_for_an_idle_slot(tmp_path: Path) -> None:
    """Trial 0 runs far longer than predicted; the trial sent ahead behind it is taken back when the
    other slot falls idle with nothing waiting, and starts there instead of waiting 2 s."""
    campaign = write_campaign(tmp_path, max_trials=3, sleep_s=0.05, modes={0: "slow"},
                              prefetch_below_s=100.0)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    ends = {e["trial_id"]: e for e in of(evs, "trial_finished")}
    assert sorted(ends) == [0, 1, 2]
    assert ends[0]["ended_at"] - ends[0]["started_at"] >= 2.0
    # placement starts trial 0 and one other first; the third is sent ahead behind trial 0 (the
    # first one started), and must not wait for it
    for tid in (1, 2):
        assert ends[tid]["started_at"] < ends[0]["ended_at"] - 1.0, (tid, ends)


def test_fill_tail_runs_extra_trials_on_idle_slots_and_stops_them_with_the_last_regular_one(tmp_path: Path) -> None:
    """``fill_tail``: max_trials 3 on 2 slots, trial 0 runs 9 epochs of 0.6 s, the others 9 of
    0.05 s. Once all 3 are out, the slot trial 0 does not hold would idle for seconds: extra trials
    run there instead, and the one running when trial 0 ends is stopped inside its epoch: the
    campaign ends with trial 0 (not a trial later) and says max_trials finished."""
    campaign = write_campaign(tmp_path, max_trials=3, mode="epochs", fill_tail=True)
    base = json.loads((tmp_path / "base.json").read_text())
    base["Fault"].update(epochs=9, epoch_s=0.05, epoch_s_of={"0": 0.6})
    (tmp_path / "base.json").write_text(json.dumps(base))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    ends = {e["trial_id"]: e for e in of(evs, "trial_finished")}
    assert ends[0]["result"]["status"] == "completed" and ends[0]["result"]["epochs"] == 9
    extra = sorted(set(ends) - {0, 1, 2})
    assert len(extra) >= 2, sorted(ends)  # trial 0 alone holds a slot for 5.4 s; an extra one takes ~1 s
    last_regular_end = max(ends[t]["ended_at"] for t in (0, 1, 2))
    assert ends[0]["ended_at"] == last_regular_end
    for t in extra:
        assert ends[t]["started_at"] < last_regular_end
        assert ends[t]["ended_at"] < last_regular_end + 2.0, (t, ends[t])  # none outlives the tail
    stopped = [t for t in extra if ends[t]["result"]["status"] == "stopped"]
    for t in stopped:
        assert "the campaign's tail is over" in ends[t]["result"]["failure_reason"]
    assert of(evs, "campaign_finished")[-1]["reason"] == "max_trials (3) finished"


def test_asha_stops_losing_trials_and_the_journal_replays_its_decisions(tmp_path: Path) -> None:
    """Early discarding end to end: trials report each epoch (progress.jsonl -> agent -> rank 0 ->
    journal trial_progress), ASHA asks the losers to stop (RUN_DIR/stop), they end as ``stopped``
    with their best so far and fewer epochs; the journal's curves replayed into a fresh ASHA give
    the same stops; results.csv and report count them."""
    from hpo.state import CampaignState

    campaign = write_asha_campaign(tmp_path, max_trials=12, epoch_s=0.12, verdict_wait_s=15.0)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 0, proc.stderr
    evs = events(out)
    state = CampaignState.replay(evs)
    finished = {e["trial_id"]: e["result"] for e in of(evs, "trial_finished")}
    assert sorted(finished) == list(range(12))
    stopped = {t for t, r in finished.items() if r["status"] == "stopped"}
    assert stopped and len(stopped) < 12
    for t in stopped:
        assert finished[t]["epochs"] < 9 and finished[t]["failure_reason"].startswith("early stopping (asha) after epoch")
        result = json.loads((out / "trials" / str(t) / "result.json").read_text())
        assert result["status"] == "stopped" and result["objective"] == pytest.approx(finished[t]["objective"])
    # every epoch a trial finished is in the journal, before its end
    for t, record in state.trials.items():
        curve = record.last_attempt.curve
        assert [e for e, _ in curve] == list(range(1, finished[t]["epochs"] + 1))
    # the stop decisions follow from the journal alone (a decision at the last epoch comes too late)
    decided = replay_asha(state.progress)
    assert stopped == {t for t, epoch in decided.items() if epoch < 9}
    rows = results_rows(out)
    assert [r["m:status"] for r in rows].count("stopped") == len(stopped)
    from hpo.report import write_report

    files = write_report(out)
    assert f"stopped early ({len(stopped)} trials" in files.text
    # epochs trained past the decision: the result's epochs less the last epoch journaled before the
    # stop request (the fault trainer ends only after whole epochs of 0.12 s: whole numbers)
    past = [state.trials[t].last_attempt.epochs_past_stop for t in stopped]
    for t, p in zip(stopped, past):
        before = [e for e in evs if e.get("trial_id") == t and e["event"] in ("trial_progress", "trial_stop_requested")]
        decided_at = max((e["epoch"] for e in before[:[e["event"] for e in before].index("trial_stop_requested")]),
                         default=0)
        assert p == finished[t]["epochs"] - decided_at and p >= 0, (t, p, decided_at)
    # the trials waited for the verdict at the rungs (1 and 3 epochs): every stop landed there ...
    assert past == [0] * len(stopped)
    assert f"epochs trained past the stop decision: mean 0.00, max 0.00 over {len(stopped)}" in files.text
    # ... and the ones that went on were told so: none waited the 15 s bound (twice would pass the
    # 20 s time limit; its 9 epochs take 1.1 s)
    for t in set(finished) - stopped:
        assert finished[t]["status"] == "completed" and finished[t]["wall_time_s"] < 9 * 0.12 + 10.0, finished[t]
    assert files.curves_png is not None and files.curves_png.stat().st_size > 10_000


@pytest.mark.parametrize("method", sorted(STOPPERS))
def test_every_registered_stopper_runs_a_real_campaign(tmp_path: Path, method: str) -> None:
    """A registered stopper works in a campaign under mpiexec (pareto-asha used to crash rank 0: the
    loop gave it one number where it needs the objective and the seconds trained)."""
    campaign = write_asha_campaign(tmp_path, max_trials=5, epoch_s=0.05)
    data = yaml.safe_load(campaign.read_text())
    data["early_stopping"] = {"method": method, **STOPPERS[method].EXAMPLE_OPTIONS}
    campaign.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 0, proc.stderr
    state = CampaignState.replay(events(out))
    assert [r.trial_id for r in state.finished] == [0, 1, 2, 3, 4] and state.num_failed == 0
    assert all(len(r.last_attempt.curve) >= 1 for r in state.finished)


@pytest.mark.parametrize("optimizer", ["optuna-tpe", "deephyper-cbo"])
def test_a_multi_objective_campaign_under_mpiexec(tmp_path: Path, optimizer: str) -> None:
    """objectives: [objective, slot_seconds] with pareto-asha: every trial ends, the optimizer is
    told both numbers (a wrong count would crash rank 0), results.csv has objective_0 / objective_1
    (negated), and the report has the Pareto front, resumed too."""
    from hpo.report import write_report

    campaign = write_asha_campaign(tmp_path, max_trials=6, epoch_s=0.05)
    data = yaml.safe_load(campaign.read_text())
    data.pop("objective", None)
    data.update(objectives=["objective", "slot_seconds"], optimizer={"name": optimizer, "options": {}},
                early_stopping={"method": "pareto-asha", "min_epochs": 1, "reduction_factor": 3})
    campaign.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=3)
    assert proc.returncode == 0, proc.stderr
    state = CampaignState.replay(events(out))
    assert len(state.finished) == 6 and state.num_failed == 0
    for record in state.finished:
        result = record.result
        assert record.objective_values == (result.objective, result.wall_time_s * result.slots)
    rows = {int(r["job_id"]): r for r in results_rows(out)}
    assert "objective" not in rows[0]
    for t, record in enumerate(state.finished):
        assert [float(rows[t]["objective_0"]), float(rows[t]["objective_1"])] == [-v for v in record.objective_values]
    files = write_report(out)
    assert "Pareto front (" in files.text and files.pareto_png is not None
    data["max_trials"] = 8
    campaign.write_text(yaml.safe_dump(data))
    proc = run_hpo(campaign, out, 3, "--resume")  # tell_past replays both objectives
    assert proc.returncode == 0, proc.stderr
    assert len(CampaignState.replay(events(out)).finished) == 8


def test_a_placement_that_is_not_registered_is_refused_before_anything_starts(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, placement="best-fit")
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=2)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "placement 'best-fit' is not available; choose one of" in errors[0]
    assert not out.exists()


def test_the_sharing_notice_says_where_nvidia_mps_is_missing(tmp_path: Path) -> None:
    from scheduler.runtime.launch import mps_control_found
    from scheduler.runtime.run import sharing_notice
    from scheduler.sharing import ColocationCurve, GpuSharing

    rule = GpuSharing.parse("auto", 80.0, ColocationCurve({1: 1.0, 2: 1.7, 4: 2.5}))
    hellos = [AgentHello(1, "n1", {}, mps_control=True), AgentHello(2, "n2", {}, mps_control=False)]
    text = sharing_notice(rule, "gpu", hellos)
    assert text.startswith("gpu_sharing auto: trials predicted to use under 40% of a GPU alone share one, up to 4")
    assert "no NVIDIA MPS control daemon on n2: they are time-sliced" in text and "n1" not in text
    assert "kernels run concurrently" in sharing_notice(rule, "gpu", hellos[:1])
    assert not mps_control_found({"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)})
    (tmp_path / "control").touch()  # where the daemon's pipe would be
    assert mps_control_found({"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)})
