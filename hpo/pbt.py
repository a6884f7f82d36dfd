"""Population-based training: the exploit-and-explore decision (search method ``pbt``).

A PBT campaign trains a population of trials side by side (the first ``population`` suggestions
of :class:`hpo.optimizers.pbt.PopulationBasedTraining` are random samples). Whenever a trial reports
an epoch that is a multiple of ``interval``, :meth:`Exploiter.decide` ranks the latest objectives
of the live population (the running trials that reported at least ``interval`` epochs): a trial in
the bottom ``quantile`` takes over a trial of the top ``quantile`` with a strictly better objective
(its donor: the donor's training
state and parameters), with the perturbable parameters perturbed (x0.8 / x1.2 clipped to the space,
a neighbouring choice for a categorical one, or with ``resample_probability`` a fresh draw) and
every other parameter (the architecture) the donor's unchanged.

The decision is a function of its arguments only: the random draws come from a generator seeded by
the campaign seed, the trial id and the epoch, so the same reports give the same decisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from hpo.space import CategoricalParam, FloatParam, IntParam, Param, SearchSpace

__all__ = ["PERTURBABLE_KEYS", "Exploit", "Exploiter", "Member", "PbtOptions", "PbtOptionError",
           "perturbable_keys"]

#: The config keys PBT may perturb: hyperparameters that leave the model's shape (and so a donor's
#: training state) valid. Every other key of the search space is inherited from the donor unchanged.
PERTURBABLE_KEYS: tuple[str, ...] = (
    "NeuralNetwork.Training.Optimizer.learning_rate",
    "NeuralNetwork.Training.Optimizer.weight_decay",
    "NeuralNetwork.Training.batch_size",
)


class PbtOptionError(ValueError):
    """An option of the ``pbt`` search method that is not accepted (the message names it)."""


def perturbable_keys(space: SearchSpace) -> list[str]:
    """The keys of ``space`` that PBT perturbs (in the space's order)."""
    return [key for key in space.keys if key in PERTURBABLE_KEYS]


@dataclass(frozen=True)
class PbtOptions:
    """``optimizer.options`` of a ``pbt`` campaign (``population`` None: the campaign's max_trials)."""

    population: int | None = None
    interval: int = 2
    quantile: float = 0.25
    resample_probability: float = 0.25
    perturb: tuple[float, float] = (0.8, 1.2)

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> "PbtOptions":
        """The options of a campaign; :class:`PbtOptionError` naming an unknown or invalid one."""
        known = ("population", "interval", "quantile", "resample_probability", "perturb")
        for name in options:
            if name not in known:
                raise PbtOptionError(f"optimizer 'pbt': unknown option {name!r}; accepted: {sorted(known)}")
        population = options.get("population")
        if population is not None and (not _is_int(population) or population < 2):
            raise PbtOptionError(f"optimizer 'pbt': population must be an integer >= 2, got {population!r}")
        interval = options.get("interval", cls.interval)
        if not _is_int(interval) or interval < 1:
            raise PbtOptionError(f"optimizer 'pbt': interval must be an integer >= 1 (epochs), got {interval!r}")
        quantile = options.get("quantile", cls.quantile)
        if not _is_real(quantile) or not 0 < quantile <= 0.5:
            raise PbtOptionError(f"optimizer 'pbt': quantile must be in (0, 0.5], got {quantile!r}")
        resample = options.get("resample_probability", cls.resample_probability)
        if not _is_real(resample) or not 0 <= resample <= 1:
            raise PbtOptionError(f"optimizer 'pbt': resample_probability must be in [0, 1], got {resample!r}")
        perturb = options.get("perturb", list(cls.perturb))
        if (not isinstance(perturb, (list, tuple)) or len(perturb) != 2 or not all(_is_real(f) and f > 0 for f in perturb)
                or not perturb[0] < 1 < perturb[1]):
            raise PbtOptionError(f"optimizer 'pbt': perturb must be two factors [down < 1 < up], got {perturb!r}")
        return cls(population, int(interval), float(quantile), float(resample), (float(perturb[0]), float(perturb[1])))


@dataclass(frozen=True)
class Member:
    """A live trial of the population: its parameters and its latest reported epoch's objective
    (None: not finite)."""

    trial_id: int
    params: Mapping[str, Any]
    epoch: int
    value: float | None


@dataclass(frozen=True)
class Exploit:
    """Trial ``trial_id``, after ``epoch``, takes over ``donor_id`` (its state after its latest
    reported epoch, ``donor_epoch``) with ``params`` (the donor's, perturbed)."""

    trial_id: int
    epoch: int
    donor_id: int
    donor_epoch: int
    params: dict[str, Any]


class Exploiter:
    """The exploit-and-explore rule of one campaign (see the module docstring)."""

    def __init__(self, options: PbtOptions, space: SearchSpace, seed: int) -> None:
        self.options, self.space, self.seed = options, space, seed
        self.perturbable = frozenset(perturbable_keys(space))

    @property
    def interval(self) -> int:
        return self.options.interval

    def decide(self, trial_id: int, epoch: int, population: Sequence[Member]) -> Exploit | None:
        """What trial ``trial_id`` does after ``epoch`` (it is one of ``population``, the live
        trials): None to go on, else the :class:`Exploit` (only at multiples of ``interval``)."""
        if epoch % self.options.interval:
            return None
        ranked = sorted((m for m in population if m.epoch >= self.options.interval),
                        key=lambda m: (math.inf if m.value is None else m.value, m.trial_id))
        if len(ranked) < 2 or all(m.trial_id != trial_id for m in ranked):
            return None
        k = max(1, math.floor(self.options.quantile * len(ranked)))
        if trial_id not in {m.trial_id for m in ranked[-k:]}:
            return None
        own = next(m.value for m in ranked if m.trial_id == trial_id)
        # a donor must be strictly better: two continuations of one donor that drew the same
        # perturbation train alike, and one taking the other over would only restart it
        donors = [m for m in ranked[:k] if m.value is not None and m.trial_id != trial_id
                  and (own is None or m.value < own)]
        if not donors:
            return None
        rng = np.random.default_rng([self.seed, trial_id, epoch])
        donor = donors[int(rng.integers(0, len(donors)))]
        return Exploit(trial_id, epoch, donor.trial_id, donor.epoch, self.explore(donor.params, rng))

    def explore(self, params: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        """``params`` with each perturbable key perturbed (within the space) and the rest unchanged."""
        out = dict(params)
        for key in self.space.keys:
            if key in self.perturbable and key in out:
                out[key] = self._perturb(self.space[key], out[key], rng)
        return self.space.coerce(out)

    def _perturb(self, p: Param, value: Any, rng: np.random.Generator) -> Any:
        if rng.random() < self.options.resample_probability:
            return SearchSpace([p]).sample_random(rng)[p.key]
        if isinstance(p, CategoricalParam):
            i = p.index_of(value)
            i = 0 if i is None else i
            return p.choices[min(len(p.choices) - 1, max(0, i + (1 if rng.random() < 0.5 else -1)))]
        factor = self.options.perturb[int(rng.integers(0, 2))]
        if isinstance(p, FloatParam):
            return min(p.high, max(p.low, float(value) * factor))
        assert isinstance(p, IntParam)
        moved = float(value) * factor
        step = round((moved - p.low) / p.step)
        if step == (value - p.low) // p.step:  # too small to move a step: one step in its direction
            step += 1 if factor > 1 else -1
        return p.low + p.step * min(p.num_values - 1, max(0, step))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
