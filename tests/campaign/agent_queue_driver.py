"""Drives one real agent over MPI (``mpiexec -n 2``; rank 0 plays the scheduler) through the queue of
starts sent ahead, and writes what rank 0 received, in order, to the JSON file given as argument.

    mpiexec -n 2 python tests/campaign/agent_queue_driver.py OUT.json WORKDIR
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from mpi4py import MPI

from scheduler.runtime.agent import Agent, hello
from scheduler.runtime.messages import (
    TAG_EXITED,
    TAG_KILL,
    TAG_SHUTDOWN,
    TAG_START,
    TAG_UNQUEUE,
    AgentAssignment,
    KillTrial,
    LauncherSettings,
    Shutdown,
    StartTrial,
    Unqueue,
)

PROBE = "tests.campaign.probe_program"


def start(work: Path, trial_id: int, action: str, after: int | None = None, bad_config: bool = False) -> StartTrial:
    run_dir = work / str(trial_id)
    run_dir.mkdir(parents=True)
    config_path = run_dir / "config.json"
    if bad_config:  # its directory is a file: the agent cannot write the config, the start fails
        (run_dir / "blocker").write_text("a file, not a directory")
        config_path = run_dir / "blocker" / "config.json"
    return StartTrial(trial_id=trial_id, attempt=0, rank=0, world_size=1, program=PROBE,
                      config_path=str(config_path), data_path="unused", run_dir=str(run_dir),
                      log_path=str(run_dir / "train.log"), time_budget_s=30, kill_after_s=30,
                      init_method=None, device="cpu", read_result=True,
                      config_json=json.dumps({"action": action}),
                      after=None if after is None else (after, 0))


def receive(comm, received: list[dict]) -> dict:
    msg = comm.recv(source=1, tag=TAG_EXITED)
    record = {"type": type(msg).__name__, **asdict(msg)}
    received.append(record)
    return record


def scheduler(comm, out: Path, work: Path) -> None:
    received: list[dict] = []
    send = lambda msg, tag: comm.send(msg, dest=1, tag=tag)  # noqa: E731
    # 1. trial 1 is sent ahead behind trial 0 (hangs); killing 0 starts 1, reported after 0's exit
    send(start(work, 0, "hang"), TAG_START)
    send(start(work, 1, "exit", after=0), TAG_START)
    time.sleep(0.5)
    send(KillTrial(0, 0, "test"), TAG_KILL)
    receive(comm, received)
    receive(comm, received)
    # 2. trial 3 sent ahead behind 2 cannot start (its config cannot be written): reported after 2
    send(start(work, 2, "hang"), TAG_START)
    send(start(work, 3, "exit", after=2, bad_config=True), TAG_START)
    time.sleep(0.5)
    send(KillTrial(2, 0, "test"), TAG_KILL)
    receive(comm, received)
    receive(comm, received)
    # 3. trial 5 sent ahead behind 4 is taken back: the agent says so; 4's exit starts nothing
    send(start(work, 4, "hang"), TAG_START)
    send(start(work, 5, "exit", after=4), TAG_START)
    send(Unqueue(5, 0, (4, 0), "test"), TAG_UNQUEUE)
    receive(comm, received)
    send(KillTrial(4, 0, "test"), TAG_KILL)
    receive(comm, received)
    time.sleep(0.5)
    received.append({"type": "pending after the last exit", "any": comm.Iprobe(source=1, tag=TAG_EXITED)})
    send(Shutdown("test over"), TAG_SHUTDOWN)
    out.write_text(json.dumps(received))


def main() -> None:
    comm = MPI.COMM_WORLD
    out, work = Path(sys.argv[1]), Path(sys.argv[2])
    if comm.Get_rank() == 0:
        scheduler(comm, out, work)
    else:
        agent = Agent(comm, AgentAssignment(slot=0, node=0, local_index=0), hello(comm), "cpu",
                      LauncherSettings("fork-server", (PROBE,)))
        agent.run()


if __name__ == "__main__":
    main()
