"""One calibrated predictive std per head, from terms whose weights are fitted on the validation split.

For a head, every row (a graph for graph heads, a node for node heads) gets

    std(x)^2 = sum_t  w_t * v_t(x)

over the terms below (:class:`UncertaintyTerm`), with weights ``w_t >= 0`` minimising the Gaussian
negative log-likelihood of the validation split's errors (never the test or shifted sets). The
terms stay visible in every prediction: ``epistemic`` + ``aleatoric`` is the law of total variance
of the members' mixture; ``distance`` is what the members cannot see by disagreeing; ``domain`` is
not fitted but a rule for inputs outside the training inputs.

* :class:`EpistemicTerm`: the members' weighted spread around the mean;
* :class:`AleatoricTerm`: the members' own predicted variance (Gaussian-NLL members);
  both are trusted at the training data's distances and inflated beyond them: times
  ``max(1, d(x))^2`` for a latent distance ``d`` (a rule, so that a spread that explains the
  validation errors well is not the only thing standing far from the data);
* :class:`DistanceTerm`: ``mse_val * max(1, d(x))^2``, with ``d`` the member-weighted latent
  distance (:mod:`ensemble.latent`, about 1 in distribution): the error level of the validation
  data within the training data's typical distances (an input identical to a training input
  still has the model's training error, not none), growing linearly with the distance beyond;
* :class:`OutOfDomainTerm` (weight fixed at 1): ``var_train * s(x)^2`` with ``var_train`` the
  variance of the head's training targets and ``s`` the share of the row that lies outside the
  training inputs (:mod:`ensemble.domain`): for a graph row the fraction of its atoms outside (an
  unseen element, a feature, a neighbour shell or the scale outside the training range; their
  errors taken as fully correlated, so the graph's std is the mean of its atoms'), 1 for an atom
  outside, and 1 for a row whose latent distance is beyond ``distance_limit`` (the 99th percentile
  of the calibration rows'): without data, an atom's prediction is worth no more than the spread
  of the targets, and one atom of 300 moves a per-atom quantity by 1/300 of that;
* :class:`ScaleTerm` (weight fixed at 1, graph heads): ``delta(x)^2``, the change of the head's
  target between the edge of the training data's scale range and the row's scale (its atoms'
  mean ``log r0`` residual, :mod:`ensemble.domain`), from a quadratic in that residual fitted on
  the training split with the composition as covariates. A uniformly stretched or compressed cell
  is predicted about as the nearest training cells were; the fitted curve says how much the
  target moves beyond them (zero inside the range), so the std grows with how far out the cell is,
  in the head's unit.

An input is *in domain* when it passes the input checks (the rule of :mod:`ensemble.domain`) and
its latent distance is within the limit.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.optimize import minimize

MIN_VARIANCE = 1e-24
DISTANCE_LIMIT_QUANTILE = 0.99


@dataclass
class TermInputs:
    """What the terms of one head read, per row: ``[rows, dim]`` variances, ``[rows]`` the rest."""

    epistemic_var: np.ndarray
    aleatoric_var: np.ndarray | None
    distance: np.ndarray | None  # latent distance (None: no latent reference stored)
    outside_share: np.ndarray | None  # share of the row's atoms outside the training inputs
    outside: np.ndarray | None  # bool: outside by the input checks' rule (element, feature, shells, scale)
    scale: np.ndarray | None = None  # the row's log r0 residual (graph rows: its atoms' mean; NaN: none)


class UncertaintyTerm(ABC):
    """One source of predictive variance of a head.

    Contract: :attr:`name` is unique and appears in outputs as ``<head>_<name>_std``;
    :meth:`variance` maps the head's :class:`TermInputs` to a non-negative ``[rows, dim]`` array in
    the head's unit squared (before its weight), or None when the term does not apply to these
    inputs; a term with ``fitted = False`` enters with weight 1, otherwise its weight is fitted on
    the validation split. :meth:`from_model` builds the term from a head's stored model (None when
    the model has nothing for it). A new term is one subclass plus one line in
    :data:`UNCERTAINTY_TERMS` (and, if it keeps fitted numbers of its own, a field of
    :class:`HeadUncertainty` that :func:`fit_head` fills)."""

    name: str = ""
    fitted: bool = True

    @abstractmethod
    def variance(self, inputs: TermInputs) -> np.ndarray | None:
        """The term's variance per row and component, or None."""

    @classmethod
    def from_model(cls, model: "HeadUncertainty") -> "UncertaintyTerm | None":
        """The term for a head's stored model (a term without parameters: always one)."""
        return cls()


def distance_inflation(inputs: TermInputs) -> np.ndarray:
    """``max(1, d)^2`` per row as a column (1 without latent distances)."""
    if inputs.distance is None:
        return np.ones((len(inputs.epistemic_var), 1))
    return np.maximum(inputs.distance, 1.0)[:, None] ** 2


