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
  variance of the head's training targets and ``s`` the row's weight outside the training inputs
  (:mod:`ensemble.domain`): each atom outside (an unseen element, a feature, a neighbour shell or a
  strain descriptor outside the training range) weighs ``1 + its missing nearest neighbours``; a
  graph row takes the mean over its atoms (their errors taken as fully correlated, so the graph's
  std is the mean of its atoms'), a node row its atom's; a row whose latent distance is beyond
  ``distance_limit`` (:func:`distance_limit`: the 99th percentile of a log-normal fitted to the
  calibration rows' distances) weighs at least 1: without
  data, an atom's prediction is worth no more than the spread of the targets, a broken bond adds
  as much again, and one atom of 300 moves a per-atom quantity by 1/300 of that;
* :class:`StrainTerm` (weight fixed at 1, graph heads): ``delta(x)^2``, the change of the head's
  target between the edge of the training data's range of each strain descriptor (its atoms' mean
  ``log r0`` residual, first-shell spread and first-shell compression, :mod:`ensemble.domain`) and
  the row's value, from a
  quadratic in each descriptor fitted on the training split with the composition as covariates,
  extended beyond the range along its tangent at the edge (the curve is known inside the range
  only). A uniformly stretched, compressed or sheared cell is predicted about as the nearest
  training cells were; the fitted curves say how much the target moves beyond them (zero inside
  the ranges), so the std grows with how far out the cell is, in the head's unit;
* the composition term (a regular-solution prior for elements the training never saw) is retired:
  it fires on one named shift only, so no family but its own could choose it in the bench's
  leave-one-family-out evaluation (``bench/uncertainty_lofo.py``; docs/performance.md). Models stored
  with it read unchanged, its numbers ignored; unseen-element atoms weigh in the out-of-domain term
  like any atom outside.

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

from ensemble.group_calibration import GroupScales, fit_group_scales

MIN_VARIANCE = 1e-24
DISTANCE_LIMIT_QUANTILE = 0.99
#: the difficulty score of the per-group std scales ``fit_head`` fits (see :mod:`ensemble.group_calibration`)
DEFAULT_GROUP_SCORE: str | None = "std"


@dataclass
class TermInputs:
    """What the terms of one head read, per row: ``[rows, dim]`` variances, ``[rows]`` the rest."""

    epistemic_var: np.ndarray
    aleatoric_var: np.ndarray | None
    distance: np.ndarray | None  # latent distance (None: no latent reference stored)
    outside_weight: np.ndarray | None  # the row's weight outside the training inputs (see OutOfDomainTerm)
    outside: np.ndarray | None  # bool: outside by the input checks' rule (element, feature, shells, strain)
    strain: np.ndarray | None = None  # [rows, D] strain descriptors (graph rows: their atoms' mean; NaN: none)
    size: np.ndarray | None = None  # [rows] atoms in the row's structure (for the group calibration)


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
    """``var_train * s^2`` with ``s`` the row's weight outside the training inputs, at least 1
    beyond the latent distance limit (a rule: weight 1; see the module docstring)."""

    name = "domain"
    fitted = False

    def __init__(self, prior_variance: Sequence[float], distance_limit: float | None) -> None:
        self.prior_variance = np.asarray(prior_variance, dtype=np.float64)
        self.distance_limit = distance_limit

    @classmethod
    def from_model(cls, model: "HeadUncertainty") -> "OutOfDomainTerm | None":
        if not model.prior_variance:
            return None
        return cls(model.prior_variance, model.distance_limit)

    def variance(self, inputs: TermInputs) -> np.ndarray | None:
        share = None if inputs.outside_weight is None else np.asarray(inputs.outside_weight, dtype=np.float64)
        beyond = None if inputs.distance is None or self.distance_limit is None else inputs.distance > self.distance_limit
        if share is None and beyond is None:
            return None
        if share is None:
            share = np.zeros(len(beyond))
        if beyond is not None:
            share = np.where(beyond, np.maximum(share, 1.0), share)
        return (share ** 2)[:, None] * self.prior_variance[None, :]


class StrainTerm(UncertaintyTerm):
    """``delta^2``: the fitted change of the target beyond the training range of each strain
    descriptor (a rule: weight 1; see the module docstring)."""

    name = "strain"
    fitted = False

    def __init__(self, coef: Sequence[Sequence[Sequence[float]]], ranges: Sequence[Sequence[float]]) -> None:
        self.coef = np.asarray(coef, dtype=np.float64)  # [dim, descriptors, 2]: linear, quadratic
        self.ranges = np.asarray(ranges, dtype=np.float64)  # [descriptors, 2]: low, high

    @classmethod
    def from_model(cls, model: "HeadUncertainty") -> "StrainTerm | None":
        return cls(model.strain_coef, model.strain_range) if model.strain_coef and model.strain_range else None

    def variance(self, inputs: TermInputs) -> np.ndarray | None:
        if inputs.strain is None:
            return None
        low, high = self.ranges[:, 0], self.ranges[:, 1]
        x = np.asarray(inputs.strain, dtype=np.float64)
        x = np.where(np.isfinite(x), x, 0.5 * (low + high)[None, :])
        edge = np.clip(x, low[None, :], high[None, :])
        # [rows, dim]: sum over descriptors of the fitted curve's tangent at the nearer edge,
        # (b + 2 c e) (x - e): the curve is known inside the range only
        slope = self.coef[None, :, :, 0] + 2.0 * self.coef[None, :, :, 1] * edge[:, None, :]  # [rows, dim, D]
        delta = np.einsum("rkd,rd->rk", slope, x - edge)
        return delta * delta


def fit_strain_response(strain: np.ndarray, covariates: np.ndarray,
                        targets: np.ndarray) -> tuple[list, list] | None:
    """Per component, the linear and quadratic coefficients of ``targets`` ([rows, dim]) in each
    strain descriptor (``strain`` [rows, D]) with ``covariates`` ([rows, p], the composition)
    beside them, by least squares on the training rows; and each descriptor's range over them.
    None when fewer than 10 rows have every descriptor."""
    strain = np.asarray(strain, dtype=np.float64)
    known = np.isfinite(strain).all(axis=1)
    if known.sum() < 10:
        return None
    x = strain[known]
    design = np.hstack([covariates[known], x, x * x])
    coef = np.linalg.lstsq(design, np.asarray(targets, dtype=np.float64)[known], rcond=None)[0]
    d = x.shape[1]
    linear, quadratic = coef[-2 * d:-d].T, coef[-d:].T  # [dim, D] each
    return np.stack([linear, quadratic], axis=2).tolist(), np.stack([x.min(0), x.max(0)], axis=1).tolist()


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
    strain_coef: list[list[list[float]]] = Field(default_factory=list)  # [dim][descriptor]: linear, quadratic
    strain_range: list[list[float]] = Field(default_factory=list)  # [descriptor]: the training rows' low, high
    #: the retired composition term's numbers (see the module docstring): read, ignored
    composition_coef: list[list[float]] = Field(default_factory=list)
    composition_residual_variance: list[float] = Field(default_factory=list)
    #: the std's scales per group of a difficulty score (:mod:`ensemble.group_calibration`; None:
    #: one scale, the NLL weights' own, as manifests before it)
    groups: GroupScales | None = None

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
    cls.name: cls for cls in (EpistemicTerm, AleatoricTerm, DistanceTerm, OutOfDomainTerm, StrainTerm)}


