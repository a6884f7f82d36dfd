"""The applicability domain's input side: what the training inputs looked like, checked outright.

:class:`InputDomain`, fitted on the training split at ``select`` time, records

* the elements (``z``) of the training graphs: an input with another element is outside;
* the range of every node feature column of ``x``: a value outside it is outside;
* the envelope of each node's neighbour shells: the number of neighbours at distance ratios
  ``r / r0`` in the bins of :data:`SHELL_EDGES`, where ``r0`` is the median distance to the node's
  six nearest neighbours (so the descriptor does not change with the lattice constant), between
  the 0.05% and 99.95% quantiles of the training nodes (rounded outwards). A bin that reaches
  past the graph cutoff is not counted (its neighbours may lie beyond the edges). A vacancy
  (11 nearest neighbours where training nodes always had 12), a surface, another lattice or a
  strong shear puts nodes outside; a new composition of the same lattice does not;
* the *scale* the shells leave out: each node's ``log r0`` against what its structure's
  composition predicts (a least-squares fit on the training graphs of their mean ``log r0`` on the
  element fractions: Vegard's law in the logarithm), the residual's 0.05% and 99.95% quantiles and
  its standard deviation. A cell stretched or compressed uniformly beyond what the training cells spanned puts its nodes outside;
  how far, in standard deviations beyond the range, is the node's *scale excess* (outside when
  above :data:`SCALE_TOLERANCE`);
* the *shape* of the first shell: the spread (standard deviation) of each node's first-shell
  distance ratios ``r / r0`` (below ``SHELL_EDGES[1]``), its range and standard deviation in the
  training nodes: a shear or a strong distortion beyond what the training cells had widens it;
* the *compression* of the first shell: the sum over a node's first-shell bonds shorter than its
  composition's expected nearest-neighbour distance (the scale model's ``r0``) of their squared
  log strain, ``sum min(0, log(r / r0_expected))^2``: an energy-like measure (harmonic in the bond
  strain) that a shear or a compression raises and another lattice at its own volume hardly does.
  Scale residual, shape and compression are the node's three *strain descriptors*; each is
  checked like the scale (ensembles stored with the first two read those two).

Aggregation (the rule, per structure): an atom is outside when its element is unknown, a feature or
a shell is outside its range, or a strain descriptor is. A structure is outside the domain when it
holds an element the training never saw or at least :data:`OUTSIDE_FRACTION` of its atoms are outside, so
one atom at the edge of the envelope in a 300-atom cell does not flag the cell (a random alloy of
300 atoms has on average about one such atom) and a cell mostly outside does.

:meth:`InputDomain.check` returns, per graph, the reasons it is outside (empty: inside) and, per
node, its *excess* (how many neighbours it has beyond the envelope, summed over the bins), its
first-shell *deficit* (nearest neighbours missing below the envelope: broken bonds), its strain
descriptors and their excess, and whether it is outside.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch_geometric.data import Data

from graph_builders.schema import edge_vectors

SHELL_EDGES: tuple[float, ...] = (0.0, 1.2, 1.68, 1.85, 2.1)
NEAREST_FOR_SCALE = 6
#: the strain descriptors, in the order of the arrays that hold them
STRAIN_DESCRIPTORS: tuple[str, ...] = ("scale", "shape", "compression")
ENVELOPE_QUANTILE = 0.0005
#: a node's strain descriptor is outside when it lies beyond the training range by more than this many
#: standard deviations of the training nodes' (the range's ends are single extreme nodes)
SCALE_TOLERANCE = 1.0
#: a structure with at least this fraction of its atoms outside the envelopes is outside the domain
OUTSIDE_FRACTION = 0.1


def _node_geometry(graph: Data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre node of each edge, edge length, ``r0`` per node: the median distance to its (up to)
    six nearest neighbours, NaN for a node without edges)."""
    n = graph.num_nodes
    if graph.edge_index.shape[1] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.full(n, np.nan)
    with torch.no_grad():
        length = edge_vectors(graph).norm(dim=1).double().numpy()
    centre = graph.edge_index[1].numpy()
    return centre, length, _median_nearest(n, centre, length)