class EpistemicTerm(UncertaintyTerm):
    """The members' weighted spread around the ensemble mean, inflated beyond the training distances."""

    name = "epistemic"

    def variance(self, inputs: TermInputs) -> np.ndarray | None:
        return inputs.epistemic_var * distance_inflation(inputs)


class AleatoricTerm(UncertaintyTerm):
    """The members' predicted variance (Gaussian-NLL members), inflated like the spread."""

    name = "aleatoric"

    def variance(self, inputs: TermInputs) -> np.ndarray | None:
        if inputs.aleatoric_var is None:
            return None
        return inputs.aleatoric_var * distance_inflation(inputs)


class DistanceTerm(UncertaintyTerm):
    """``mse_val * max(1, d)^2``: the validation error level, growing linearly with the latent
    distance beyond the training data's typical distance (see the module docstring)."""

    name = "distance"

    def __init__(self, unit_variance: Sequence[float]) -> None:
        self.unit_variance = np.asarray(unit_variance, dtype=np.float64)

    @classmethod
    def from_model(cls, model: "HeadUncertainty") -> "DistanceTerm | None":
        return cls(model.distance_unit_variance) if model.distance_unit_variance else None

    def variance(self, inputs: TermInputs) -> np.ndarray | None:
        if inputs.distance is None:
            return None
        return distance_inflation(inputs) * self.unit_variance[None, :]


class OutOfDomainTerm(UncertaintyTerm):
    """``var_train * s^2`` with ``s`` the share of the row outside the training inputs, 1 beyond
    the latent distance limit (a rule: weight 1; see the module docstring)."""

    name = "domain"
    fitted = False

    def __init__(self, prior_variance: Sequence[float], distance_limit: float | None) -> None:
        self.prior_variance = np.asarray(prior_variance, dtype=np.float64)
        self.distance_limit = distance_limit

    @classmethod
    def from_model(cls, model: "HeadUncertainty") -> "OutOfDomainTerm | None":
        return cls(model.prior_variance, model.distance_limit) if model.prior_variance else None

    def variance(self, inputs: TermInputs) -> np.ndarray | None:
        share = None if inputs.outside_share is None else np.asarray(inputs.outside_share, dtype=np.float64)
        beyond = None if inputs.distance is None or self.distance_limit is None else inputs.distance > self.distance_limit
        if share is None and beyond is None:
            return None
        if share is None:
            share = np.zeros(len(beyond))
        if beyond is not None:
            share = np.where(beyond, 1.0, share)
        return (share ** 2)[:, None] * self.prior_variance[None, :]


class ScaleTerm(UncertaintyTerm):
    """``delta^2``: the fitted change of the target beyond the training scale range (a rule: weight
    1; see the module docstring)."""

    name = "scale"
    fitted = False

    def __init__(self, coef: Sequence[Sequence[float]], scale_range: Sequence[float]) -> None:
        self.coef = np.asarray(coef, dtype=np.float64)  # [dim, 2]: linear and quadratic
        self.low, self.high = (float(v) for v in scale_range)

    @classmethod
    def from_model(cls, model: "HeadUncertainty") -> "ScaleTerm | None":
        return cls(model.scale_coef, model.scale_range) if model.scale_coef and model.scale_range else None

    def variance(self, inputs: TermInputs) -> np.ndarray | None:
        if inputs.scale is None:
            return None
        r = np.nan_to_num(np.asarray(inputs.scale, dtype=np.float64), nan=0.5 * (self.low + self.high))
        edge = np.clip(r, self.low, self.high)
        delta = (r - edge)[:, None] * self.coef[None, :, 0] + (r * r - edge * edge)[:, None] * self.coef[None, :, 1]
        return delta * delta


def fit_scale_response(scale: np.ndarray, covariates: np.ndarray,
                       targets: np.ndarray) -> tuple[list[list[float]], list[float]] | None:
    """Per component, the linear and quadratic coefficients of ``targets`` ([rows, dim]) in the
    scale residual ``scale`` ([rows]) with ``covariates`` ([rows, p], the composition) beside them,
    by least squares on the training rows; and the range of ``scale`` they span. None when fewer
    than 10 rows have a scale."""
    known = np.isfinite(scale)
    if known.sum() < 10:
        return None
    r = scale[known]
    design = np.hstack([covariates[known], r[:, None], (r * r)[:, None]])
    coef = np.linalg.lstsq(design, np.asarray(targets, dtype=np.float64)[known], rcond=None)[0]
    return coef[-2:].T.tolist(), [float(r.min()), float(r.max())]


def outside_domain(inputs: TermInputs, distance_limit: float | None) -> np.ndarray | None:
    """Rows outside the applicability domain: failed input checks, or latent distance beyond the
    limit; None when neither is known."""
    beyond = None if inputs.distance is None or distance_limit is None else inputs.distance > distance_limit
    if inputs.outside is None:
        return beyond
    return inputs.outside if beyond is None else inputs.outside | beyond


