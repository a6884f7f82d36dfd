"""When to stop: early stopping on the validation objective, and the wall-clock budget."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class EarlyStopping:
    """Stop after ``patience`` epochs without a strictly better validation objective."""

    patience: int
    best: float = math.inf
    bad_epochs: int = 0

    def step(self, value: float) -> bool:
        """Record an epoch's objective; True when training should stop."""
        if value < self.best:
            self.best = value
            self.bad_epochs = 0
            return False
        self.bad_epochs += 1
        return self.bad_epochs >= self.patience


@dataclass
class TimeBudget:
    """A wall-clock budget of ``budget_s`` seconds (``None`` = unlimited) started at ``start``
    (``clock`` seconds; default: now). ``clock`` is ``time.monotonic`` unless a test gives its own.

    ``reserve_s`` is kept for the final evaluation of the best model: training stops when less than
    that remains."""

    budget_s: float | None
    start: float | None = None
    reserve_s: float = 0.0
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if self.start is None:
            self.start = self.clock()

    def now(self) -> float:
        """The budget's clock (what the trainer times its epochs with)."""
        return self.clock()

    @property
    def elapsed(self) -> float:
        return self.clock() - self.start

    def expired(self) -> bool:
        if self.budget_s is None:
            return False
        return self.clock() - self.start > self.budget_s - self.reserve_s
