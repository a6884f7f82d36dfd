"""The campaign's optimizer in a process of its own, so that rank 0's scheduling thread never
computes a suggestion or absorbs a result (DeepHyper's CBO takes about 15 ms per result, Optuna's
TPE 25-40 ms: at 36 trial ends per second, a 65,536-GCD campaign of 30-minute trials, that alone
would fill one core of rank 0).

:class:`OptimizerProcess` answers what rank 0 asks of an optimizer (:meth:`ask`, :meth:`tell`,
:meth:`tell_past`). A tell is a message on a pipe (the result is absorbed in the other process, in
order). Suggestions are made ahead: the process keeps ``stock`` of them ready, made after every
result told before, so :meth:`ask` waits only when the stock is short (the first wave). Its errors
(a result for an unknown suggestion, a library failure) are raised in rank 0 at its next call,
naming the optimizer.

The process is started with ``spawn`` (never ``fork`` from an MPI rank). It uses no MPI: before
the optimizer is made it switches mpi4py's initialisation off and drops the process manager's
variables (PMI, PMIx, Slurm, PALS) from its environment, so a library that imports mpi4py (DeepHyper)
cannot join, or hang, the campaign's MPI job.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from typing import Any, Mapping

from hpo.optimizers.base import Objective, Suggestion

__all__ = ["OptimizerProcess", "OptimizerProcessError"]

#: environment variables a process manager gives an MPI rank (a child that kept them could join the job)
PROCESS_MANAGER_PREFIXES = ("PMI_", "PMIX_", "SLURM_", "PALS_", "HYDRA_", "MPI_LOCAL", "OMPI_")


class OptimizerProcessError(RuntimeError):
    """The optimizer's process failed (its error, or it died)."""


def _serve(conn: Any, name: str, space: dict[str, Any], seed: int, options: dict[str, Any],
           num_objectives: int) -> None:
    """The optimizer's process: the messages in the order rank 0 sent them (results told, asks)."""
    for key in [k for k in os.environ if k.startswith(PROCESS_MANAGER_PREFIXES)]:
        del os.environ[key]
    import mpi4py

    mpi4py.rc.initialize = mpi4py.rc.finalize = False  # no MPI here, whatever the library imports
    from hpo.optimizers import make_optimizer
    from hpo.space import SearchSpace

    try:
        optimizer = make_optimizer(name, SearchSpace.from_dict(space), seed, options, num_objectives)
    except Exception as exc:  # noqa: BLE001 - every failure goes back to rank 0, which raises it
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    while True:
        message = conn.recv()
        kind = message[0]
        if kind == "stop":
            return
        try:
            if kind == "tell":
                optimizer.tell(*message[1:])
            elif kind == "tell_past":
                optimizer.tell_past(*message[1:])
            elif kind == "ask":  # the pipe keeps order: every result told before is absorbed
                conn.send(("suggestions", optimizer.ask(message[1])))
        except Exception as exc:  # noqa: BLE001
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class OptimizerProcess:
    """The optimizer ``name`` (of :data:`hpo.optimizers.OPTIMIZERS`) in its own process, with
    ``stock`` suggestions kept ready (see the module docstring)."""

    def __init__(self, name: str, space: Any, seed: int, options: Mapping[str, Any], num_objectives: int = 1,
                 stock: int = 64) -> None:
        self.name = name
        self.space = space
        self.stock = max(1, stock)
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, name=f"optimizer-{name}", daemon=True,
                                    args=(child, name, space.to_dict(), seed, dict(options), num_objectives))
        self._process.start()
        child.close()
        self._ready: deque[Suggestion] = deque()
        self._asked = 0  # suggestions asked for and not yet received

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def ask(self, n: int) -> list[Suggestion]:
        """``n`` suggestions: from the stock, waiting only for what it lacks; the stock is then
        asked to be made again."""
        self._receive(block=False)
        while len(self._ready) < n:
            self._request(n - len(self._ready))
            self._receive(block=True)
        out = [self._ready.popleft() for _ in range(n)]
        self._request(self.stock)
        return out

    def available(self, n: int) -> list[Suggestion]:
        """Up to ``n`` suggestions ready now, never waiting (rank 0's loop keeps pumping messages
        while the process makes more); what was taken is asked to be made again."""
        self._receive(block=False)
        out = [self._ready.popleft() for _ in range(min(n, len(self._ready)))]
        self._request(max(self.stock, n - len(out)))
        return out

    def tell(self, suggestion_id: int, objective: Objective, stopped_after: int | None = None) -> None:
        self._send(("tell", suggestion_id, objective, stopped_after))

    def tell_past(self, params: Mapping[str, Any], objective: Objective) -> None:
        self._send(("tell_past", dict(params), objective))

    def close(self) -> None:
        """Stop the process (it has absorbed every result by then)."""
        if self._process.is_alive():
            try:
                self._conn.send(("stop",))
            except OSError:
                pass
            self._process.join(timeout=10)
            if self._process.is_alive():
                self._process.kill()
        self._conn.close()

    # -- the pipe ------------------------------------------------------------------------------
    def _request(self, wanted: int) -> None:
        """Ask for enough that ``wanted`` are ready or on their way, in batches of at least
        ``stock`` (a batched optimizer, DeepHyper's CBO, pays one acquisition per batch)."""
        missing = wanted - len(self._ready) - self._asked
        if missing > 0:
            batch = max(missing, self.stock)
            self._send(("ask", batch))
            self._asked += batch

    def _send(self, message: tuple) -> None:
        self._receive(block=False)
        try:
            self._conn.send(message)
        except OSError as exc:
            raise OptimizerProcessError(f"optimizer {self.name!r}: its process is gone ({exc})") from None

    def _receive(self, block: bool) -> None:
        """Take what the process sent: suggestions into the stock, errors raised."""
        while block or self._conn.poll():
            block = False
            try:
                kind, payload = self._conn.recv()
            except (EOFError, OSError):
                raise OptimizerProcessError(f"optimizer {self.name!r}: its process died "
                                            f"(exit code {self._process.exitcode})") from None
            if kind == "error":
                raise OptimizerProcessError(f"optimizer {self.name!r}: {payload}")
            self._asked -= len(payload)
            self._ready.extend(payload)
