"""Before trial 1: the search space's configurations the cost model predicts cannot train their
minimum epochs inside ``trial_time_limit_s``.

A trial that reaches its time limit ends as ``timeout`` with its best epoch so far; when that
happens before the stopper's first rung, the stopper never compared it, and without a stopper it
trained only part of its budget. Rank 0 samples the space (:data:`SAMPLES` configurations, seeded),
predicts each one's start-up plus its minimum epochs at the size the sizer picks, and warns with
how many do not fit and which choices make them (e.g. ``mpnn_type=PaiNN: 30 of 41``).

The minimum: the stopper's first judged epoch (:meth:`hpo.stoppers.Stopper.first_judged_epoch`),
or the whole budget (``num_epoch``) without a stopper.

Before any trial ran, the predictions come from the cost anchors (measured on another machine,
``bench/cost_anchors.py``) and this dataset's size, so they can be off several-fold here.
:class:`BudgetWatch` checks again, once, when the first trials have reported their first epoch and
the cost model has learnt this machine's speed from them, and warns when more configurations fall
short than first predicted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpo.space import CategoricalParam, SearchSpace
from hpo.stoppers.base import Stopper
from scheduler.cost_model import CostModelError, TrialFeatures
from scheduler.sizing import Sizer

#: configurations of the search space the check predicts (a few milliseconds each)
SAMPLES = 256
#: at most this many choices are named as what makes configurations fall short
MAX_CULPRITS = 4


@dataclass(frozen=True)
class BudgetShortfall:
    """What the check found: ``short`` of ``sampled`` configurations do not fit the limit."""

    sampled: int
    short: int
    limit_s: float
    worst_s: float  # the largest predicted seconds (start-up + minimum epochs) of those short
    minimum: str  # what they must train, e.g. "the 3 epochs of the stopper's first rung"
    culprits: tuple[str, ...]  # "mpnn_type='PaiNN': 30 of 41", the choices most of them share
    measured: bool  # predictions from epochs measured on this machine (False: the anchors)

    def message(self, recheck: bool = False) -> str:
        """The warning; ``recheck``: say that the campaign checks again once epochs are measured."""
        share = f"{self.short} of {self.sampled} sampled configurations"
        most = f"; most often with {'; '.join(self.culprits)}" if self.culprits else ""
        source = ("predicted from epochs measured on this machine" if self.measured else
                  "predicted from the cost anchors (bench/cost_anchors.py's rates, maybe of another machine) and "
                  "this dataset's size"
                  + ("; checked again once the first epochs are measured" if recheck else ""))
        return (f"{share} are predicted to need more than trial_time_limit_s = {self.limit_s:g} s for "
                f"{self.minimum} (up to {self.worst_s:,.0f} s){most}: they would end as timeouts first. "
                f"Raise trial_time_limit_s, lower num_epoch or narrow the search space ({source})")


def check_budgets(sizer: Sizer, config_of: Callable[[dict[str, Any]], Mapping[str, Any]], space: SearchSpace,
                  stopper: Stopper | None, limit_s: float, *, samples: int = SAMPLES, seed: int = 0,
                  measured: bool = False) -> BudgetShortfall | None:
    """Predict ``samples`` seeded configurations of ``space`` (``config_of``: params -> the trial's
    config) at the sizes ``sizer`` picks (module docstring); None when every one fits ``limit_s``
    (or none can be predicted: a config the cost model cannot read)."""
    rng = np.random.default_rng(seed)
    model = sizer.cost_model
    drawn: list[dict[str, Any]] = []
    seconds: list[float] = []
    minimum_epochs: set[int] = set()
    for _ in range(samples):
        params = space.sample_random(rng)
        try:
            features = TrialFeatures.from_config(config_of(params))
        except CostModelError:
            continue
        epochs = (features.num_epoch if stopper is None
                  else min(features.num_epoch, stopper.first_judged_epoch(features.num_epoch)))
        slots = sizer.choose(features).slots
        drawn.append(params)
        seconds.append(model.startup_s + epochs * model.epoch_seconds(features, slots))
        minimum_epochs.add(epochs)
    short = [s > limit_s for s in seconds]
    if not any(short):
        return None
    span = (f"{min(minimum_epochs)}" if len(minimum_epochs) == 1
            else f"{min(minimum_epochs)}-{max(minimum_epochs)}")
    minimum = (f"the {span} epoch(s) of their whole budget" if stopper is None
               else f"the {span} epoch(s) before the stopper's first rung")
    return BudgetShortfall(len(drawn), sum(short), limit_s, max(s for s, bad in zip(seconds, short) if bad),
                           minimum, _culprits(space, drawn, short), measured)


def _culprits(space: SearchSpace, drawn: list[dict[str, Any]], short: list[bool]) -> tuple[str, ...]:
    """The choices (categorical values; the upper half of a numeric key's sampled values) under
    which at least half the configurations fall short, and at twice the rate of the others."""
    found: list[tuple[float, str]] = []
    for param in space.params:
        values = [d[param.key] for d in drawn]
        if isinstance(param, CategoricalParam):
            groups = {repr(v): [i for i, x in enumerate(values) if x == v] for v in param.choices}
        else:
            middle = float(np.median(values))
            upper = [i for i, x in enumerate(values) if x > middle]
            groups = {f">{middle:g}": upper}
        for label, members in groups.items():
            inside = sum(short[i] for i in members)
            others = sum(short) - inside
            rest = len(short) - len(members)
            if len(members) < 2 or inside < 2:
                continue
            rate, rate_rest = inside / len(members), (others / rest if rest else 0.0)
            if rate >= 0.5 and rate >= 2 * rate_rest:
                sep = "" if label.startswith(">") else "="
                found.append((rate, f"{param.key}{sep}{label}: {inside} of {len(members)}"))
    return tuple(text for _, text in sorted(found, key=lambda t: -t[0])[:MAX_CULPRITS])


class BudgetWatch:
    """Checks the budgets again, once, when ``after_trials`` trials have reported their first epoch
    (the cost model has learnt this machine's speed from them): the warning when more
    configurations fall short than ``first`` said, else None."""

    def __init__(self, check: Callable[[], BudgetShortfall | None], first: BudgetShortfall | None,
                 after_trials: int) -> None:
        self.check, self.first, self.after = check, first, max(1, after_trials)
        self.done = False
        self._seen: set[int] = set()

    def epoch_reported(self, trial_id: int, epoch: int) -> str | None:
        if self.done or epoch != 1:
            return None
        self._seen.add(trial_id)
        if len(self._seen) < self.after:
            return None
        self.done = True
        again = self.check()
        before = 0 if self.first is None else self.first.short / max(1, self.first.sampled)
        if again is None or again.short / max(1, again.sampled) <= before or math.isclose(before, 1.0):
            return None
        return again.message()
