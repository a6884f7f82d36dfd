"""Population-based training's suggestions: the population, drawn at random from the space.

The search itself happens while the trials train (:mod:`hpo.pbt`: the campaign loop exploits and
explores at every ``interval`` epochs); the optimizer only seeds the population. Results are
recorded (best so far) but do not steer it.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hpo.optimizers.base import Objective, Optimizer, OptimizerOptionError
from hpo.pbt import PbtOptionError, PbtOptions
from hpo.space import SearchSpace

__all__ = ["PopulationBasedTraining", "validate_options"]


def validate_options(options: Mapping[str, Any]) -> PbtOptions:
    """The parsed options (:class:`hpo.pbt.PbtOptions`); :class:`OptimizerOptionError` naming a bad one."""
    try:
        return PbtOptions.parse(options)
    except PbtOptionError as exc:
        raise OptimizerOptionError(str(exc)) from None


class PopulationBasedTraining(Optimizer):
    """Seeded random draws: the population a PBT campaign trains and evolves."""

    name = "pbt"

    def __init__(self, space: SearchSpace, seed: int = 0, options: Mapping[str, Any] | None = None,
                 num_objectives: int = 1):
        if num_objectives > 1:
            raise ValueError("optimizer 'pbt' ranks its population by one objective")
        super().__init__(space, seed, num_objectives)
        self.options = validate_options(options or {})
        self._rng = np.random.default_rng(seed)

    def _ask(self, n: int) -> list[dict[str, Any]]:
        return [self.space.sample_random(self._rng) for _ in range(n)]

    def _tell(self, suggestion_id: int, params: dict[str, Any], objective: Objective) -> None:
        pass

    def _tell_past(self, params: dict[str, Any], objective: Objective) -> None:
        pass
