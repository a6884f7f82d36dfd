"""How rank 0 talks to the agents: messages out by tag, reports in, never blocking the loop.

:class:`MpiTransport` is the campaign's (non-blocking sends kept until complete; reports probed
with ``Iprobe``). A test may give :class:`scheduler.runtime.scheduler_rank.SchedulerRank` any other
object with these methods (agents on a virtual clock)."""

from __future__ import annotations

from typing import Any, Protocol

from scheduler.runtime.messages import TAG_EXITED, PartExited, Unqueued


class Transport(Protocol):
    """Rank 0's side of the messages (see :mod:`scheduler.runtime.messages` for the tags)."""

    def send(self, dest: int, tag: int, message: Any) -> None:
        """Send without waiting for the receiver."""

    def receive(self) -> list[PartExited | Unqueued]:
        """The reports that arrived, in arrival order (one agent's reports keep their order)."""

    def progress(self) -> None:
        """Let finished sends go (called every loop turn)."""

    def close(self) -> None:
        """Wait until every send is complete."""


class MpiTransport:
    """:class:`Transport` over an mpi4py communicator."""

    def __init__(self, comm) -> None:
        self.comm = comm
        self._sends: list = []

    def send(self, dest: int, tag: int, message: Any) -> None:
        self._sends.append(self.comm.isend(message, dest=dest, tag=tag))

    def receive(self) -> list[PartExited | Unqueued]:
        from mpi4py import MPI

        status = MPI.Status()
        got = []
        while self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=TAG_EXITED, status=status):
            got.append(self.comm.recv(source=status.Get_source(), tag=TAG_EXITED))
        return got

    def progress(self) -> None:
        if self._sends:
            self._sends = [r for r in self._sends if not r.Test()]

    def close(self) -> None:
        for r in self._sends:
            r.Wait()
        self._sends = []
