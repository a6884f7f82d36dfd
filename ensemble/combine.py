"""From what the members said to the ensemble's prediction: weighted mean, calibrated std, domain.

For each head ``h`` with member predictions ``p_k``, member weights ``u_k`` and mean weights
``w_k`` (the member's per-head weight when the manifest has one (``greedy-per-head``), else
``w_k = u_k``), both normalised to sum 1 over the members that predict ``h``:

* ``mean = sum_k w_k p_k``;
* epistemic variance ``sum_k u_k (p_k - mean)^2`` (the members' weighted spread: with per-head
  weights the mean may come from one member alone, the spread still from all);
* aleatoric variance ``sum_k u_k var_k`` over the members that predict a variance (trained with
  ``GaussianNLLLoss``; weights renormalised over those members), absent when none does;
* the latent distance of each row, ``sum_k u_k d_k`` (:mod:`ensemble.latent`; a graph's is the
  larger of its graph distance and the mean of its nodes'), and the input-domain check
  (:mod:`ensemble.domain`);
* the std from the head's uncertainty model (:mod:`ensemble.uncertainty`), its terms kept apart
  (``epistemic``, ``aleatoric``, ``distance``, ``domain``, ``strain``).

Without a fitted model (an uncalibrated ensemble) the std is the mixture's:
``sqrt(epistemic + aleatoric)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from graph_builders.schema import HeadRegistry, HeadSpec
from hydragnn_ensemble.model.heads import VARIANCE_SUFFIX
from ensemble.domain import DomainCheck
from ensemble.latent import LatentDistances
from ensemble.members import MemberOutputs, PredictionError
from ensemble.uncertainty import HeadUncertainty, TermInputs, combine_terms, outside_domain

UNCALIBRATED = HeadUncertainty(weights={"epistemic": 1.0, "aleatoric": 1.0})


@dataclass
class Observation:
    """What the members said about a list of graphs, before combining."""

    outputs: list[MemberOutputs]  # one per member, manifest order
    node_ptr: np.ndarray  # [num_graphs + 1]
    domain: DomainCheck | None = None  # input checks (None: no domain stored)
    distances: list[LatentDistances] | None = None  # per member (None: no latent references)

    @property
    def num_graphs(self) -> int:
        return len(self.node_ptr) - 1


@dataclass
class HeadPrediction:
    """One head over all inputs. Graph heads: ``rows`` = graphs; node heads: ``rows`` = all nodes.

    ``parts`` holds each uncertainty term's share of the std (``std^2`` is the sum of their
    squares): ``epistemic``, ``aleatoric``, ``distance``, ``domain``, ``strain`` (see
    :mod:`ensemble.uncertainty`)."""

    head: HeadSpec
    mean: np.ndarray  # [rows, dim]
    std: np.ndarray  # [rows, dim] total, calibrated when the ensemble is
    parts: dict[str, np.ndarray]  # term -> [rows, dim]
    members: np.ndarray  # [K_h, rows, dim] the members' own predictions
    member_weights: np.ndarray  # [K_h] normalised weights of the mean
    member_ids: list[int]
    distance: np.ndarray | None = None  # [rows] latent distance (1: typical of the training data)
    in_domain: np.ndarray | None = None  # [rows] bool (None: no domain stored)

    @property
    def epistemic_std(self) -> np.ndarray:
        return self.parts["epistemic"]

    @property
    def aleatoric_std(self) -> np.ndarray | None:
        return self.parts.get("aleatoric")


@dataclass
class EnsemblePrediction:
    """Predictions of every head for a list of graphs (``node_ptr`` slices node heads per graph),
    and per graph whether it lies in the applicability domain and, if not, why."""

    heads: dict[str, HeadPrediction]
    num_graphs: int
    node_ptr: np.ndarray  # [num_graphs + 1]
    in_domain: np.ndarray | None = None  # [num_graphs] bool (None: the ensemble stores no domain)
    reasons: list[list[str]] = field(default_factory=list)  # per graph, empty when in domain

    def rows(self, head: str, graph: int) -> slice:
        """Rows of ``head`` that belong to graph ``graph``."""
        if self.heads[head].head.level == "graph":
            return slice(graph, graph + 1)
        return slice(int(self.node_ptr[graph]), int(self.node_ptr[graph + 1]))


def _normalised(weights: Sequence[float], head: str) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if not w.sum() > 0:
        raise PredictionError(f"head {head!r}: the members that predict it have zero total weight")
    return w / w.sum()


def _row_distances(obs: Observation, idx: list[int], u: np.ndarray, level: str) -> np.ndarray | None:
    """Member-weighted latent distance per row of a graph (or node) head."""
    if obs.distances is None:
        return None
    if level == "node":
        return np.tensordot(u, np.stack([obs.distances[k].node for k in idx]), axes=1)
    sizes = np.diff(obs.node_ptr)
    graph_of_node = np.repeat(np.arange(len(sizes)), sizes)
    per_member = []
    for k in idx:
        d = obs.distances[k]
        node_mean = np.bincount(graph_of_node, d.node, minlength=len(sizes)) / np.maximum(sizes, 1)
        per_member.append(np.maximum(d.graph, node_mean))
    return np.tensordot(u, np.stack(per_member), axes=1)


def _domain_rows(obs: Observation, level: str) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """(weight outside, outside, strain descriptors) per row: a graph row's weight is the mean of its
    atoms' (:attr:`~ensemble.domain.DomainCheck.node_outside_weight`), and it is outside by the rule
    of :mod:`ensemble.domain` (its reasons)."""
    if obs.domain is None:
        return None, None, None
    if level == "node":
        return obs.domain.node_outside_weight, obs.domain.node_outside, obs.domain.node_strain
    outside = np.array([bool(r) for r in obs.domain.reasons])
    return obs.domain.outside_weight(obs.node_ptr), outside, obs.domain.graph_strain(obs.node_ptr)


def _row_sizes(node_ptr: np.ndarray, level: str) -> np.ndarray:
    """Atoms in each row's structure (a node row: its graph's)."""
    sizes = np.diff(node_ptr)
    return sizes if level == "graph" else np.repeat(sizes, sizes)


@dataclass
class HeadInputs:
    """One head's combined member outputs, before the uncertainty model."""

    mean: np.ndarray  # [rows, dim]
    members: np.ndarray  # [K_h, rows, dim]
    mean_weights: np.ndarray  # [K_h]
    member_ids: list[int]
    terms: TermInputs