def _stacked(graphs: Sequence[Data]) -> tuple[np.ndarray | None, torch.Tensor | None, np.ndarray, np.ndarray]:
    """The graphs' ``z`` and ``x`` one after the other (None unless every graph has them), the centre
    node of every edge (numbered across the graphs) and its length: what :class:`InputDomain.check`
    reads, without collating a PyG batch (each graph's edge vectors from its own cell)."""
    zs = [getattr(g, "z", None) for g in graphs]
    xs = [getattr(g, "x", None) for g in graphs]
    z = np.concatenate([v.numpy() for v in zs]) if all(v is not None for v in zs) else None
    x = None
    if all(v is not None and v.dim() == 2 for v in xs) and len({v.shape[1] for v in xs}) == 1:
        x = torch.cat(xs)
    offsets = np.concatenate([[0], np.cumsum([g.num_nodes for g in graphs])])
    with torch.no_grad():
        length = np.concatenate([edge_vectors(g).norm(dim=1).double().numpy() for g in graphs])
    centre = np.concatenate([g.edge_index[1].numpy() + start for g, start in zip(graphs, offsets[:-1])])
    return z, x, centre, length


def _median_nearest(n: int, centre: np.ndarray, length: np.ndarray) -> np.ndarray:
    """``r0`` per node: the median of its (up to) six shortest edges' lengths, NaN without edges."""
    if len(length) == 0:
        return np.full(n, np.nan)
    order = np.argsort(centre + length / (2.0 * (length.max() + 1.0)))  # by centre, then length
    length_sorted = length[order]
    starts = np.concatenate([[0], np.cumsum(np.bincount(centre, minlength=n))])
    # median of each node's (up to) six nearest: its lengths are sorted, so the middle one(s)
    m = np.minimum(np.diff(starts), NEAREST_FOR_SCALE)
    last = len(length_sorted) - 1
    low = length_sorted[np.minimum(starts[:-1] + np.maximum(m - 1, 0) // 2, last)]
    high = length_sorted[np.minimum(starts[:-1] + m // 2, last)]
    return np.where(m > 0, 0.5 * (low + high), np.nan)


def shell_counts(graph: Data, cutoff: float, edges: Sequence[float] = SHELL_EDGES) -> np.ndarray:
    """``[num_nodes, bins]`` neighbour counts per distance-ratio bin (``edges``), NaN where the bin
    is censored by the cutoff (see the module docstring)."""
    return _shells(graph.num_nodes, *_node_geometry(graph), cutoff, edges)


def _shells(n: int, centre: np.ndarray, length: np.ndarray, r0: np.ndarray, cutoff: float,
            edges: Sequence[float]) -> np.ndarray:
    bins = len(edges) - 1
    out = np.full((n, bins), np.nan)
    if len(length) == 0:
        return out
    which = np.digitize(length / r0[centre], edges) - 1
    keep = which < bins
    counts = np.bincount(centre[keep] * bins + which[keep], minlength=n * bins).reshape(n, bins).astype(np.float64)
    inside = np.asarray(edges[1:])[None, :] * r0[:, None] <= cutoff
    out[inside] = counts[inside]
    return out


def first_shell_spread(n: int, centre: np.ndarray, length: np.ndarray, r0: np.ndarray,
                       first: float = SHELL_EDGES[1]) -> np.ndarray:
    """[n] the standard deviation of each node's first-shell distance ratios ``r / r0`` (the
    edges with a ratio below ``first``); NaN for a node with fewer than two."""
    if len(length) == 0:
        return np.full(n, np.nan)
    ratio = length / r0[centre]
    keep = ratio < first
    count = np.bincount(centre[keep], minlength=n).astype(np.float64)
    total = np.bincount(centre[keep], ratio[keep], minlength=n)
    squares = np.bincount(centre[keep], ratio[keep] ** 2, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
        var = np.maximum(squares / count - mean * mean, 0.0)
    return np.where(count >= 2, np.sqrt(var), np.nan)


def first_shell_compression(n: int, centre: np.ndarray, length: np.ndarray, r0: np.ndarray,
                            expected_log_r0: np.ndarray, first: float = SHELL_EDGES[1]) -> np.ndarray:
    """[n] per node, ``sum min(0, log(r / r0_expected))^2`` over its first-shell bonds (ratio
    ``r / r0`` below ``first``); ``expected_log_r0`` [n] the scale model's value (NaN: unknown)."""
    if len(length) == 0:
        return np.full(n, np.nan)
    keep = length / r0[centre] < first
    with np.errstate(invalid="ignore", divide="ignore"):
        strain = np.minimum(np.log(length[keep]) - expected_log_r0[centre[keep]], 0.0)
    total = np.bincount(centre[keep], strain * strain, minlength=n)
    return np.where(np.isfinite(expected_log_r0), total, np.nan)


def composition_features(z: np.ndarray, graph_of: np.ndarray, num_graphs: int, elements: Sequence[int]) -> np.ndarray:
    """``[num_graphs, E]``: each graph's fraction of every element of ``elements`` (atoms of other
    elements are left out of the count)."""
    known = np.isin(z, elements)
    column = np.searchsorted(np.asarray(elements), z[known])
    counts = np.zeros((num_graphs, len(elements)))
    np.add.at(counts, (graph_of[known], column), 1.0)
    return counts / np.maximum(counts.sum(1, keepdims=True), 1.0)


@dataclass
class DomainCheck:
    """Why each graph is outside the domain (no reasons: inside), and what each node contributed."""

    reasons: list[list[str]]  # per graph
    node_excess: np.ndarray  # [num_nodes] neighbours beyond the shell envelope
    node_unknown: np.ndarray  # [num_nodes] bool: element or feature outside the training range
    node_strain: np.ndarray | None = None  # [num_nodes, D] scale residual, shape, compression (NaN: not known)
    node_strain_excess: np.ndarray | None = None  # [num_nodes, D] standard deviations beyond the range
    node_deficit: np.ndarray | None = None  # [num_nodes] first-shell neighbours below the envelope
    node_element: np.ndarray | None = None  # [num_nodes] index into the training elements, -1: one it never saw
    num_elements: int = 0  # how many elements the training had

    @property
    def node_outside(self) -> np.ndarray:
        """[num_nodes] bool: the node fails any check (element, feature, shells, strain)."""
        out = self.node_unknown | (self.node_excess > 0)
        if self.node_strain_excess is None:
            return out
        return out | (self.node_strain_excess > SCALE_TOLERANCE).any(axis=1)

    @property
    def node_outside_weight(self) -> np.ndarray:
        """[num_nodes] 0 inside; ``1 + deficit`` outside (each missing nearest neighbour, a broken
        bond the training never showed, adds one prior std to the atom's)."""
        deficit = np.zeros(len(self.node_excess)) if self.node_deficit is None else self.node_deficit
        return np.where(self.node_outside, 1.0 + deficit, 0.0)

    def graph_excess(self, node_ptr: np.ndarray) -> np.ndarray:
        """Mean node excess per graph."""
        return _graph_mean(self.node_excess, node_ptr)

    def outside_fraction(self, node_ptr: np.ndarray) -> np.ndarray:
        """Fraction of each graph's atoms outside (see :attr:`node_outside`)."""
        return _graph_mean(self.node_outside.astype(np.float64), node_ptr)

    def outside_weight(self, node_ptr: np.ndarray) -> np.ndarray:
        """Mean of :attr:`node_outside_weight` per graph."""
        return _graph_mean(self.node_outside_weight, node_ptr)

    def composition(self, node_ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Per graph, the fraction of its atoms of each training element ``[num_graphs, E]`` and of
        elements the training never saw ``[num_graphs]`` (None: elements not checked)."""
        if self.node_element is None:
            return None
        sizes = np.diff(node_ptr)
        graph_of = np.repeat(np.arange(len(sizes)), sizes)
        known = self.node_element >= 0
        counts = np.zeros((len(sizes), self.num_elements))
        np.add.at(counts, (graph_of[known], self.node_element[known]), 1.0)
        total = np.maximum(sizes, 1)[:, None]
        return counts / total, np.bincount(graph_of, ~known, minlength=len(sizes)) / total[:, 0]

    def graph_strain(self, node_ptr: np.ndarray) -> np.ndarray | None:
        """[num_graphs, D] mean strain descriptors per graph (nodes without them left out; NaN when
        none has them)."""
        if self.node_strain is None:
            return None
        known = np.isfinite(self.node_strain)
        columns = []
        for d in range(self.node_strain.shape[1]):
            total = _graph_mean(np.where(known[:, d], self.node_strain[:, d], 0.0), node_ptr)
            share = _graph_mean(known[:, d].astype(np.float64), node_ptr)
            with np.errstate(invalid="ignore", divide="ignore"):
                columns.append(np.where(share > 0, total / share, np.nan))
        return np.stack(columns, axis=1)


def _graph_mean(values: np.ndarray, node_ptr: np.ndarray) -> np.ndarray:
    sizes = np.diff(node_ptr)
    graph = np.repeat(np.arange(len(sizes)), sizes)
    return np.bincount(graph, values, minlength=len(sizes)) / np.maximum(sizes, 1)


@dataclass
class InputDomain:
    """The training inputs' elements, feature ranges, shell envelope and scale (see the module docstring)."""

    cutoff: float
    elements: list[int] = field(default_factory=list)
    x_min: list[float] = field(default_factory=list)
    x_max: list[float] = field(default_factory=list)
    shell_edges: list[float] = field(default_factory=lambda: list(SHELL_EDGES))
    shell_low: list[float] = field(default_factory=list)
    shell_high: list[float] = field(default_factory=list)
    scale_coef: list[float] = field(default_factory=list)  # log r0 = composition_features @ coef
    strain_low: list[float] = field(default_factory=list)  # per strain descriptor: the training nodes' range
    strain_high: list[float] = field(default_factory=list)
    strain_sd: list[float] = field(default_factory=list)  # their standard deviations: the unit of the excess

    def __post_init__(self) -> None:
        # a bin no training node could count (censored by the cutoff everywhere) has no upper bound;
        # the manifest's JSON stores that infinity as null
        self.shell_high = [math.inf if v is None else float(v) for v in self.shell_high]
        self.shell_low = [0.0 if v is None else float(v) for v in self.shell_low]

    @classmethod
    def fit(cls, graphs: Sequence[Data], cutoff: float) -> "InputDomain":
        """From the training graphs (built at the ensemble's cutoff)."""
        zs = [g.z.numpy() for g in graphs if getattr(g, "z", None) is not None]
        xs = [g.x.double().numpy() for g in graphs if getattr(g, "x", None) is not None and g.x.dim() == 2]
        geometry = [_node_geometry(g) for g in graphs]
        shells = np.concatenate([_shells(g.num_nodes, *geo, cutoff, SHELL_EDGES) for g, geo in zip(graphs, geometry)])
        with warnings.catch_warnings():  # a bin censored in every node has no quantile (NaN, kept open)
            warnings.simplefilter("ignore", RuntimeWarning)
            low = np.floor(np.nanquantile(shells, ENVELOPE_QUANTILE, axis=0))
            high = np.ceil(np.nanquantile(shells, 1 - ENVELOPE_QUANTILE, axis=0))
        x = np.concatenate(xs) if xs else np.zeros((0, 0))
        elements = sorted(int(e) for e in np.unique(np.concatenate(zs))) if zs else []
        domain = cls(cutoff=float(cutoff), elements=elements,
                     x_min=x.min(0).tolist() if x.size else [], x_max=x.max(0).tolist() if x.size else [],
                     shell_low=np.nan_to_num(low, nan=0.0).tolist(),
                     shell_high=np.nan_to_num(high, nan=np.inf).tolist())
        if len(zs) == len(graphs) and elements:
            domain._fit_strain(graphs, geometry)
        return domain

    def _fit_strain(self, graphs: Sequence[Data], geometry: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """The scale model (coefficients) and every strain descriptor's range and sd, from the
        training nodes' geometry (:func:`_node_geometry` per graph)."""
        r0 = np.concatenate([geo[2] for geo in geometry])
        shape = np.concatenate([first_shell_spread(g.num_nodes, *geo) for g, geo in zip(graphs, geometry)])
        sizes = np.array([g.num_nodes for g in graphs])
        graph_of = np.repeat(np.arange(len(graphs)), sizes)
        features = composition_features(np.concatenate([g.z.numpy() for g in graphs]), graph_of, len(graphs),
                                         self.elements)
        log_r0 = np.log(r0)
        known = np.isfinite(log_r0)
        if known.sum() < 10:
            return
        node_ptr = np.concatenate([[0], np.cumsum(sizes)])
        mean_log = _graph_mean(np.where(known, log_r0, 0.0), node_ptr)
        share = _graph_mean(known.astype(np.float64), node_ptr)
        rows = share > 0
        coef = np.linalg.lstsq(features[rows], mean_log[rows] / share[rows], rcond=None)[0]
        self.scale_coef = coef.tolist()
        expected = features[graph_of] @ coef
        compression = np.concatenate([first_shell_compression(g.num_nodes, *geo, expected[start:start + g.num_nodes])
                                      for g, geo, start in zip(graphs, geometry, node_ptr[:-1])])
        for values in ((log_r0 - expected)[known], shape[np.isfinite(shape)],
                       compression[np.isfinite(compression)]):
            self.strain_low.append(float(np.quantile(values, ENVELOPE_QUANTILE)) if len(values) else 0.0)
            self.strain_high.append(float(np.quantile(values, 1 - ENVELOPE_QUANTILE)) if len(values) else 0.0)
            self.strain_sd.append(float(max(np.std(values), 1e-6)) if len(values) else 1.0)

    def check(self, graphs: Sequence[Data]) -> DomainCheck:
        """The reasons per graph and what each node contributed (see :class:`DomainCheck` and the
        module docstring's rule); all graphs are checked together (vectorised per node)."""
        from ase.data import chemical_symbols

        if not graphs:
            return DomainCheck([], np.zeros(0), np.zeros(0, dtype=bool))
        zz, x, centre, length = _stacked(graphs)
        sizes = np.array([g.num_nodes for g in graphs])
        node_ptr = np.concatenate([[0], np.cumsum(sizes)])
        graph_of = np.repeat(np.arange(len(graphs)), sizes)
        reasons: list[list[str]] = [[] for _ in graphs]
        details: list[list[str]] = [[] for _ in graphs]  # what the outside atoms failed
        unknown = np.zeros(len(graph_of), dtype=bool)
        if zz is not None and self.elements:
            new = ~np.isin(zz, self.elements)
            unknown |= new
            unseen_atoms = np.bincount(graph_of, new, minlength=len(graphs))
            for g in np.unique(graph_of[new]):
                names = ", ".join(_symbol(e, chemical_symbols) for e in sorted(set(zz[graph_of == g][new[graph_of == g]].tolist())))
                reasons[g].append(f"element(s) {names} not in the training data")
                details[g].append(f"{int(unseen_atoms[g])} of element(s) {names} the training never saw")
        if x is not None and self.x_min and x.dim() == 2 and x.shape[1] == len(self.x_min):
            xx = x.double().numpy()
            span = np.maximum(np.asarray(self.x_max) - np.asarray(self.x_min), 1e-12)
            outside = (xx < np.asarray(self.x_min) - 1e-6 * span) | (xx > np.asarray(self.x_max) + 1e-6 * span)
            rows = outside.any(1)
            unknown |= rows
            for g in np.unique(graph_of[rows]):
                cols = np.flatnonzero(outside[graph_of == g].any(0))
                details[g].append(f"node features x[:, {', '.join(map(str, cols.tolist()))}] outside the training range")
        num_nodes = len(graph_of)
        r0 = _median_nearest(num_nodes, centre, length)
        shells = _shells(num_nodes, centre, length, r0, self.cutoff, self.shell_edges)
        low, high = np.asarray(self.shell_low), np.asarray(self.shell_high)
        over = np.nansum(np.maximum(shells - high, 0.0) + np.maximum(low - shells, 0.0), axis=1)
        flagged = np.bincount(graph_of, over > 0, minlength=len(graphs))
        mean_over = _graph_mean(over, node_ptr)
        for g in np.flatnonzero(flagged):
            details[g].append(f"{int(flagged[g])} with neighbour shells outside the training envelope "
                              f"({mean_over[g]:.2g} neighbours per atom beyond it)")
        deficit = np.nan_to_num(np.maximum(low[0] - shells[:, 0], 0.0), nan=0.0)
        strain, strain_excess = self._strain(zz, graph_of, len(graphs), num_nodes, centre, length, r0)
        element = None
        if zz is not None and self.elements:
            position = np.searchsorted(self.elements, zz).clip(0, len(self.elements) - 1)
            element = np.where(np.asarray(self.elements)[position] == zz, position, -1)
        check = DomainCheck(reasons, over, unknown, strain, strain_excess, deficit, element, len(self.elements))
        if strain is not None and strain_excess is not None:
            self._describe_strain(details, strain, strain_excess, graph_of)
        fraction = check.outside_fraction(node_ptr)
        counts = np.bincount(graph_of, check.node_outside, minlength=len(graphs))
        for g in np.flatnonzero(fraction >= OUTSIDE_FRACTION):
            reasons[g].append(_envelope_reason(int(counts[g]), int(sizes[g]), details[g]))
        return check

    def _describe_strain(self, details: list[list[str]], strain: np.ndarray, excess: np.ndarray,
                         graph_of: np.ndarray) -> None:
        """Add, per graph, how many atoms have each strain descriptor outside and by how much."""
        for d, name in enumerate(STRAIN_DESCRIPTORS[:strain.shape[1]]):
            rows = excess[:, d] > SCALE_TOLERANCE
            beyond = np.bincount(graph_of, rows, minlength=len(details))
            for g in np.flatnonzero(beyond):
                value = float(np.median(strain[(graph_of == g) & rows, d]))
                if name == "scale":
                    edge = self.strain_high[d] if value > self.strain_high[d] else self.strain_low[d]
                    details[g].append(f"{int(beyond[g])} with nearest-neighbour distances "
                                      f"{100 * np.expm1(value - edge):+.1f}% beyond the training range for their "
                                      "composition")
                elif name == "compression":
                    details[g].append(f"{int(beyond[g])} with nearest-neighbour bonds compressed beyond the training "
                                      f"range (sum of squared bond strains {value:.3g}, training up to "
                                      f"{self.strain_high[d]:.3g})")
                else:
                    details[g].append(f"{int(beyond[g])} with a first shell distorted beyond the training range "
                                      f"(spread {value:.3f} of the distance, training up to {self.strain_high[d]:.3f})")

    def _strain(self, z: np.ndarray | None, graph_of: np.ndarray, num_graphs: int, n: int, centre: np.ndarray,
                length: np.ndarray, r0: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Per node: the strain descriptors ``[n, D]`` and their excess in standard deviations
        (None: no strain model)."""
        if z is None or not self.scale_coef or len(self.strain_sd) not in (2, len(STRAIN_DESCRIPTORS)):
            return None, None
        features = composition_features(z, graph_of, num_graphs, self.elements)
        expected = features[graph_of] @ np.asarray(self.scale_coef)
        # a structure with an element the training never saw has no expected scale (the element
        # check flags it): its residual is unknown, not the distance of a composition missing it
        unseen = np.bincount(graph_of, ~np.isin(z, self.elements), minlength=num_graphs) > 0
        expected[unseen[graph_of]] = np.nan
        with np.errstate(divide="ignore", invalid="ignore"):
            residual = np.log(r0) - expected
        strain = np.stack([residual, first_shell_spread(n, centre, length, r0),
                           first_shell_compression(n, centre, length, r0, expected)], axis=1)
        strain = strain[:, :len(self.strain_sd)]  # an ensemble stored with two descriptors reads two
        low, high, sd = (np.asarray(v)[None, :] for v in (self.strain_low, self.strain_high, self.strain_sd))
        beyond = np.maximum(strain - high, 0.0) + np.maximum(low - strain, 0.0)
        return strain, np.nan_to_num(beyond / sd, nan=0.0)


def _envelope_reason(outside: int, size: int, details: list[str]) -> str:
    """``"N of M atom(s) outside the training envelope: what they failed"``; every outside atom
    failed a check that adds a detail, and without one (a check added without its words) the reason
    ends at the count rather than at an empty list."""
    reason = f"{outside} of {size} atom(s) outside the training envelope"
    return f"{reason}: {'; '.join(details)}" if details else reason


def _symbol(z: int, symbols: Sequence[str]) -> str:
    return symbols[z] if 0 < z < len(symbols) else str(z)

