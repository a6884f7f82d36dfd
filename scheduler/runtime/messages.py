"""Messages between the scheduler rank (rank 0) and the agent ranks.

Every message is a small frozen dataclass sent with mpi4py's pickle-based point-to-point calls
(``comm.isend`` / ``comm.recv``); each kind travels under its own MPI tag so a receiver can tell what
arrives from ``MPI.Status.Get_tag()`` without unpickling first.

Flow::

    rank 0                                   agent r
      <-- gather: AgentHello -----------------   (start-up, collective)
      --- bcast: {rank: AgentAssignment} ---->   (start-up, collective)
      --- StartTrial (TAG_START) ------------>   start one process of a trial on its slot (or, with
                                                 ``after``, as soon as that trial's process exits)
      --- KillTrial (TAG_KILL) -------------->   terminate it (another part of the trial failed)
      <-- EpochsReported (TAG_EXITED) --------   epochs the trial finished (its progress.jsonl lines)
      --- StopTrial (TAG_STOP) -------------->   ask the trial to stop after its epoch (early discarding)
      --- GoOn (TAG_STOP) ------------------->   the stopper let it go on after a rung epoch (it waits for this)
      --- MoveTrial (TAG_STOP) -------------->   ask it to stop after its epoch, keeping its training state
                                                 (it goes on from there on more slots: a malleable trial)
      <-- PartExited (TAG_EXITED) ------------   the process ended (any way); the slot is free again
      --- Unqueue (TAG_UNQUEUE) ------------->   drop a start sent ahead, unless it has started
      <-- Unqueued (TAG_EXITED) --------------   dropped (same tag as the exits: kept in order with them)
      --- Shutdown (TAG_SHUTDOWN) ----------->   kill whatever still runs, leave the loop
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydragnn_ensemble.result import EpochReport, TrialResult

TAG_START = 11
TAG_KILL = 12
TAG_SHUTDOWN = 13
TAG_UNQUEUE = 14
TAG_STOP = 15
TAG_EXITED = 21


@dataclass(frozen=True)
class AgentHello:
    """What an agent tells rank 0 at start-up: where it runs and which GPUs the launcher gave it."""

    rank: int
    host: str
    inherited_devices: dict[str, str]  # the GPU visibility variables the launcher set (srun/mpirun)
    mps_control: bool = False  # an NVIDIA MPS control daemon serves this agent's trials (GPU sharing)


@dataclass(frozen=True)
class AgentAssignment:
    """Rank 0's answer at start-up: the agent's global slot id and its device index on the host."""

    slot: int
    node: int
    local_index: int  # index of this agent among the agents of its host (GPU binding fallback)


@dataclass(frozen=True)
class LauncherSettings:
    """How agents start trial processes (broadcast at start-up): ``kind`` "fork-server" or "exec";
    ``preload``: the modules a fork server imports once."""

    kind: str
    preload: tuple[str, ...]


@dataclass(frozen=True)
class StartTrial:
    """Start process ``rank`` of ``world_size`` of one trial attempt on the receiving agent's slot."""

    trial_id: int
    attempt: int
    rank: int
    world_size: int
    program: str  # python module with the trainer CLI contract
    config_path: str
    data_path: str
    run_dir: str
    log_path: str
    time_budget_s: float  # passed to the trainer (--time-budget): it should stop by itself
    kill_after_s: float  # hard limit enforced by the agent (time budget + margin)
    init_method: str | None  # torch.distributed rendezvous for world_size > 1
    device: str  # "cpu" | "gpu"
    read_result: bool  # True on the process whose run directory result.json belongs to (rank 0)
    config_json: str | None = None  # set for a new trial: the agent writes config_path (if absent)
    after: tuple[int, int] | None = None  # (trial id, attempt) running on this slot: start when it exits
    log_max_bytes: int = 64 * 1024 * 1024  # the agent cuts log_path to its tail beyond this
    stop_grace_s: float = 30.0  # asked to stop, it is terminated after this (or 2 x its longest epoch)
    verdict_epochs: tuple[int, ...] = ()  # after these epochs the trainer waits for StopTrial or GoOn
    verdict_wait_s: float = 0.0  # ... at most this long (RUN_DIR/verdicts.json)


@dataclass(frozen=True)
class KillTrial:
    """Terminate the agent's process of this trial attempt (SIGTERM, then SIGKILL after a grace)."""

    trial_id: int
    attempt: int
    reason: str


@dataclass(frozen=True)
class StopTrial:
    """Ask this trial attempt to stop after its current epoch (it writes result.json as ``stopped``)."""

    trial_id: int
    attempt: int
    reason: str


@dataclass(frozen=True)
class MoveTrial:
    """Ask this trial attempt to stop after its current epoch (never inside one) keeping its
    training state: rank 0 starts its continuation on more slots from that state."""

    trial_id: int
    attempt: int
    reason: str


@dataclass(frozen=True)
class GoOn:
    """The stopper let this trial attempt go on after ``epoch`` (a rung): its trainer need not wait."""

    trial_id: int
    attempt: int
    epoch: int


@dataclass(frozen=True)
class EpochsReported:
    """Epochs a trial attempt finished since the last report: its new ``progress.jsonl`` lines
    (:mod:`hydragnn_ensemble.train.progress`), checked by :func:`scheduler.runtime.progress_tail.parse_line`."""

    agent_rank: int
    trial_id: int
    attempt: int
    epochs: tuple[EpochReport, ...]


@dataclass(frozen=True)
class Unqueue:
    """Drop the start of this trial attempt sent ahead (``StartTrial.after``) if it has not started."""

    trial_id: int
    attempt: int
    after: tuple[int, int]  # the start's ``after``: the trial attempt it waits for
    reason: str


@dataclass(frozen=True)
class Unqueued:
    """The agent dropped a start sent ahead before it started (the answer to :class:`Unqueue`; a
    start that had begun gets no answer: it runs and reports its exit)."""

    agent_rank: int
    trial_id: int
    attempt: int
    after: tuple[int, int]


@dataclass(frozen=True)
class Shutdown:
    """The campaign is over: kill anything still running and leave the agent loop."""

    reason: str


@dataclass(frozen=True)
class PartExited:
    """One trial process ended; the agent's slot is free again.

    ``returncode`` follows :class:`subprocess.Popen` (negative = killed by that signal).
    ``timed_out``: the agent killed it for exceeding ``kill_after_s``; ``killed_reason``: rank 0 asked
    (``KillTrial``) or the agent shut down. ``result``: the ``result.json`` read (once, by the agent)
    when ``read_result`` was set and the file was valid; ``result_error`` says why it could not be read.
    ``fault``: an infrastructure fault ended it (:mod:`scheduler.runtime.faults`): not the trial's.
    """

    agent_rank: int
    trial_id: int
    attempt: int
    rank: int
    returncode: int
    start_time: float
    end_time: float
    timed_out: bool = False
    killed_reason: str | None = None
    result: TrialResult | None = None
    result_error: str | None = None
    log_tail: str = ""
    extra: dict = field(default_factory=dict)
    fault: str | None = None

    @property
    def wall_time_s(self) -> float:
        return self.end_time - self.start_time
