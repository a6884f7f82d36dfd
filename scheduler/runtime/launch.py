"""How a trial process is started: its argument list, environment and GPU binding, its config file,
and the launchers that start it (:class:`Launcher`; :class:`ExecLauncher` here, the default
:class:`scheduler.runtime.fork_server.ForkServerLauncher` forks each trial from a per-agent server
that has imported the program's heavy modules once).

The trial program is any python module with the trainer CLI contract::

    python -m <module> train CONFIG --dataset DATA -o RUN_DIR --time-budget S --device cpu|cuda
                       --no-progress --rank R --world-size W [--local-rank 0]
                       [--init-method file://RUN_DIR/rendezvous.<attempt>]

(as ``hydragnn-ensemble train`` takes them). Output (stdout and stderr) goes to ``RUN_DIR/train.log``
for rank 0 (appended, like the trainer's own lines) and ``RUN_DIR/train.rank<R>.log`` for the others.
It writes ``RUN_DIR/result.json`` (:class:`hydragnn_ensemble.result.TrialResult`; what the runtime
makes of its end is :mod:`scheduler.runtime.outcome`). Exit code 75 says the machine failed it
(:mod:`scheduler.runtime.faults`).

Isolation: every process starts in its own session (``start_new_session=True``), so a hang is killed
together with its children by signalling the process group; it is a child subreaper, so what it
starts stays in its tree whatever session it moves to, and what is left when it ends is killed by
its launcher (:mod:`scheduler.runtime.process_tree`); on Linux it also gets
``PR_SET_PDEATHSIG=SIGKILL`` so it cannot outlive an agent killed with ``kill -9`` (a trial orphaned
by a dead campaign would otherwise race its own re-run after ``--resume``).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable

from hydragnn_ensemble.run_dir import RunDir, VerdictWait
from hydragnn_ensemble.untrusted_files import remove_any, write_atomic
from scheduler.runtime.messages import StartTrial
from scheduler.runtime.process_tree import SUBREAPER, kill_adopted
from scheduler.runtime.trial_process import TrialProcess

GPU_VISIBILITY_VARS: tuple[str, ...] = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
#: Trial processes run this much nicer than the runtime's ranks: when a node is oversubscribed, the
#: rank that has to react (a report, a start) gets the CPU first and trials absorb the delay
#: (bench.campaign_overhead, 16 ranks on 2 cores: idle slot time 18.8% -> 15.0%).
TRIAL_NICENESS = 5
#: Where CUDA clients look for the NVIDIA MPS control daemon unless CUDA_MPS_PIPE_DIRECTORY says
MPS_PIPE_DEFAULT = "/tmp/nvidia-mps"


def mps_control_found(env: dict[str, str]) -> bool:
    """Whether an NVIDIA MPS control daemon's pipe is where this process's CUDA clients would look
    (trials sharing a GPU then run their kernels concurrently, else time-sliced)."""
    return (Path(env.get("CUDA_MPS_PIPE_DIRECTORY") or MPS_PIPE_DEFAULT) / "control").exists()


def kill_margin_s(time_limit_s: float) -> float:
    """Extra time a trial gets beyond its budget before the agent kills it (the trainer should stop
    by itself at ``--time-budget``, counted from its own start; this covers interpreter start-up on
    a loaded node and writing the final checkpoint and result.json)."""
    return min(60.0, max(0.05 * time_limit_s, min(10.0, time_limit_s)))


def trial_argv(start: StartTrial, python: str = sys.executable) -> list[str]:
    """The argument list of one trial process (never a shell string)."""
    argv = [
        python, "-m", start.program, "train", start.config_path,
        "--dataset", start.data_path,
        "-o", start.run_dir,
        "--time-budget", f"{start.time_budget_s:g}",
        "--device", "cuda" if start.device == "gpu" else "cpu",
        "--no-progress",
        "--rank", str(start.rank),
        "--world-size", str(start.world_size),
    ]
    if start.device == "gpu":
        argv += ["--local-rank", "0"]  # the slot's binding leaves exactly one visible GPU
    if start.init_method is not None:
        argv += ["--init-method", start.init_method]
    return argv


def write_config(start: StartTrial) -> None:
    """Write the trial's config.json from the start message, unless it exists (every process of a
    multi-slot trial may write it: same text, atomic rename)."""
    if start.config_json is None:
        return
    path = Path(start.config_path)
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, start.config_json)  # no temporary file left when the disk is full


def write_verdicts(start: StartTrial) -> None:
    """For the process that writes the curve: ``RUN_DIR/verdicts.json`` (the rung epochs after which
    its trainer waits for the campaign's verdict) or none, and no earlier attempt's ``go_on``."""
    if not start.read_result:
        return
    run_dir = RunDir(Path(start.run_dir))
    remove_any(run_dir.go_on)  # whatever an earlier attempt left there
    remove_any(run_dir.verdicts)
    if start.verdict_epochs and start.verdict_wait_s > 0:
        write_atomic(run_dir.verdicts, VerdictWait(frozenset(start.verdict_epochs), start.verdict_wait_s).to_json())


def device_binding(device: str, inherited: dict[str, str], local_index: int) -> dict[str, str]:
    """GPU visibility variables for a trial process on this agent's slot.

    - ``cpu``: hide all GPUs (``CUDA_VISIBLE_DEVICES=""``, ``HIP_VISIBLE_DEVICES=""``).
    - ``gpu`` and the launcher bound one device to this rank (``srun --gpus-per-task=1`` sets e.g.
      ``ROCR_VISIBLE_DEVICES=3``): keep the launcher's binding unchanged.
    - ``gpu`` and the launcher exposed a list (every rank sees all GPUs of the node): pick the
      ``local_index``-th entry of that list.
    - ``gpu`` and nothing set: ``CUDA_VISIBLE_DEVICES=ROCR_VISIBLE_DEVICES=<local_index>`` (ROCm
      filters with ROCR first; HIP_VISIBLE_DEVICES is left alone because it indexes after ROCR).
    """
    if device == "cpu":
        return {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    if device != "gpu":
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
    if inherited:
        out = {}
        for var, value in inherited.items():
            entries = [e for e in value.split(",") if e.strip()]
            out[var] = entries[local_index % len(entries)] if len(entries) > 1 else value
        return out
    return {"CUDA_VISIBLE_DEVICES": str(local_index), "ROCR_VISIBLE_DEVICES": str(local_index)}


def trial_env(base_env: dict[str, str], binding: dict[str, str]) -> dict[str, str]:
    """Environment of a trial process: the agent's, one thread per process, unbuffered output, the
    GPU binding of the slot."""
    env = dict(base_env)
    env.update(
        OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1",
    )
    env.update(binding)
    return env


def _load_prctl(niceness: int = 0, subreaper: bool = False) -> Callable[[], None] | None:
    """A pre-exec hook setting PR_SET_PDEATHSIG=SIGKILL (Linux), with ``subreaper`` making the
    process a child subreaper (:mod:`scheduler.runtime.process_tree`), and raising the niceness by
    ``niceness``, or None when there is nothing to do."""
    if not sys.platform.startswith("linux"):
        return (lambda: os.nice(niceness)) if niceness else None
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def die_with_parent() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if subreaper:
            libc.prctl(SUBREAPER, 1, 0, 0, 0)
        if niceness:
            os.nice(niceness)

    return die_with_parent


class Launcher(ABC):
    """Starts the trial processes of one agent slot and waits for them.

    Contract: :meth:`launch` starts one process (its own session, a child subreaper, output
    appended to ``start.log_path``, the slot's GPU binding in its environment) and returns its
    :class:`TrialProcess`, or raises OSError when it cannot start; :meth:`wait` returns after at most
    ``timeout_s``, early when one of ``procs`` may have ended, and afterwards ``TrialProcess.poll()``
    reports every exit that happened; :meth:`end_leftovers` kills what ended trials left behind
    (called after each exit); :meth:`close` releases the launcher's own resources (the agent has
    already ended its processes).
    """

    @abstractmethod
    def launch(self, start: StartTrial) -> TrialProcess:
        """Start one trial process."""

    @abstractmethod
    def wait(self, procs: list[TrialProcess], timeout_s: float) -> None:
        """Block up to ``timeout_s`` or until one of ``procs`` may have exited."""

    def end_leftovers(self, running: list[TrialProcess]) -> list[int]:
        """Kill the processes ended trials left behind: this process's children (it is a child
        subreaper, :mod:`scheduler.runtime.process_tree`) other than the ``running`` trials and
        the launcher's own helpers; returns their pids."""
        keep = {p.handle.pid for p in running} | set(self.helper_pids())
        return kill_adopted(os.getpid(), keep)

    def helper_pids(self) -> list[int]:
        """Children of this process that the launcher keeps (none by default)."""
        return []

    def ready(self) -> None:
        """Block until trials can be started without further set-up (at once by default)."""

    def close(self) -> None:
        """Release the launcher (nothing by default)."""