def head_inputs(heads: HeadRegistry, member_ids: Sequence[int], weights: Sequence[float], obs: Observation,
                head_weights: Mapping[str, Sequence[float]] | None = None) -> dict[str, HeadInputs]:
    """Mean, members and the uncertainty terms' inputs of every head the members predict."""
    head_weights = head_weights or {}
    preds = [o.preds for o in obs.outputs]
    out: dict[str, HeadInputs] = {}
    for head in heads:
        idx = [k for k, p in enumerate(preds) if head.name in p]
        if not idx:
            continue
        u = _normalised([weights[k] for k in idx], head.name)
        w = u if head.name not in head_weights else _normalised([head_weights[head.name][k] for k in idx], head.name)
        stack = np.stack([preds[k][head.name] for k in idx])  # [K, rows, dim]
        mean = np.tensordot(w, stack, axes=1)
        epi_var = np.tensordot(u, (stack - mean[None]) ** 2, axes=1)
        var_idx = [j for j, k in enumerate(idx) if head.name + VARIANCE_SUFFIX in preds[k]]
        alea_var = None
        if var_idx:
            wv = u[var_idx] / u[var_idx].sum()
            alea_var = np.tensordot(wv, np.stack([preds[idx[j]][head.name + VARIANCE_SUFFIX] for j in var_idx]), axes=1)
        weight, outside, strain = _domain_rows(obs, head.level)
        terms = TermInputs(epi_var, alea_var, _row_distances(obs, idx, u, head.level), weight, outside, strain,
                           size=_row_sizes(obs.node_ptr, head.level))
        out[head.name] = HeadInputs(mean, stack, w, [int(member_ids[k]) for k in idx], terms)
    return out


def combine(heads: HeadRegistry, member_ids: Sequence[int], weights: Sequence[float], obs: Observation,
            models: Mapping[str, HeadUncertainty] | None = None,
            head_weights: Mapping[str, Sequence[float]] | None = None) -> EnsemblePrediction:
    """The ensemble's prediction (see the module docstring); ``models[head]`` is the head's fitted
    uncertainty model (absent: the uncalibrated mixture std)."""
    models = models or {}
    result: dict[str, HeadPrediction] = {}
    graph_distance: np.ndarray | None = None
    distance_limit: float | None = None
    for name, hi in head_inputs(heads, member_ids, weights, obs, head_weights).items():
        head = heads[name]
        model = models.get(name, UNCALIBRATED)
        std = combine_terms(model, hi.terms)
        distance = hi.terms.distance
        outside = outside_domain(hi.terms, model.distance_limit)
        in_domain = None if outside is None or hi.terms.outside is None else ~outside
        if head.level == "graph" and distance is not None:
            graph_distance, distance_limit = distance, model.distance_limit
        result[name] = HeadPrediction(
            head=head, mean=hi.mean, std=std.std, parts=std.parts, members=hi.members,
            member_weights=hi.mean_weights, member_ids=hi.member_ids, distance=distance, in_domain=in_domain)
    in_domain, reasons = _graph_domain(obs, graph_distance, distance_limit)
    return EnsemblePrediction(result, obs.num_graphs, obs.node_ptr, in_domain, reasons)


def _graph_domain(obs: Observation, distance: np.ndarray | None,
                  limit: float | None) -> tuple[np.ndarray | None, list[list[str]]]:
    """Per graph: in the domain, and the reasons when not (input checks, latent distance)."""
    if obs.domain is None:
        return None, [[] for _ in range(obs.num_graphs)]
    reasons = [list(r) for r in obs.domain.reasons]
    if distance is not None and limit is not None:
        for g, d in enumerate(distance):
            if d > limit:
                reasons[g].append(f"latent distance {d:.3g} beyond the calibration data's {limit:.3g}")
    return np.array([not r for r in reasons]), reasons
