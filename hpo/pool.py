"""A pool of pending candidates so placement never waits for the optimizer.

The scheduler takes candidates from the pool (first in, first out with :meth:`CandidatePool.take`,
or a chosen one with :meth:`CandidatePool.remove` when a placement policy looks at the whole pool)
and tops it up with :meth:`CandidatePool.refill` when it is idle; the optimizer is always asked for
whole batches, which is what keeps batched optimizers (DeepHyper CBO) cheap per trial. An optimizer
in a process of its own (:class:`hpo.optimizer_process.OptimizerProcess`) is never waited for: the
pool holds what it has made so far, and the scheduler places fewer candidates until it made more.
"""

from __future__ import annotations

from collections import OrderedDict

from hpo.optimizer_process import OptimizerProcess
from hpo.optimizers.base import Optimizer, Suggestion

__all__ = ["CandidatePool"]


class CandidatePool:
    """Pending suggestions of ``optimizer``, refilled ``batch_size`` at a time."""

    def __init__(self, optimizer: Optimizer | OptimizerProcess, batch_size: int):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"CandidatePool: batch_size must be a positive integer, got {batch_size!r}")
        self.optimizer = optimizer
        self.batch_size = batch_size
        self._pending: OrderedDict[int, Suggestion] = OrderedDict()
        self.num_asks = 0

    @property
    def size(self) -> int:
        """Number of candidates waiting in the pool."""
        return len(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def candidates(self) -> tuple[Suggestion, ...]:
        """The waiting candidates, oldest first (for policies that choose among them)."""
        return tuple(self._pending.values())

    def refill(self, target: int) -> int:
        """Ask the optimizer for whole batches until at least ``target`` candidates wait.

        Returns the number of new candidates (0 when the pool already holds ``target``; with an
        optimizer in its own process, those it had made, maybe fewer)."""
        missing = target - len(self._pending)
        if missing <= 0:
            return 0
        n = -(-missing // self.batch_size) * self.batch_size
        if isinstance(self.optimizer, OptimizerProcess):
            got = self.optimizer.available(n)
        else:
            got = self.optimizer.ask(n)
        for suggestion in got:
            self._pending[suggestion.suggestion_id] = suggestion
        self.num_asks += 1
        return len(got)

    def take(self, n: int) -> list[Suggestion]:
        """The ``n`` oldest candidates (refilling first, in whole batches, only if too few wait;
        fewer when an optimizer in its own process has not made them yet)."""
        if n < 0:
            raise ValueError(f"CandidatePool.take: n must be >= 0, got {n}")
        self.refill(n)
        return [self._pending.popitem(last=False)[1] for _ in range(min(n, len(self._pending)))]

    def remove(self, suggestion_id: int) -> Suggestion:
        """Take one chosen candidate out of the pool."""
        try:
            return self._pending.pop(suggestion_id)
        except KeyError:
            raise KeyError(f"suggestion {suggestion_id} is not in the candidate pool") from None
