"""Journal writes on rank 0's critical path, fsyncs off it.

Rank 0 produces about three events per trial. ``Journal.append`` fsyncs each one, and an fsync costs
3.5 ms on the development machine's disk when it is quiet and ~18 ms when other jobs use it: at 15
slots of 50 ms trials rank 0 would spend its time waiting for the disk while slots sit idle.

:class:`BackgroundJournal` splits the two: :meth:`~BackgroundJournal.submit` encodes and writes a
loop turn's events at once, in rank 0's thread (into the operating system's cache: tens of
microseconds), and a syncer thread fsyncs whatever was written since its last fsync (one fsync for
many turns when the disk is slow; fsync releases the GIL, and the thread does nothing else, so it
never competes with rank 0 for the interpreter).

Crash semantics: events reach the file in order, whole lines, before the actions they record happen
(rank 0 submits a turn's events before its start messages leave). Killing the job (even rank 0 with
``kill -9``) loses nothing submitted: the lines are in the kernel's cache. A crash of the machine
loses at most what was not yet fsync'ed, and leaves at most one torn last line (dropped on resume). A
lost ``trial_started``/``trial_finished`` makes that trial look not started/still running after a
resume, so it is re-run: the same outcome as a crash a few milliseconds earlier. Trial processes die
with their agent (PR_SET_PDEATHSIG), so no process of a forgotten attempt outlives the crash. Nothing
outside rank 0's memory (optimizer state, results.csv) is treated as durable: it is rebuilt from the
journal.
"""

from __future__ import annotations

import threading

from hpo.events import JournalEvent
from hpo.journal import Journal


class BackgroundJournal:
    """Writes event batches to a :class:`~hpo.journal.Journal` at once and fsyncs them from a
    syncer thread.

    :meth:`submit` validates and writes (never waits for the disk); :meth:`sync` waits until
    everything submitted is fsync'ed; :meth:`close` syncs and stops the thread. An error of the
    syncer thread is raised by the next :meth:`submit`/:meth:`sync`.
    """

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._submitted = 0  # events written by submit()
        self._synced = 0  # events known to be fsync'ed
        self._closing = False
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self.fsyncs = 0
        self._thread = threading.Thread(target=self._run, name="journal-syncer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._synced == self._submitted and not self._closing:
                    self._cond.wait()
                if self._synced == self._submitted and self._closing:
                    return
                target = self._submitted
            try:
                self.journal.fsync()
            except BaseException as exc:  # handed to the main thread by submit()/sync()
                with self._cond:
                    self._error = exc
                    self._cond.notify_all()
                return
            with self._cond:
                self._synced = target
                self.fsyncs += 1
                self._cond.notify_all()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"writing the journal {self.journal.path} failed: {self._error!r}") from self._error

    def submit(self, events: list[JournalEvent | dict]) -> list[dict]:
        """Write events now (``time`` added and checked) and have them fsync'ed soon; returns the
        records as written."""
        with self._cond:
            self._raise_error()
        records = self.journal.write_many(events)
        if records:
            with self._cond:
                self._submitted += len(records)
                self._cond.notify_all()
        return records

    def sync(self) -> None:
        """Block until every submitted event is fsync'ed."""
        with self._cond:
            while self._synced < self._submitted and self._error is None:
                self._cond.wait()
            self._raise_error()

    def close(self) -> None:
        """Sync, stop the syncer thread, close the file."""
        try:
            self.sync()
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
            self._thread.join()
            self.journal.close()
