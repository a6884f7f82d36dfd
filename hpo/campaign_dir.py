"""The campaign directory: the one place that knows its file names, its lock, and what may start in it.

Layout (the single source of truth of a campaign)::

    CAMPAIGN_DIR/campaign.yaml      frozen copy of the validated campaign (absolute paths)
    CAMPAIGN_DIR/base_config.json   frozen copy of the base HydraGNN config; trials start from it
    CAMPAIGN_DIR/journal.jsonl      append-only events, rank 0 is the only writer
    CAMPAIGN_DIR/results.csv        the campaign state as a table (DeepHyper columns)
    CAMPAIGN_DIR/lock               {"host", "pid", "proc_start", "time"} of the running campaign
    CAMPAIGN_DIR/trials/<id>/       a run directory (:mod:`hydragnn_ensemble.run_dir`): config.json,
                                    result.json, checkpoint, train.log
    CAMPAIGN_DIR/report/            what ``report`` writes

Every reader and writer of a campaign (the runtime, ``report``, ``select``, ``export``) goes through
:class:`CampaignDir`. The campaign directory must be on a file system that every node sees
(Lustre/GPFS on a cluster): rank 0 writes the trial configs there, the trial processes write their
results there.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hydragnn_ensemble.path_guard import PathGuardError, check_no_overlap
from hydragnn_ensemble.run_dir import RunDir

FROZEN_CAMPAIGN = "campaign.yaml"
FROZEN_BASE_CONFIG = "base_config.json"
JOURNAL = "journal.jsonl"
RESULTS_CSV = "results.csv"
LOCK = "lock"
TRIALS = "trials"
REPORT = "report"


class CampaignDirError(ValueError):
    """A campaign directory that cannot be used as asked (in use, exists, changed config)."""


@dataclass(frozen=True)
class LockInfo:
    """Who holds a campaign directory."""

    host: str
    pid: int
    proc_start: int | None  # kernel start time of the pid (detects pid reuse), None off Linux
    time: float

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))
        return f"pid {self.pid} on host {self.host} since {when}"


def _proc_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state first), None if unknown (not Linux, no such pid)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    # the command name (field 2) may contain spaces: split after its closing parenthesis
    return stat[stat.rindex(")") + 2:].split()


def _proc_start(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (Linux /proc), None if unknown."""
    fields = _proc_stat(pid)
    return int(fields[19]) if fields else None


def _alive(info: LockInfo) -> bool:
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _proc_stat(info.pid)
    if fields is not None:
        if fields[0] in ("Z", "X"):
            return False  # killed, not reaped yet (a zombie holds nothing)
        if info.proc_start is not None and int(fields[19]) != info.proc_start:
            return False  # the pid was reused by another process
    return True


