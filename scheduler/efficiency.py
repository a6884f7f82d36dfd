"""Data-parallel efficiency ``e(n)``: ``n`` slots train ``n e(n)`` times as fast as one.

:class:`ParallelEfficiency` is an assumed Amdahl model (the simulator's truth);
:class:`LearntEfficiency` (the MPI runtime's) assumes no speed-up from more slots until attempts
that ran on more than one slot have measured it. The cost model divides a trial's one-slot epoch by
``n e(n)`` (:meth:`scheduler.cost_model.CostModel.train_epoch_seconds`) and tells the efficiency
what each attempt on more than one slot measured (:meth:`Efficiency.learn`). A running trial's move
onto idle slots (a malleable campaign) is judged with :meth:`Efficiency.for_move`, which before any
measurement assumes a modest speed-up: the move itself measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable, Protocol

import numpy as np

__all__ = ["Efficiency", "LearntEfficiency", "ParallelEfficiency"]


class Efficiency(Protocol):
    """Data-parallel efficiency ``e(n)``: ``n`` slots train ``n e(n)`` times as fast as one."""

    def __call__(self, slots: int) -> float:
        """e(slots), in (0, 1]."""

    def for_move(self, slots: int) -> float:
        """e(slots) a running trial's move onto idle slots is judged with (what the trial loses
        if it is wrong: one start-up, on slots that would have idled)."""

    def learn(self, key: Hashable, slots: int, speedup: float) -> None:
        """An attempt (``key``; a later call replaces it) ran on ``slots`` slots ``speedup`` times
        as fast as the model's one-slot prediction."""


@dataclass(frozen=True)
class ParallelEfficiency:
    """Amdahl-like data-parallel efficiency ``e(n) = 1 / (1 + alpha (n - 1))``, with a larger
    ``alpha_inter`` once a trial spans nodes: an assumed model (it learns nothing; the simulator's
    truth)."""

    alpha: float = 0.002
    alpha_inter: float = 0.00005
    slots_per_node: int = 8

    def __call__(self, slots: int) -> float:
        if slots <= self.slots_per_node:
            return 1.0 / (1.0 + self.alpha * (slots - 1))
        intra = self.alpha * (self.slots_per_node - 1)
        return 1.0 / (1.0 + intra + self.alpha_inter * (slots - self.slots_per_node) + self.alpha)

    def for_move(self, slots: int) -> float:
        return self(slots)

    def learn(self, key: Hashable, slots: int, speedup: float) -> None:
        return None


@dataclass
class LearntEfficiency:
    """``e(n) = 1 / (1 + alpha (n - 1))`` with ``alpha`` the median of what attempts on more than
    one slot measured (``alpha = (n / speedup - 1) / (n - 1)``, at least 0); until ``min_attempts``
    such attempts have, ``e(n) = 1 / n``: no speed-up, so the sizer widens a trial only where its
    memory needs it."""

    min_attempts: int = 2
    # what a move onto idle slots assumes until attempts measured alpha (e(2) = 0.8); the moved
    # attempt's epochs on more slots measure it. Trials are never sized wider on it.
    move_prior_alpha: float = 0.25
    _alphas: dict[Hashable, float] = field(default_factory=dict, repr=False)

    @property
    def alpha(self) -> float | None:
        """The learnt alpha (None: not measured yet)."""
        if len(self._alphas) < self.min_attempts:
            return None
        return float(np.median(list(self._alphas.values())))

    def __call__(self, slots: int) -> float:
        alpha = self.alpha
        return _amdahl(slots, 1.0 if alpha is None else alpha)  # alpha 1: e(n) = 1/n, no speed-up

    def for_move(self, slots: int) -> float:
        alpha = self.alpha
        return _amdahl(slots, self.move_prior_alpha if alpha is None else alpha)

    def learn(self, key: Hashable, slots: int, speedup: float) -> None:
        if slots > 1 and speedup > 0 and math.isfinite(speedup):  # alpha 1: no speed-up at all
            self._alphas[key] = min(1.0, max(0.0, (slots / speedup - 1.0) / (slots - 1)))


def _amdahl(slots: int, alpha: float) -> float:
    """``e(n) = 1 / (1 + alpha (n - 1))`` (1 on one slot)."""
    return 1.0 if slots <= 1 else 1.0 / (1.0 + alpha * (slots - 1))