@dataclass
class HeadStd:
    """A head's calibrated std and each term's share (``sqrt(w_t v_t)``), ``[rows, dim]`` each."""

    std: np.ndarray
    parts: dict[str, np.ndarray]


def combine_terms(model: HeadUncertainty, inputs: TermInputs) -> HeadStd:
    """The std of ``model`` for ``inputs`` (see the module docstring): the fitted terms' variance,
    times the square of the row's group scale when the model has groups, plus the rules' variance
    (the calibration rows, inside the domain, say nothing about the rules)."""
    fitted = np.zeros_like(inputs.epistemic_var, dtype=np.float64)
    rules = np.zeros_like(fitted)
    parts: dict[str, np.ndarray] = {}
    for term in model.terms():
        v = term.variance(inputs)
        if v is None:
            continue
        weight = model.weights.get(term.name, 0.0) if term.fitted else 1.0
        part = weight * v
        parts[term.name] = np.sqrt(part)
        if term.fitted:
            fitted = fitted + part
        else:
            rules = rules + part
    values = None if model.groups is None else difficulty(model.groups.score, inputs, np.sqrt(fitted))
    if values is not None:
        scale = model.groups.scale(values)[:, None]
        fitted = fitted * scale * scale
        parts = {name: part * scale if name in model.weights else part for name, part in parts.items()}
    return HeadStd(np.sqrt(np.maximum(fitted + rules, MIN_VARIANCE)), parts)