class CampaignLock:
    """An ``O_EXCL`` lock file. ``acquire`` refuses a directory held by a live process; a lock left by
    a dead process on this host is taken over; one from another host needs ``force=True``."""

    STALE_EMPTY_S = 30.0  # an unreadable lock this old was torn by a crash while being written

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.held = False
        self.notice: str | None = None  # what acquire() did about a stale lock, for the user

    def _read(self) -> LockInfo | None:
        try:
            return LockInfo(**json.loads(self.path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def _try_create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        pid = os.getpid()
        info = LockInfo(socket.gethostname(), pid, _proc_start(pid), time.time())
        with os.fdopen(fd, "w") as fh:
            json.dump(asdict(info), fh)
            fh.flush()
            os.fsync(fh.fileno())
        return True

    def _remove_stale(self) -> None:
        aside = self.path.with_name(f"{self.path.name}.stale.{os.getpid()}")
        try:
            os.replace(self.path, aside)
            aside.unlink()
        except FileNotFoundError:
            pass

    def acquire(self, force: bool = False) -> None:
        for _ in range(3):
            if self._try_create():
                self.held = True
                return
            info = self._read()
            where = f"campaign directory {self.path.parent} is in use"
            if info is None:
                age = time.time() - self.path.stat().st_mtime if self.path.exists() else 0.0
                if not force and age < self.STALE_EMPTY_S:
                    raise CampaignDirError(f"{where}: lock file {self.path} is being written")
                self.notice = f"removed an unreadable lock file {self.path}"
            elif info.host == socket.gethostname():
                if _alive(info):
                    raise CampaignDirError(
                        f"{where} by {info.describe()} (lock file {self.path}); "
                        "wait for it to finish or stop it first")
                self.notice = f"removed a stale lock of {info.describe()} (that process is gone)"
            elif not force:
                raise CampaignDirError(
                    f"{where} by {info.describe()} (lock file {self.path}); this host cannot check "
                    "whether that process still runs: if no campaign runs there any more, rerun with "
                    "--force-unlock")
            else:
                self.notice = f"forced removal of the lock of {info.describe()}"
            self._remove_stale()
        raise CampaignDirError(f"could not take the lock {self.path}: another process keeps taking it")

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


@dataclass(frozen=True)
class CampaignDir:
    """Paths of one campaign directory (see the module docstring)."""

    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike) -> "CampaignDir":
        return cls(Path(path))

    @property
    def campaign_yaml(self) -> Path:
        return self.root / FROZEN_CAMPAIGN

    @property
    def base_config(self) -> Path:
        return self.root / FROZEN_BASE_CONFIG

    @property
    def journal(self) -> Path:
        return self.root / JOURNAL

    @property
    def results_csv(self) -> Path:
        return self.root / RESULTS_CSV

    @property
    def lock(self) -> Path:
        return self.root / LOCK

    @property
    def trials(self) -> Path:
        return self.root / TRIALS

    @property
    def report(self) -> Path:
        return self.root / REPORT

    def trial_dir(self, trial_id: int) -> Path:
        return self.trials / str(trial_id)

    def trial(self, trial_id: int) -> RunDir:
        """The run directory of trial ``trial_id``."""
        return RunDir(self.trial_dir(trial_id))

    def trial_ids_on_disk(self) -> list[int]:
        """Ids of the trial directories that exist, ascending."""
        if not self.trials.is_dir():
            return []
        return sorted(int(p.name) for p in self.trials.iterdir() if p.is_dir() and p.name.isdigit())

    def has_campaign(self) -> bool:
        return self.journal.exists() and self.journal.stat().st_size > 0


#: What a campaign start writes before its first journal line (a crash there leaves only these).
START_FILES: frozenset[str] = frozenset({FROZEN_CAMPAIGN, FROZEN_BASE_CONFIG, LOCK, TRIALS, JOURNAL})


def check_outside_inputs(cdir: CampaignDir, inputs: list[Path]) -> None:
    """Refuse a campaign directory that is, contains or lies inside one of the campaign's inputs
    (the campaign file, the base config, the dataset): the campaign writes ``campaign.yaml`` and
    ``base_config.json`` into it."""
    try:
        check_no_overlap(cdir.root, inputs, "campaign directory")
    except PathGuardError as exc:
        raise CampaignDirError(str(exc)) from None


def check_new(cdir: CampaignDir) -> None:
    """Refuse to start a new campaign over an existing one, or in a directory holding anything else
    (a campaign never writes into a foreign directory). An empty directory, or one a crashed start
    left before its first journal line, is fine."""
    if cdir.has_campaign():
        raise CampaignDirError(
            f"{cdir.root} already holds a campaign ({cdir.journal}); use --resume to continue it "
            "or choose another directory with -o")
    if not cdir.root.is_dir():
        return
    foreign = sorted(p.name for p in cdir.root.iterdir() if p.name not in START_FILES)
    trials = cdir.trials
    if foreign or (trials.is_dir() and any(trials.iterdir())):
        shown = ", ".join(foreign[:5] or ["trials/..."])
        raise CampaignDirError(
            f"{cdir.root} is not empty ({shown}) and holds no campaign: a campaign directory must be "
            "new or empty; choose another directory with -o")


def check_resumable(cdir: CampaignDir) -> None:
    """Refuse --resume where there is nothing to resume."""
    if not cdir.has_campaign():
        raise CampaignDirError(f"--resume: {cdir.root} holds no campaign (no {cdir.journal.name})")
