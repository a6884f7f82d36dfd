"""The contract every early-discarding stopper fulfils."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterable, Mapping, Sequence

from hpo.stoppers.ordered_values import OrderedValues

Value = float | Sequence[float]  # one objective, or several (multi-objective stoppers)


class Stopper(ABC):
    """Decides from the learning curves trials report which trials to stop early.

    What it sees: :meth:`report` is called once per finished epoch of a trial, in the order the
    campaign learns of them (the journal's order; a resumed campaign replays the same calls before
    it goes on), with ``epoch`` the number of epochs the trial has finished (from 1) and ``value``
    that epoch's validation objective, lower is better (NaN for a non-finite one). A trial that is
    re-run starts again at epoch 1: its new reports replace its earlier ones.

    What it returns: True when the trial should stop now, False to let it go on. It is not asked
    about a trial again after True (unless the trial is re-run). Decisions depend only on the
    sequence of reports (no clock, no randomness), so a replay rebuilds the same state.

    :meth:`expected_fraction` is what the cost model plans with: the fraction of a trial's
    ``max_epochs`` it is expected to train under this stopper (1.0: no discarding).

    :attr:`objectives` says what ``value`` is: 1, the campaign objective (a float); 2, the pair
    ``(campaign objective, seconds the trial has trained so far)``: accuracy against cost, both
    minimised (NaN where not known).

    :attr:`discards` is False for a stopper that never stops a trial (``none``): the campaign then
    runs as without a stopper (:func:`hpo.stoppers.discarding_stopper`). :attr:`EXAMPLE_OPTIONS`
    are options it is built with where any sensible ones will do (the tests, the benches).
    """

    name: str = "base"
    objectives: int = 1
    discards: ClassVar[bool] = True
    EXAMPLE_OPTIONS: ClassVar[Mapping[str, Any]] = {}

    @abstractmethod
    def report(self, trial_id: int, epoch: int, value: Value) -> bool:
        """Record ``value`` of ``trial_id`` after ``epoch`` epochs; True to stop the trial now."""

    def expected_fraction(self, max_epochs: int) -> float:
        """Expected share of ``max_epochs`` a trial trains (1.0 unless the stopper says less)."""
        return 1.0

    def decision_epochs(self, max_epochs: int) -> tuple[int, ...]:
        """The epochs (below ``max_epochs``) after which a report may stop a trial: the campaign
        has the trainer wait there a bounded moment for the verdict (``early_stopping.
        verdict_wait_s``). Empty (the default) for a stopper that may decide after any epoch: its
        trials never wait."""
        return ()

    def first_judged_epoch(self, max_epochs: int) -> int:
        """The epochs a trial must train before this stopper can judge it (its first rung): what a
        trial's time limit must allow for the stopper to compare it with others. The default: the
        first decision epoch, or the whole budget for a stopper that names none."""
        return min(self.decision_epochs(max_epochs), default=max_epochs)

    def replay(self, history: Iterable[tuple[int, int, Value]]) -> dict[int, int]:
        """Feed journaled reports ``(trial_id, epoch, value)`` as the live campaign did: a trial's
        reports after a True (epochs it finished before the stop reached it) are not seen again
        until it is re-run (an epoch not after its last one). Returns the trials whose last attempt
        was told to stop, with the epoch of that decision."""
        decided: dict[int, int] = {}
        last: dict[int, int] = {}
        for trial_id, epoch, value in history:
            if epoch <= last.get(trial_id, 0):
                decided.pop(trial_id, None)
            last[trial_id] = epoch
            if trial_id not in decided and self.report(trial_id, epoch, value):
                decided[trial_id] = epoch
        return decided


class Rungs:
    """Values recorded per trial at each rung (a re-run's value replaces its earlier one) and the
    next rung each trial is to be checked at; what rung-based stoppers share."""

    def __init__(self) -> None:
        self.values: list[dict[int, Value]] = []  # rung -> {trial: value}
        self.next_rung: dict[int, int] = {}
        self.last_epoch: dict[int, int] = {}

    def start(self, trial_id: int, epoch: int) -> int:
        """The rung to check ``trial_id`` at now (a report of an epoch not after its last one
        means the trial was re-run: it starts again at rung 0)."""
        if epoch <= self.last_epoch.get(trial_id, 0):
            self.next_rung[trial_id] = 0
        self.last_epoch[trial_id] = epoch
        return self.next_rung.get(trial_id, 0)

    def record(self, rung: int, trial_id: int, value: Value) -> Value | None:
        """Record ``value`` of ``trial_id`` at ``rung``; returns the value it replaces (None: the
        trial had none there)."""
        while len(self.values) <= rung:
            self.values.append({})
        at = self.values[rung]
        previous = at.pop(trial_id, None)
        at[trial_id] = value
        return previous

    def competing(self, rung: int, trial_id: int, value: Value) -> list[Value]:
        """Record ``value`` at ``rung``; returns the values there of the other trials plus it (a
        copy of the rung: O(n); :class:`RankedRungs` answers a rank without one)."""
        while len(self.values) <= rung:
            self.values.append({})
        at = self.values[rung]
        at.pop(trial_id, None)
        others = list(at.values())
        at[trial_id] = value
        return others + [value]


class RankedRungs(Rungs):
    """:class:`Rungs` of single values (no NaN: a NaN stops its trial before it is recorded), each
    rung also kept sorted (:class:`OrderedValues`), so that a value's place among the others costs
    O(log n) instead of a sort of the rung. Record its values through :meth:`place` only."""

    def __init__(self) -> None:
        super().__init__()
        self.ordered: list[OrderedValues] = []  # rung -> its values, sorted

    def place(self, rung: int, trial_id: int, value: float) -> tuple[int, int]:
        """Record ``value`` at ``rung`` (replacing the trial's earlier value there); returns how
        many of the values there are smaller than it and how many there are (it included)."""
        previous = self.record(rung, trial_id, value)
        while len(self.ordered) <= rung:
            self.ordered.append(OrderedValues())
        ordered = self.ordered[rung]
        if previous is not None:
            ordered.remove(previous)
        below = ordered.count_below(value)
        ordered.add(value)
        return below, len(ordered)


def is_nan(value: Value) -> bool:
    if isinstance(value, (int, float)):
        return math.isnan(value)
    return any(math.isnan(v) for v in value)