def difficulty(score: str, inputs: TermInputs, std: np.ndarray) -> np.ndarray | None:
    """Each row's difficulty ``score`` (:data:`~ensemble.group_calibration.DIFFICULTY_SCORES`) from
    its inputs and its term-model ``std`` ([rows, dim]); None when the inputs lack it."""
    if score == "std":
        return np.log(np.maximum(std.mean(axis=1), MIN_VARIANCE))
    if score == "distance":
        return inputs.distance
    if score == "size":
        return None if inputs.size is None else np.asarray(inputs.size, dtype=np.float64)
    raise ValueError(f"unknown difficulty score {score!r}")


def _nll(variance: np.ndarray, err: np.ndarray) -> float:
    v = np.maximum(variance, MIN_VARIANCE)
    return float(np.mean(0.5 * np.log(2 * math.pi * v) + 0.5 * err * err / v))


def distance_limit(distances: np.ndarray, quantile: float = DISTANCE_LIMIT_QUANTILE) -> float:
    """The latent distance beyond which a row is out of domain: the ``quantile`` of a log-normal
    fitted to the calibration rows' ``distances`` (the empirical 99th percentile of ~100 rows is
    their second largest: noise, and calibration sets of ideal and ordered cells have shorter
    tails than new random cells)."""
    from scipy.stats import norm

    logs = np.log(np.maximum(np.asarray(distances, dtype=np.float64), 1e-12))
    return float(np.exp(logs.mean() + norm.ppf(quantile) * logs.std()))


def fit_head(inputs: TermInputs, errors: np.ndarray, train_targets: np.ndarray | None,
             strain_response: tuple[list, list] | None = None,
             group_score: str | None = DEFAULT_GROUP_SCORE) -> HeadUncertainty:
    """Weights minimising the calibration NLL of ``errors`` ([rows, dim], prediction - target).

    ``train_targets`` ([rows, dim], the training split's) give the out-of-domain term's variance;
    None leaves that term out. The distance term is used when ``inputs.distance`` is given; the
    strain term with ``strain_response`` (:func:`fit_strain_response` on the training split).
    ``group_score`` names the difficulty score of the per-group scales fitted on the same rows
    after the weights (:mod:`ensemble.group_calibration`; None: none)."""
    errors = np.asarray(errors, dtype=np.float64)
    mse = np.maximum(np.mean(errors * errors, axis=0), MIN_VARIANCE)
    limit = None if inputs.distance is None else distance_limit(inputs.distance)
    draft = HeadUncertainty(
        weights={},
        distance_unit_variance=mse.tolist() if inputs.distance is not None else [],
        prior_variance=(np.var(train_targets, axis=0).tolist() if train_targets is not None else []),
        distance_limit=limit,
        strain_coef=strain_response[0] if strain_response else [],
        strain_range=strain_response[1] if strain_response else [],
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
    model = draft.model_copy(update={"weights": {t.name: float(np.exp(w)) for t, w in zip(fitted, best.x)}})
    if group_score is None:
        return model
    std = combine_terms(model, inputs).std  # the rules are about 0 on calibration rows (in the domain)
    values = difficulty(group_score, inputs, np.sqrt(np.maximum(sum(
        model.weights[t.name] * v for t, v in zip(fitted, variances)), MIN_VARIANCE)))
    if values is None:
        return model
    return model.model_copy(update={"groups": fit_group_scales(group_score, values, errors / std)})
