"""The cost model's learnt correction: a ridge regression that no single trial or node can poison.

Each attempt of a trial teaches one row ``(x, y)``: ``x = [1, one-hot(mpnn_type), log analytic]``
and ``y = log(observed / analytic)`` (a later epoch of the same attempt replaces its row). Trial
programs are untrusted and nodes can be broken, so the fit is robust by construction:

* **Clipping against the population, then the fit.** Every ``y`` is winsorised to ``median(y) +-
  clip_log`` of the rows in the window (a row claiming a time 10^300 times off counts as one
  ``clip_log`` off), then its residual against the fit to ``+- band`` (three robust standard
  deviations of the residuals, at least ``ln 2``, at most ``clip_log``), in six rounds: a
  Huber-like fit.
  While fewer than three rows are in, each is first clipped to 1000x of the analytic prediction.
* **Per-node factors kept per node.** A node (``group``) with at least ``min_group_rows`` rows whose
  median residual differs from the others' gets that difference as its own factor
  (:meth:`RobustRidge.group_factor`), taken out of its rows before the fit: one slow node does not
  make every other node's trials look slow.
* **A window.** Only the latest ``window`` attempts are kept: the refit is O(window) whatever the
  campaign's length (3.4 ms at 1,024 rows on the development machine), and it is redone once a
  32nd of the rows changed: about 0.1 ms per attempt learnt at full window.

Bound (tested in ``tests/scheduler/test_cost_model.py``): one attempt's residual counts at most
``band`` (<= ``clip_log``) beyond the fit, so at the fit's fixed point it moves the log correction of
its own kind (layer type) by about ``band / n`` with ``n`` the honest attempts of that kind (the
ridge weight counting as one), and others' less: a factor ``exp(clip_log) = 8`` at worst when it is
the only one of its kind, ``exp(ln 2 / 4) = 1.19x`` with 4 others. Measured with 24 honest attempts
over 4 types on 4 nodes (4-8 per type): at most 1.21x for one attempt claiming any epoch time from
1e-300 to 1.7e308 s; with 15 on 3 nodes, at most 1.15x for a fourth node training 100x slower.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Hashable

import numpy as np

#: half-width of the band (in log) around the population's median that a row is clipped to: the
#: measured anchors make the analytic model right within a small factor per type (the demo's
#: corrections span 0.2-3x), so a row 8x beyond the median is a broken or lying trial
CLIP_LOG = math.log(8.0)
#: the narrowest band (in log) residuals against the fit are clipped to: honest trials scatter by
#: tens of percent around the model (noise, warm-up), so a factor 2 is never an honest row's clip
MIN_BAND_LOG = math.log(2.0)
#: while fewer rows than ``min_population`` are in, each is clipped to this band (in log) around the
#: analytic prediction (the measured anchors): a lying first trial cannot claim more than 1000x
PRIOR_BAND_LOG = math.log(1000.0)
#: the fit is redone once this share's inverse of the rows changed (1/32: every 32 rows at 1,024)
REFIT_SHARE = 32
#: rounds of clipping against the fit (each pulls a clipped row's influence closer to the band's)
FIT_ROUNDS = 6


class RobustRidge:
    """Ridge regression of the latest ``window`` rows (one per key) on ``[1, one-hot, log
    analytic]``: log analytic centred so the ridge does not fight the intercept, the intercept (a
    common bias) not shrunk, the rest shrunk with weight ``ridge``; targets winsorised and per-group
    factors removed (module docstring)."""

    def __init__(self, dim: int, ridge: float, window: int = 1024, clip_log: float = CLIP_LOG,
                 min_group_rows: int = 3, min_population: int = 3) -> None:
        self.dim = dim
        self.min_population = min_population
        self.ridge = ridge
        self.window = window
        self.clip_log = clip_log
        self.min_group_rows = min_group_rows
        self._rows: OrderedDict[Hashable, tuple[np.ndarray, float, Hashable]] = OrderedDict()
        self._beta: np.ndarray | None = None
        self._changes = 0  # rows set since the last fit
        self._factors: dict[Hashable, float] = {}

    @property
    def rows(self) -> int:
        return len(self._rows)

    def set_row(self, key: Hashable, x: np.ndarray, y: float, group: Hashable = None) -> None:
        """The row of ``key`` (replacing its earlier one); ``group``: the node it ran on (None:
        none, or several)."""
        if not math.isfinite(y) or not np.all(np.isfinite(x)):
            raise ValueError(f"row {key!r}: features and target must be finite")
        self._rows.pop(key, None)
        self._rows[key] = (x, y, group)
        if len(self._rows) > self.window:
            self._rows.popitem(last=False)
        self._changes += 1

    def group_factor(self, group: Hashable) -> float:
        """How much slower (> 1) or faster than the others ``group``'s rows run (1: not known), as
        far as the clip band shows it (at most ``exp(2 clip_log)``)."""
        self._fit()
        return math.exp(self._factors.get(group, 0.0))

    def predict(self, x: np.ndarray) -> float:
        """The fitted log correction at ``x`` (0 before any row)."""
        if not self._rows:
            return 0.0
        return float(x @ self._fit())

    def _fit(self) -> np.ndarray:
        """The fitted coefficients, refitted once ``1 / REFIT_SHARE`` of the rows changed since the
        last fit (every change while fewer than ``REFIT_SHARE`` rows are in): O(window) work
        amortised to O(REFIT_SHARE) per row learnt."""
        if self._beta is not None and self._changes < max(1, len(self._rows) // REFIT_SHARE):
            return self._beta
        self._changes = 0
        self._factors = {}
        if not self._rows:
            self._beta = np.zeros(self.dim)
            return self._beta
        xs = np.stack([r[0] for r in self._rows.values()])
        y = np.fromiter((r[1] for r in self._rows.values()), dtype=float, count=len(self._rows))
        names, codes = self._group_codes([r[2] for r in self._rows.values()])
        if len(y) < self.min_population:  # too few rows to be a population: against the analytic prior
            y = np.clip(y, -PRIOR_BAND_LOG, PRIOR_BAND_LOG)
        centre = float(np.median(y))
        y0 = np.clip(y, centre - self.clip_log, centre + self.clip_log)  # against the population
        beta = self._solve(xs, y0)
        offsets = np.zeros(len(names) + 1)  # the last entry: rows of no group
        for _ in range(FIT_ROUNDS):
            # each node's own factor out of its rows (backfitting: node factors and the fit in turn)
            offsets[:-1] = self._group_offsets(y0 - xs @ beta, codes, len(names))
            y = y0 - offsets[codes]
            # then against the fit: residuals beyond 3 robust deviations are clipped
            fitted = xs @ beta
            residual = y - fitted
            spread = 1.4826 * float(np.median(np.abs(residual - np.median(residual))))
            band = min(self.clip_log, max(MIN_BAND_LOG, 3.0 * spread))
            beta = self._solve(xs, fitted + np.clip(residual, -band, band))
        self._factors = {g: float(o) for g, o in zip(names, offsets[:-1]) if o != 0.0}
        self._beta = beta
        return beta

    @staticmethod
    def _group_codes(groups: list[Hashable]) -> tuple[list[Hashable], np.ndarray]:
        """The distinct groups (None left out) and each row's index among them (their count for
        rows of no group)."""
        index: dict[Hashable, int] = {}
        for g in groups:
            if g is not None and g not in index:
                index[g] = len(index)
        none = len(index)
        return list(index), np.fromiter((none if g is None else index[g] for g in groups), dtype=np.int64,
                                        count=len(groups))

    def _group_offsets(self, residuals: np.ndarray, codes: np.ndarray, num_groups: int) -> np.ndarray:
        """Per group with at least ``min_group_rows`` rows, its median residual minus the median of
        those medians (0 elsewhere, and everywhere when fewer than two groups qualify: one group
        alone is the population); vectorised over groups."""
        out = np.zeros(num_groups)
        keep = codes < num_groups
        if num_groups < 2 or not keep.any():
            return out
        c, r = codes[keep], residuals[keep]
        order = np.lexsort((r, c))
        c, r = c[order], r[order]
        counts = np.bincount(c, minlength=num_groups)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        ok = counts >= self.min_group_rows
        if ok.sum() < 2:
            return out
        lo, hi = starts + (counts - 1) // 2, starts + counts // 2
        medians = 0.5 * (r[np.minimum(lo, len(r) - 1)] + r[np.minimum(hi, len(r) - 1)])
        out[ok] = medians[ok] - float(np.median(medians[ok]))
        return out

    def _solve(self, xs: np.ndarray, y: np.ndarray) -> np.ndarray:
        n, dim = xs.shape
        xtx, xty = xs.T @ xs, xs.T @ y
        mean_log = xtx[0, -1] / n
        t = np.eye(dim)
        t[0, -1] = -mean_log
        a = t.T @ xtx @ t + self.ridge * np.eye(dim)
        a[0, 0] -= self.ridge - 1e-9
        return t @ np.linalg.solve(a, t.T @ xty)
