"""Calibration that holds per group: split-conformal scales of the std over a difficulty score.

The term model (:mod:`ensemble.uncertainty`) gives each row a std whose weights minimise the
calibration split's NLL: calibrated on average, not within the easy or the hard rows. Here the
calibration rows are sorted by a *difficulty score* and cut into equal groups of at least
:data:`MIN_GROUP_ROWS` rows, at most :data:`MAX_GROUPS` of them (Mondrian conformal prediction: one
calibration per group; fewer rows per group and the conformal rank is their largest ``|z|``); each group
gets the scale

    s_g = max(q_g / z_95, sqrt(mean_g z^2))

of its rows' normalised errors ``z = err / std``: ``q_g`` the split-conformal quantile (the
``ceil((n + 1) 0.95)``-th smallest ``|z|`` of its ``n`` rows, which covers a new exchangeable row of
the group with probability at least 95%) and the root of its mean squared z-score (so the group's
ZMS is at most 1 after scaling). A new row takes the scale of the group its score falls in; rows
beyond the calibration rows' range take the nearest end group's scale (nothing was seen there).

Scores (:data:`DIFFICULTY_SCORES`), per row: ``std`` (the term model's std, the locally adaptive
choice), ``distance`` (the latent distance), ``size`` (atoms in the row's structure). Everything is
fitted on the calibration split only.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

DIFFICULTY_SCORES: tuple[str, ...] = ("std", "distance", "size")
MIN_GROUP_ROWS = 40
MAX_GROUPS = 4
COVERAGE = 0.95
Z_95 = 1.959963984540054


class GroupScales(BaseModel):
    """A head's per-group std scales: ``edges`` cut the score into ``len(edges) + 1`` groups."""

    model_config = ConfigDict(extra="forbid")

    score: str
    edges: list[float] = Field(default_factory=list)
    scales: list[float] = Field(default_factory=list)

    def scale(self, values: np.ndarray) -> np.ndarray:
        """The scale of each row's group (``values``: the rows' scores)."""
        return np.asarray(self.scales, dtype=np.float64)[np.searchsorted(self.edges, values, side="right")]


def conformal_scale(z: np.ndarray, coverage: float = COVERAGE) -> float:
    """``max(q / z_coverage, sqrt(mean z^2))`` of normalised errors ``z`` (see the module docstring);
    with too few rows for the conformal rank, the largest ``|z|`` stands for ``q``."""
    from scipy.stats import norm

    a = np.sort(np.abs(np.asarray(z, dtype=np.float64).ravel()))
    rank = min(math.ceil((len(a) + 1) * coverage), len(a))
    q = a[rank - 1] / norm.ppf(0.5 + coverage / 2)
    return float(max(q, math.sqrt(float(np.mean(a * a)))))


def fit_group_scales(score: str, values: np.ndarray, z: np.ndarray,
                     min_rows: int = MIN_GROUP_ROWS) -> GroupScales:
    """Groups of at least ``min_rows`` calibration rows by equal counts of ``values`` (the rows'
    scores; ``z``: their normalised errors, ``[rows]`` or ``[rows, dim]``, a row's components
    together) and their scales."""
    values = np.asarray(values, dtype=np.float64)
    z = np.asarray(z, dtype=np.float64).reshape(len(values), -1)
    groups = min(MAX_GROUPS, max(1, len(values) // max(min_rows, 1)))
    order = np.argsort(values, kind="stable")
    chunks = np.array_split(order, groups)
    edges = [float(0.5 * (values[a[-1]] + values[b[0]])) for a, b in zip(chunks[:-1], chunks[1:])]
    return GroupScales(score=score, edges=edges, scales=[conformal_scale(z[c]) for c in chunks])