class HeadUncertainty(BaseModel):
    """The fitted uncertainty model of one head, as stored in the manifest."""

    model_config = ConfigDict(extra="forbid")

    weights: dict[str, float]  # term name -> weight (fitted terms; rules are not listed)
    distance_unit_variance: list[float] = Field(default_factory=list)  # per component
    prior_variance: list[float] = Field(default_factory=list)  # per component
    distance_limit: float | None = None  # beyond: out of domain
    scale_coef: list[list[float]] = Field(default_factory=list)  # per component: linear, quadratic
    scale_range: list[float] = Field(default_factory=list)  # the training rows' scale residual range

    def terms(self) -> list[UncertaintyTerm]:
        """Every registered term this model has what it needs for, in registry order."""
        return [term for cls in UNCERTAINTY_TERMS.values() if (term := cls.from_model(self)) is not None]

    @classmethod
    def from_scale(cls, scale: float) -> "HeadUncertainty":
        """An ensemble calibrated by one std scale (manifests before the uncertainty model)."""
        return cls(weights={"epistemic": scale * scale, "aleatoric": scale * scale})


#: The registry of uncertainty terms: name -> class, in the order a head's std sums them (the names
#: of the ``<head>_<name>_std`` columns of ``predict``).
UNCERTAINTY_TERMS: dict[str, type[UncertaintyTerm]] = {
    cls.name: cls for cls in (EpistemicTerm, AleatoricTerm, DistanceTerm, OutOfDomainTerm, ScaleTerm)}


@dataclass
class HeadStd:
    """A head's calibrated std and each term's share (``sqrt(w_t v_t)``), ``[rows, dim]`` each."""

    std: np.ndarray
    parts: dict[str, np.ndarray]


def combine_terms(model: HeadUncertainty, inputs: TermInputs) -> HeadStd:
    """The std of ``model`` for ``inputs`` (see the module docstring)."""
    total = np.zeros_like(inputs.epistemic_var, dtype=np.float64)
    parts: dict[str, np.ndarray] = {}
    for term in model.terms():
        v = term.variance(inputs)
        if v is None:
            continue
        weight = model.weights.get(term.name, 0.0) if term.fitted else 1.0
        part = weight * v
        parts[term.name] = np.sqrt(part)
        total = total + part
    return HeadStd(np.sqrt(np.maximum(total, MIN_VARIANCE)), parts)


def _nll(variance: np.ndarray, err: np.ndarray) -> float:
    v = np.maximum(variance, MIN_VARIANCE)
    return float(np.mean(0.5 * np.log(2 * math.pi * v) + 0.5 * err * err / v))


def fit_head(inputs: TermInputs, errors: np.ndarray, train_targets: np.ndarray | None,
             scale_response: tuple[list[list[float]], list[float]] | None = None) -> HeadUncertainty:
    """Weights minimising the calibration NLL of ``errors`` ([rows, dim], prediction - target).

    ``train_targets`` ([rows, dim], the training split's) give the out-of-domain term's variance;
    None leaves that term out. The distance term is used when ``inputs.distance`` is given; the
    scale term with ``scale_response`` (:func:`fit_scale_response` on the training split)."""
    errors = np.asarray(errors, dtype=np.float64)
    mse = np.maximum(np.mean(errors * errors, axis=0), MIN_VARIANCE)
    limit = None if inputs.distance is None else float(np.quantile(inputs.distance, DISTANCE_LIMIT_QUANTILE))
    draft = HeadUncertainty(
        weights={},
        distance_unit_variance=mse.tolist() if inputs.distance is not None else [],
        prior_variance=(np.var(train_targets, axis=0).tolist() if train_targets is not None else []),
        distance_limit=limit,
        scale_coef=scale_response[0] if scale_response else [],
        scale_range=scale_response[1] if scale_response else [],
    )
    fitted = [t for t in draft.terms() if t.fitted and t.variance(inputs) is not None
              and float(np.max(t.variance(inputs))) > 0]
    fixed = sum((t.variance(inputs) for t in draft.terms() if not t.fitted and t.variance(inputs) is not None),
                np.zeros_like(errors))
    if not fitted:
        raise ValueError("no uncertainty term has any variance on the validation split (one member, no "
                         "variance head, no latent reference): nothing to calibrate")
    variances = [t.variance(inputs) for t in fitted]

    def loss(log_w: np.ndarray) -> float:
        return _nll(sum(np.exp(lw) * v for lw, v in zip(log_w, variances)) + fixed, errors)

    starts = [np.zeros(len(fitted)), np.full(len(fitted), -2.0), np.full(len(fitted), 2.0)]
    best = min((minimize(loss, x0, method="L-BFGS-B", bounds=[(-30.0, 30.0)] * len(fitted)) for x0 in starts),
               key=lambda r: r.fun)
    return draft.model_copy(update={"weights": {t.name: float(np.exp(w)) for t, w in zip(fitted, best.x)}})
