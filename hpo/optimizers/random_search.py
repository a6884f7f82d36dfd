"""Random search: independent draws from the search space with a seeded generator."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hpo.optimizers.base import Objective, Optimizer, OptimizerOptionError
from hpo.space import SearchSpace

__all__ = ["RandomSearch", "validate_options"]


def validate_options(options: Mapping[str, Any]) -> None:
    """Random search takes no options."""
    if options:
        raise OptimizerOptionError(f"optimizer 'random': takes no options, got {sorted(options)}")


class RandomSearch(Optimizer):
    """Seeded independent sampling; results are recorded (best so far) but do not steer it."""

    name = "random"

    def __init__(self, space: SearchSpace, seed: int = 0, options: Mapping[str, Any] | None = None,
                 num_objectives: int = 1):
        super().__init__(space, seed, num_objectives)
        validate_options(options or {})
        self._rng = np.random.default_rng(seed)

    def _ask(self, n: int) -> list[dict[str, Any]]:
        return [self.space.sample_random(self._rng) for _ in range(n)]

    def _tell(self, suggestion_id: int, params: dict[str, Any], objective: Objective) -> None:
        pass  # nothing to learn: the base class keeps the counts and the best point

    def _tell_past(self, params: dict[str, Any], objective: Objective) -> None:
        pass
