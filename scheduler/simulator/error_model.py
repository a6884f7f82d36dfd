"""How a simulated trial's true run time relates to what placement is told: the error model.

A trial is predicted twice in a campaign: when it is first sized (before the cost model learnt
anything, at scale every candidate of the first pool) and, while it still waits, again after the
model has learnt from the first epochs of other trials (:meth:`scheduler.loop.TrialBook.reprice`).
An error model draws, per trial, ``true / first prediction`` and ``true / learnt prediction`` (None:
the model never gets better, the error stays the first one).

- :class:`LognormalError`: ``exp(sigma Z)`` for the first prediction, ``exp(learnt_sigma Z')`` for
  the learnt one (independent draws).
- :class:`ReplayedError`: ratios measured on a real campaign (its ``journal.jsonl``): each trial's
  median epoch time over the epoch time predicted at its start; the trials that started before the
  model had learnt from ``learn_after`` attempts give the first ratios, the later ones the learnt
  ratios. Both sets are drawn from with replacement, centred on their median (a common bias is one
  number the first epochs teach; the simulated workload's scale is the simulator's own GCD model):
  what is replayed is the scatter.
"""

from __future__ import annotations

import math
import statistics
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpo.events import JournalEventError, TrialProgress, TrialStarted, event_from_json
from hpo.journal import JournalCorruptError, read_events


class ErrorModelError(ValueError):
    """A journal the error model cannot be measured from (names the file and the problem)."""


@dataclass(frozen=True)
class TrialError:
    """One trial's draw: true time over its first prediction, and over its prediction once the
    cost model learnt (None: not modelled, the first prediction stays)."""

    first: float
    learnt: float | None = None


class ErrorModel(ABC):
    """Draws each simulated trial's :class:`TrialError`."""

    @abstractmethod
    def draw(self, z: float, rng: np.random.Generator) -> TrialError:
        """The error of one trial; ``z`` is the trial's own standard normal draw (the same trial
        gets the same ``z`` under every model), ``rng`` any further randomness."""

    @abstractmethod
    def describe(self) -> str:
        """One line for tables: what the model is and where its figures come from."""


@dataclass(frozen=True)
class LognormalError(ErrorModel):
    """``exp(sigma z)``; once learnt ``exp(learnt_sigma z')`` (``learnt_sigma`` None: no learning)."""

    sigma: float
    learnt_sigma: float | None = None

    def __post_init__(self) -> None:
        if self.sigma < 0 or (self.learnt_sigma is not None and self.learnt_sigma < 0):
            raise ValueError(f"sigma must be >= 0, got {self.sigma} and {self.learnt_sigma}")

    def draw(self, z: float, rng: np.random.Generator) -> TrialError:
        learnt = None if self.learnt_sigma is None else math.exp(self.learnt_sigma * rng.standard_normal())
        return TrialError(math.exp(self.sigma * z), learnt)

    def describe(self) -> str:
        learnt = "" if self.learnt_sigma is None else f", learnt {self.learnt_sigma:g}"
        return f"lognormal {self.sigma:g}{learnt}"


@dataclass(frozen=True)
class ReplayedError(ErrorModel):
    """Log ratios (true / predicted) measured on a real campaign, drawn with replacement."""

    first_log_ratios: tuple[float, ...]
    learnt_log_ratios: tuple[float, ...]
    source: str = ""
    first_bias: float = 0.0  # the median removed from the first ratios (reported, not replayed)
    learnt_bias: float = 0.0

    def draw(self, z: float, rng: np.random.Generator) -> TrialError:
        first = self.first_log_ratios[int(rng.integers(len(self.first_log_ratios)))]
        learnt = self.learnt_log_ratios[int(rng.integers(len(self.learnt_log_ratios)))]
        return TrialError(math.exp(first), math.exp(learnt))

    def describe(self) -> str:
        spread = lambda v: statistics.median(abs(x) for x in v)  # noqa: E731
        return (f"replayed from {self.source}: first {len(self.first_log_ratios)} trials (median |log| "
                f"{spread(self.first_log_ratios):.2f}, bias {self.first_bias:+.2f} removed), learnt "
                f"{len(self.learnt_log_ratios)} (median |log| {spread(self.learnt_log_ratios):.2f}, "
                f"bias {self.learnt_bias:+.2f} removed)")

    @classmethod
    def from_journal(cls, path: str | Path, learn_after: int = 10) -> "ReplayedError":
        """Measure the ratios on a campaign's journal: per trial (first attempt), the median of its
        reported ``epoch_s`` over the ``predicted_epoch_s`` journaled at its start; the first
        ``learn_after`` trials to start give the first ratios, the rest the learnt ones."""
        path = Path(path)
        try:
            events = [event_from_json(record) for record in read_events(path)
                      if record["event"] in (TrialStarted.name, TrialProgress.name)]
        except (OSError, JournalCorruptError, JournalEventError) as exc:
            raise ErrorModelError(f"{path}: cannot read the journal ({exc})") from None
        predicted: dict[int, float] = {}  # trial -> predicted seconds per epoch, in start order
        epochs: dict[int, list[float]] = {}
        for event in events:
            if isinstance(event, TrialStarted) and event.attempt == 0 and event.predicted_epoch_s:
                predicted.setdefault(event.trial_id, event.predicted_epoch_s)
            elif isinstance(event, TrialProgress) and event.attempt == 0 and event.report.epoch_s:
                epochs.setdefault(event.trial_id, []).append(event.report.epoch_s)
        ratios = [math.log(statistics.median(epochs[t]) / p) for t, p in predicted.items() if t in epochs]
        if len(ratios) <= learn_after:
            raise ErrorModelError(f"{path}: {len(ratios)} trials with a predicted and a reported epoch time; "
                                  f"more than learn_after={learn_after} are needed")
        first, learnt = ratios[:learn_after], ratios[learn_after:]
        b1, b2 = statistics.median(first), statistics.median(learnt)
        return cls(tuple(x - b1 for x in first), tuple(x - b2 for x in learnt), str(path), b1, b2)