class ExecLauncher(Launcher):
    """Starts every trial as a new interpreter: ``python -m PROGRAM train ...``."""

    def __init__(self, binding: dict[str, str], python: str = sys.executable) -> None:
        self.env = trial_env(dict(os.environ), binding)
        self.python = python
        self._preexec = _load_prctl(TRIAL_NICENESS, subreaper=True)

    def launch(self, start: StartTrial) -> TrialProcess:
        """Start the process; output goes to ``start.log_path``. Raises OSError if it cannot start."""
        Path(start.log_path).parent.mkdir(parents=True, exist_ok=True)
        log_fh = open(start.log_path, "ab")
        t0 = time.time()
        try:
            popen = subprocess.Popen(
                trial_argv(start, self.python),
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=self._preexec,
                close_fds=True,
            )
        except OSError:
            log_fh.close()
            raise
        pidfd = os.pidfd_open(popen.pid) if hasattr(os, "pidfd_open") else None
        return TrialProcess(start, popen, t0, t0 + start.kill_after_s, pidfd=pidfd, log_fh=log_fh)

    def wait(self, procs: list[TrialProcess], timeout_s: float) -> None:
        wait_for_exit(procs, timeout_s)


def wait_for_exit(procs: list[TrialProcess], timeout_s: float, extra_fds: tuple[int, ...] = ()) -> None:
    """Block up to ``timeout_s`` or until one of ``procs`` exits (its pidfd) or one of ``extra_fds``
    becomes readable, whichever is first. Processes without a pidfd must be covered by
    ``extra_fds``; otherwise this sleeps the whole timeout."""
    fds = [p.pidfd for p in procs if p.pidfd is not None]
    if len(fds) == len(procs) or extra_fds:
        select.select([*fds, *extra_fds], [], [], timeout_s)
    else:
        time.sleep(timeout_s)
