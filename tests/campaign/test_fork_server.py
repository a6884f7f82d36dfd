"""The fork-server launcher on its own (no MPI): what a forked trial looks like and how it ends."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from hpo.campaign import TRIAL_LAUNCHERS
from scheduler.runtime.fork_server import ForkServerLauncher, default_preload
from scheduler.runtime.launchers import LAUNCHER_FACTORIES, make_launcher
from scheduler.runtime.messages import StartTrial
from scheduler.runtime.launch import TRIAL_NICENESS
from scheduler.runtime.outcome import describe_exit
from scheduler.runtime.trial_process import TrialProcess

PROBE = "tests.campaign.probe_program"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the server runs "python -m", which finds tests.campaign from here


def _start(tmp: Path, name: str, action: str, **extra) -> StartTrial:
    run_dir = tmp / name
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"action": action, **extra}))
    return StartTrial(trial_id=0, attempt=0, rank=0, world_size=1, program=PROBE,
                      config_path=str(run_dir / "config.json"), data_path="unused", run_dir=str(run_dir),
                      log_path=str(run_dir / "train.log"), time_budget_s=30, kill_after_s=30,
                      init_method=None, device="cpu", read_result=True)


def _finish(launcher: ForkServerLauncher, proc: TrialProcess, timeout_s: float = 30) -> int:
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the trial did not end"
        launcher.wait([proc], 0.05)
    proc.close()
    return proc.poll()


def test_forked_trial_runs_like_python_dash_m(tmp_path: Path) -> None:
    launcher = ForkServerLauncher({"CUDA_VISIBLE_DEVICES": "3"}, ["json", "torch"])
    try:
        start = _start(tmp_path, "a", "exit", code=0)
        proc = launcher.launch(start)
        assert _finish(launcher, proc) == 0
        probe = json.loads((Path(start.run_dir) / "probe.json").read_text())
        assert launcher.ready_info == {"ready": True, "preloaded": ["json", "torch"], "not_imported": {}}
        assert probe["ppid"] == launcher.server.pid  # forked by the server, not exec'd by us
        assert probe["sid"] == probe["pid"]  # its own session: the agent kills its whole group
        assert probe["torch_at_start"] is True  # imported once, by the server
        assert probe["name"] == "__main__"
        assert probe["argv"][:2] == ["train", start.config_path]
        assert probe["argv"][probe["argv"].index("-o") + 1] == start.run_dir
        assert (probe["cuda_visible_devices"], probe["omp_num_threads"]) == ("3", "1")
        assert probe["niceness"] == os.nice(0) + TRIAL_NICENESS  # the runtime's ranks come first
    finally:
        launcher.close()
    assert launcher.server.returncode == 0


def test_exit_codes_output_and_tracebacks(tmp_path: Path) -> None:
    launcher = ForkServerLauncher({}, [PROBE])
    try:
        codes = {name: _finish(launcher, launcher.launch(_start(tmp_path, name, action, code=3)))
                 for name, action in [("code", "exit"), ("raise", "raise"), ("segv", "segfault"),
                                      ("print", "print")]}
        assert codes == {"code": 3, "raise": 1, "segv": -signal.SIGSEGV, "print": 3}
        assert describe_exit(codes["segv"]) == "segmentation fault (SIGSEGV)"
        log = (tmp_path / "raise" / "train.log").read_text()
        assert log.rstrip().endswith("RuntimeError: probe failure")
        assert "zygote.py" not in log and "runpy" not in log and "RuntimeWarning" not in log
        assert (tmp_path / "print" / "train.log").read_text().splitlines() == [
            "probe stdout line", "probe stderr line"]
    finally:
        launcher.close()


def test_hang_is_killed_with_its_group_and_close_ends_the_server(tmp_path: Path) -> None:
    launcher = ForkServerLauncher({}, [PROBE])
    start = _start(tmp_path, "hang", "hang")
    proc = launcher.launch(start)
    while not (Path(start.run_dir) / "probe.json").exists():
        time.sleep(0.02)
    proc.terminate("test", time.time())
    assert _finish(launcher, proc) == -signal.SIGTERM
    hung = launcher.launch(_start(tmp_path, "hang2", "hang"))
    launcher.close()  # closing the request pipe: the server kills what still runs and exits
    assert launcher.server.returncode == 0
    with pytest.raises(ProcessLookupError):
        os.kill(hung.handle.pid, 0)


def test_a_dead_server_fails_its_trials_and_later_trials_are_execd(tmp_path: Path) -> None:
    messages = []

    class Sink:
        def write(self, text: str) -> None:
            messages.append(text)

        def flush(self) -> None:
            pass

    launcher = ForkServerLauncher({}, [PROBE], stderr=Sink())
    try:
        start = _start(tmp_path, "orphan", "hang")
        proc = launcher.launch(start)
        while not (Path(start.run_dir) / "probe.json").exists():
            time.sleep(0.02)
        child = proc.handle.pid
        os.kill(launcher.server.pid, signal.SIGKILL)
        assert _finish(launcher, proc) == -signal.SIGKILL
        assert proc.killed_reason == "the agent's trial fork server exited (code -9)"
        deadline = time.monotonic() + 10
        while True:  # PR_SET_PDEATHSIG: the trial died with its server
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "the orphaned trial is still alive"
            time.sleep(0.05)
        assert "".join(messages).startswith("agent: the trial fork server exited (code -9)")
        later = _start(tmp_path, "later", "exit", code=0)
        proc = launcher.launch(later)
        assert _finish(launcher, proc) == 0
        probe = json.loads((Path(later.run_dir) / "probe.json").read_text())
        assert probe["ppid"] == os.getpid() and probe["torch_at_start"] is False  # exec'd by us
        assert probe["niceness"] == os.nice(0) + TRIAL_NICENESS
    finally:
        launcher.close()


def test_every_trial_launcher_a_campaign_may_name_is_registered() -> None:
    """The campaign's ``trial_launcher`` names (hpo) and the scheduler's launchers are the same set."""
    assert set(LAUNCHER_FACTORIES) == set(TRIAL_LAUNCHERS)
    with pytest.raises(ValueError, match="unknown trial launcher 'spawn'"):
        make_launcher("spawn", {}, [])


def test_default_preload() -> None:
    assert default_preload("hydragnn_ensemble")[:2] == ["torch", "torch_geometric"]
    assert default_preload("bench.sleep_trainer") == ["bench.sleep_trainer"]


@pytest.mark.mpi
def test_agent_starts_a_trial_sent_ahead_when_the_one_before_exits(tmp_path: Path) -> None:
    """A real agent under mpiexec: a start sent ahead (prefetch) begins when the trial it follows
    exits and is reported after that exit, also when it cannot start; one taken back never starts."""
    import subprocess
    import sys

    out = tmp_path / "received.json"
    mpiexec = Path(sys.executable).parent / "mpiexec"
    proc = subprocess.run([str(mpiexec), "-n", "2", sys.executable, "tests/campaign/agent_queue_driver.py",
                           str(out), str(tmp_path / "work")], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text())
    order = [(m["type"], m.get("trial_id"), m.get("returncode")) for m in got]
    assert order == [
        ("PartExited", 0, -signal.SIGTERM), ("PartExited", 1, 0),
        ("PartExited", 2, -signal.SIGTERM), ("PartExited", 3, 127),
        ("Unqueued", 5, None), ("PartExited", 4, -signal.SIGTERM),
        ("pending after the last exit", None, None),
    ]
    assert got[-1]["any"] is False  # trial 5 never started
    assert got[1]["start_time"] >= got[0]["end_time"]  # 1 began after 0 ended, on the agent's clock
    # a config that cannot be written (its directory wrecked, here a file) is the trial's failure, not
    # an infrastructure fault: only a full disk, an I/O error or no process at all would stop the campaign
    assert "could not write the trial's config" in got[3]["killed_reason"] and got[3]["fault"] is None
    assert not (tmp_path / "work" / "5" / "probe.json").exists()
    assert (tmp_path / "work" / "1" / "probe.json").exists()
