"""The agent's side of the fork server (:mod:`scheduler.runtime.zygote`): trials without a cold start.

Every agent starts one server when it starts (it imports the trial program's heavy modules while rank
0 sets the campaign up); each trial is then one ``fork()`` of that server instead of a new
interpreter importing torch. If the server cannot start, or dies, the agent goes on with
:class:`~scheduler.runtime.launch.ExecLauncher` and says so once on stderr: a broken fork
server costs speed, never trials.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scheduler.runtime.messages import StartTrial
from scheduler.runtime.launch import (
    TRIAL_NICENESS,
    ExecLauncher,
    Launcher,
    _load_prctl,
    trial_argv,
    trial_env,
    wait_for_exit,
)
from scheduler.runtime.process_tree import kill_adopted
from scheduler.runtime.trial_process import TrialProcess

READY_TIMEOUT_S = 900.0  # importing torch from a cold parallel file system can take minutes
REPLY_TIMEOUT_S = 60.0

#: Modules the built-in trainer imports before it trains (``hydragnn_ensemble train``).
TRAINER_PRELOAD: tuple[str, ...] = (
    "torch", "torch_geometric", "hydragnn_ensemble.cli", "hydragnn_ensemble.cli.commands.train",
    "hydragnn_ensemble.train", "graph_builders.store",
)


def default_preload(program: str) -> list[str]:
    """Modules worth importing once for ``program``: the trainer's stack for the built-in trainer,
    the program module itself otherwise (a trial program must not do work at import)."""
    if program == "hydragnn_ensemble":
        return list(TRAINER_PRELOAD)
    return [program]


@dataclass
class ForkedChild:
    """A trial process forked by the server (not our child: the server reports its exit code)."""

    pid: int
    returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


class ForkServerError(OSError):
    """The fork server is gone or does not answer."""


class ForkServerLauncher(Launcher):
    """Forks trials from a per-agent server holding ``preload`` already imported."""

    def __init__(self, binding: dict[str, str], preload: list[str], python: str = sys.executable,
                 stderr=None) -> None:
        self.fallback = ExecLauncher(binding, python)
        self.stderr = stderr if stderr is not None else sys.stderr
        self.preload = list(preload)
        self.ready_info: dict | None = None
        self.dead_reason: str | None = None
        self._buffer = b""
        self._next_id = 0
        self._running: dict[int, TrialProcess] = {}
        self._early_exits: dict[int, int] = {}  # exits read before the reply with that pid
        try:
            self.server = subprocess.Popen(
                [python, str(Path(__file__).with_name("zygote.py")), *self.preload],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=trial_env(dict(os.environ), binding),
                preexec_fn=_load_prctl(), close_fds=True,
            )
        except OSError as exc:
            self.server = None
            self._give_up(f"could not start: {exc}")

    # -- the pipe ----------------------------------------------------------------------------------
    def _give_up(self, reason: str) -> None:
        """The server is unusable: its children died with it (PDEATHSIG); later trials are exec'd."""
        if self.dead_reason is not None:
            return
        self.dead_reason = reason
        print(f"agent: the trial fork server {reason}; starting trials with a new interpreter each",
              file=self.stderr, flush=True)
        for proc in self._running.values():
            proc.handle.returncode = -signal.SIGKILL
            proc.fault = f"the trial fork server {reason} (its trials died with it)"
            if proc.killed_reason is None:
                proc.killed_reason = f"the agent's trial fork server {reason}"
        self._running.clear()
        if self.server is not None and self.server.poll() is None:
            self.server.kill()

    def _read(self, timeout_s: float) -> list[dict]:
        """Messages available within ``timeout_s`` (0: only what is already there)."""
        if self.dead_reason is not None:
            return []
        fd = self.server.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout_s)
        if not ready:
            return []
        chunk = os.read(fd, 65536)
        if not chunk:
            code = self.server.wait()
            self._give_up(f"exited (code {code})")
            return []
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        messages = [json.loads(line) for line in lines if line.strip()]
        for msg in messages:
            if "exited" in msg:
                proc = self._running.pop(msg["exited"], None)
                if proc is not None:
                    proc.handle.returncode = msg["returncode"]
                else:
                    self._early_exits[msg["exited"]] = msg["returncode"]
            elif "ready" in msg and not msg["ready"]:
                self._give_up(msg["error"])
                return []
            elif msg.get("ready"):
                self.ready_info = msg
                if msg["not_imported"]:
                    print(f"agent: the fork server could not import {msg['not_imported']}; the trials "
                          "will import them (and report the error) themselves", file=self.stderr, flush=True)
        return messages

    def _await(self, match, timeout_s: float, what: str) -> dict:
        deadline = time.monotonic() + timeout_s
        while self.dead_reason is None:
            left = deadline - time.monotonic()
            if left <= 0:
                self._give_up(f"did not {what} within {timeout_s:g} s")
                break
            for msg in self._read(left):
                if match(msg):
                    return msg
        raise ForkServerError(self.dead_reason)

    # -- Launcher ----------------------------------------------------------------------------------
    def ready(self) -> None:
        """Wait until the server has imported its modules (or has failed: trials are exec'd then)."""
        if self.ready_info is None and self.dead_reason is None:
            try:
                self._await(lambda m: m.get("ready"), READY_TIMEOUT_S, "finish importing")
            except ForkServerError:
                pass  # reported by _give_up; launch() execs

    def launch(self, start: StartTrial) -> TrialProcess:
        if self.dead_reason is None:
            try:
                return self._fork(start)
            except ForkServerError:
                pass  # already reported by _give_up
        return self.fallback.launch(start)

    def _fork(self, start: StartTrial) -> TrialProcess:
        if self.ready_info is None:
            self._await(lambda m: m.get("ready"), READY_TIMEOUT_S, "finish importing")
        Path(start.log_path).parent.mkdir(parents=True, exist_ok=True)
        argv = trial_argv(start)  # [python, "-m", program, "train", ...]
        request = {"id": self._next_id, "program": start.program, "args": argv[3:],
                   "log_path": start.log_path, "niceness": TRIAL_NICENESS}
        self._next_id += 1
        t0 = time.time()
        try:
            self.server.stdin.write((json.dumps(request) + "\n").encode())
            self.server.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self._give_up(f"stopped reading requests ({exc})")
            raise ForkServerError(self.dead_reason) from exc
        reply = self._await(lambda m: m.get("id") == request["id"], REPLY_TIMEOUT_S, "answer a request")
        if "error" in reply:
            raise OSError(reply["error"])
        pid = reply["pid"]
        proc = TrialProcess(start, ForkedChild(pid, self._early_exits.pop(pid, None)), t0,
                            t0 + start.kill_after_s)
        if proc.handle.returncode is None:
            self._running[pid] = proc
        return proc

    def end_leftovers(self, running: list[TrialProcess]) -> list[int]:
        """What ended trials left behind, both under the server (a child subreaper: it reaps what
        is killed here) and under this process (exec'd trials after the server died)."""
        forked = {p.handle.pid for p in running if isinstance(p.handle, ForkedChild)}
        left = kill_adopted(self.server.pid, forked) if self.server is not None and self.dead_reason is None else []
        return left + super().end_leftovers(running)

    def helper_pids(self) -> list[int]:
        return [self.server.pid] if self.server is not None else []

    def wait(self, procs: list[TrialProcess], timeout_s: float) -> None:
        if self.dead_reason is not None or not self._running:
            wait_for_exit(procs, timeout_s)
            return
        wait_for_exit(procs, timeout_s, extra_fds=(self.server.stdout.fileno(),))
        self._read(0.0)

    def close(self) -> None:
        """Close the request pipe (the server kills what it still runs and exits) and reap it."""
        if self.server is None:
            return
        try:
            self.server.stdin.close()
        except OSError:
            pass
        try:
            self.server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
        self.server.stdout.close()
