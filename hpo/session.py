"""An open campaign: what rank 0 holds while a campaign runs, opened and closed in one place.

:meth:`CampaignSession.open` takes the directory's lock, checks a resumed campaign against its frozen
copy (or refuses a non-empty directory for a new one) and freezes the campaign, replays the
journal, builds the optimizer (told every finished trial) and the candidate pool, and opens the
journal for appending (:class:`~hpo.journal_writer.BackgroundJournal`: written at once, fsync'ed by
a background thread), and says which trials of earlier runs to start again
(:attr:`~CampaignSession.to_restart`). From then on :meth:`record` journals events and folds them
into the live :class:`~hpo.state.CampaignState`, from which ``results.csv`` is written
(:meth:`write_results`, never a replay of the journal). :meth:`close` syncs the journal and
releases the lock.

The MPI runtime (``scheduler.runtime``) keeps only the choreography: who runs what where.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from hpo.campaign import RESUMABLE_KEYS, CampaignConfig, check_unchanged, freeze
from hpo.campaign_dir import CampaignDir, CampaignLock, check_new, check_resumable
from hpo.events import JournalEvent
from hpo.journal import Journal, JournalContents, read_journal
from hpo.journal_writer import BackgroundJournal
from hpo.optimizer_process import OptimizerProcess
from hpo.optimizers import Optimizer, make_optimizer
from hpo.pool import CandidatePool
from hpo.results_table import ResultsCsv
from hpo.state import CampaignState

#: Each resume seeds the optimizer with ``seed + RESUME_SEED_STRIDE * k`` (k-th run of the campaign),
#: so it does not hand out the first run's suggestions again.
RESUME_SEED_STRIDE = 1000


@dataclass(frozen=True)
class Unfinished:
    """A trial of an earlier run to start again: as its next attempt (``attempt > 0``: it was
    running, or failed with a re-run decided) or for the first time (suggested, never started)."""

    trial_id: int
    params: dict[str, Any]
    attempt: int
    size: int  # slots of its last (or decided) attempt; 0: none yet
    retries_used: int = 0
    oom_retried: bool = False


@dataclass
class CampaignSession:
    """An open campaign (see the module docstring)."""

    cdir: CampaignDir
    config: CampaignConfig
    lock: CampaignLock
    journal: BackgroundJournal
    state: CampaignState
    optimizer: Optimizer | OptimizerProcess
    pool: CandidatePool
    to_restart: list[Unfinished]  # trials of earlier runs to start in this one (within max_trials)
    notices: list[str] = field(default_factory=list)
    _results: ResultsCsv | None = field(default=None, repr=False)  # results.csv, kept as trials finish

    @classmethod
    def open(cls, config: CampaignConfig, cdir: CampaignDir, *, resume: bool, force_unlock: bool = False,
             ask_batch: int = 64, own_process: bool = False) -> "CampaignSession":
        """Open ``cdir`` for ``config`` (see the module docstring); raises the campaign errors
        (ValueError subclasses naming the problem) with nothing left locked. ``own_process``: the
        optimizer runs in a process of its own (:mod:`hpo.optimizer_process`)."""
        cdir.root.mkdir(parents=True, exist_ok=True)
        lock = CampaignLock(cdir.lock)
        lock.acquire(force=force_unlock)
        optimizer: Optimizer | OptimizerProcess | None = None
        try:
            notices = [lock.notice] if lock.notice else []
            contents = cls._earlier_events(config, cdir, resume, notices)
            freeze(config, cdir.root)
            cdir.trials.mkdir(exist_ok=True)
            state = CampaignState.replay(contents.events, contents.where(cdir.journal))
            runs = len(state.segments)  # the runs before this one
            seed = config.seed + RESUME_SEED_STRIDE * runs
            optimizer = (
                OptimizerProcess(config.optimizer.name, config.space, seed, config.optimizer.options,
                                 len(config.objective_set.keys), stock=ask_batch) if own_process else
                make_optimizer(config.optimizer.name, config.space, seed, config.optimizer.options,
                               num_objectives=len(config.objective_set.keys)))
            for params, objective in state.history():
                optimizer.tell_past(params, objective)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a torn line was reported in the notices
                journal = BackgroundJournal(Journal(cdir.journal))
            to_restart = unfinished(state, max(0, config.max_trials - state.num_finished))
            return cls(cdir, config, lock, journal, state, optimizer, CandidatePool(optimizer, batch_size=ask_batch),
                       to_restart, notices)
        except BaseException:
            if isinstance(optimizer, OptimizerProcess):
                optimizer.close()
            lock.release()
            raise

    @staticmethod
    def _earlier_events(config: CampaignConfig, cdir: CampaignDir, resume: bool,
                        notices: list[str]) -> JournalContents:
        if not resume:
            check_new(cdir)  # again under the lock: another start may have come in between
            return JournalContents([])
        check_resumable(cdir)
        check_unchanged(config, cdir.root, allow=RESUMABLE_KEYS)
        contents = read_journal(cdir.journal)
        if contents.torn_line is not None:
            notices.append(f"{cdir.journal}: dropped a torn last line {contents.torn_line_number} "
                           f"({len(contents.torn_line)} bytes) left by the crash")
        return contents

    def record(self, events: list[JournalEvent]) -> None:
        """Journal ``events`` (written now, fsync'ed soon) and fold them into the live state."""
        self.journal.submit(events)
        for event in events:
            self.state.apply(event)

    def sync(self) -> None:
        """Wait until everything recorded is fsync'ed."""
        self.journal.sync()

    def write_results(self, whole: bool = False) -> None:
        """``results.csv`` from the live state: the trials gathered since the last call appended,
        or (``whole``) the table rewritten."""
        if self._results is None:
            self._results = ResultsCsv(self.cdir.results_csv)
        if whole:
            self._results.rewrite(self.state)
        else:
            self._results.update(self.state)

    def close(self) -> None:
        """Sync and close the journal, stop the optimizer's own process, release the lock."""
        try:
            self.journal.close()
        finally:
            if isinstance(self.optimizer, OptimizerProcess):
                self.optimizer.close()
            self.lock.release()


def unfinished(state: CampaignState, room: int) -> list[Unfinished]:
    """Trials of earlier runs to start again, at most ``room``: first those cut short (running at
    the stop, or failed with a re-run decided), then those suggested and never started."""
    out: list[Unfinished] = []
    for record in state.running_at_crash[:room]:
        last = record.last_attempt
        size = (last.retry_size or last.size) if last is not None else 0  # a decided retry's size
        retried = [a for a in record.attempts.values() if a.retry_size is not None]
        out.append(Unfinished(record.trial_id, dict(record.params), record.next_attempt, size,
                              retries_used=sum(a.retry_size <= a.size for a in retried),
                              oom_retried=any(a.retry_size > a.size for a in retried)))
    for record in state.suggested_only[:max(0, room - len(out))]:
        out.append(Unfinished(record.trial_id, dict(record.params), 0, 0))
    return out
