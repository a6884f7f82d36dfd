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
  strong shear puts nodes outside; a new composition of the same lattice does not.

:meth:`InputDomain.check` returns, per graph, the reasons it is outside (empty: inside) and, per
node, its *excess*: how many neighbours it has beyond the envelope, summed over the bins.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch_geometric.data import Batch, Data

from graph_builders.schema import edge_vectors

SHELL_EDGES: tuple[float, ...] = (0.0, 1.2, 1.68, 1.85, 2.1)
NEAREST_FOR_SCALE = 6
ENVELOPE_QUANTILE = 0.0005


def shell_counts(graph: Data, cutoff: float, edges: Sequence[float] = SHELL_EDGES) -> np.ndarray:
    """``[num_nodes, bins]`` neighbour counts per distance-ratio bin (``edges``), NaN where the bin
    is censored by the cutoff (see the module docstring)."""
    n = graph.num_nodes
    bins = len(edges) - 1
    out = np.full((n, bins), np.nan)
    if graph.edge_index.shape[1] == 0:
        return out
    with torch.no_grad():
        length = edge_vectors(graph).norm(dim=1).double().numpy()
    centre = graph.edge_index[1].numpy()
    order = np.argsort(centre + length / (2.0 * (length.max() + 1.0)))  # by centre, then length
    centre_sorted, length_sorted = centre[order], length[order]
    starts = np.searchsorted(centre_sorted, np.arange(n + 1))
    # median of each node's (up to) six nearest: its lengths are sorted, so the middle one(s)
    m = np.minimum(np.diff(starts), NEAREST_FOR_SCALE)
    last = len(length_sorted) - 1
    low = length_sorted[np.minimum(starts[:-1] + np.maximum(m - 1, 0) // 2, last)]
    high = length_sorted[np.minimum(starts[:-1] + m // 2, last)]
    r0 = np.where(m > 0, 0.5 * (low + high), np.nan)
    ratio = length / r0[centre]
    which = np.digitize(ratio, edges) - 1
    keep = which < bins
    counts = np.zeros((n, bins))
    np.add.at(counts, (centre[keep], which[keep]), 1.0)
    inside = np.asarray(edges[1:])[None, :] * r0[:, None] <= cutoff
    out[inside] = counts[inside]
    return out


@dataclass
class DomainCheck:
    """Why each graph is outside the domain (no reasons: inside), and each node's excess."""

    reasons: list[list[str]]  # per graph
    node_excess: np.ndarray  # [num_nodes] neighbours beyond the shell envelope
    node_unknown: np.ndarray  # [num_nodes] bool: element or feature outside the training range

    def graph_excess(self, node_ptr: np.ndarray) -> np.ndarray:
        """Mean node excess per graph."""
        sizes = np.diff(node_ptr)
        graph = np.repeat(np.arange(len(sizes)), sizes)
        return np.bincount(graph, self.node_excess, minlength=len(sizes)) / np.maximum(sizes, 1)


@dataclass
class InputDomain:
    """The training inputs' elements, feature ranges and shell envelope (see the module docstring)."""

    cutoff: float
    elements: list[int] = field(default_factory=list)
    x_min: list[float] = field(default_factory=list)
    x_max: list[float] = field(default_factory=list)
    shell_edges: list[float] = field(default_factory=lambda: list(SHELL_EDGES))
    shell_low: list[float] = field(default_factory=list)
    shell_high: list[float] = field(default_factory=list)

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
        shells = np.concatenate([shell_counts(g, cutoff) for g in graphs])
        with warnings.catch_warnings():  # a bin censored in every node has no quantile (NaN, kept open)
            warnings.simplefilter("ignore", RuntimeWarning)
            low = np.floor(np.nanquantile(shells, ENVELOPE_QUANTILE, axis=0))
            high = np.ceil(np.nanquantile(shells, 1 - ENVELOPE_QUANTILE, axis=0))
        x = np.concatenate(xs) if xs else np.zeros((0, 0))
        return cls(cutoff=float(cutoff),
                   elements=sorted(int(e) for e in np.unique(np.concatenate(zs))) if zs else [],
                   x_min=x.min(0).tolist() if x.size else [], x_max=x.max(0).tolist() if x.size else [],
                   shell_low=np.nan_to_num(low, nan=0.0).tolist(),
                   shell_high=np.nan_to_num(high, nan=np.inf).tolist())

    def check(self, graphs: Sequence[Data]) -> DomainCheck:
        """The reasons per graph and the excess per node (see :class:`DomainCheck`); all graphs are
        checked together (one batch, vectorised per node)."""
        from ase.data import chemical_symbols

        if not graphs:
            return DomainCheck([], np.zeros(0), np.zeros(0, dtype=bool))
        batch = Batch.from_data_list([_geometry_only(g) for g in graphs])
        sizes = np.array([g.num_nodes for g in graphs])
        graph_of = np.repeat(np.arange(len(graphs)), sizes)
        reasons: list[list[str]] = [[] for _ in graphs]
        unknown = np.zeros(len(graph_of), dtype=bool)
        z = getattr(batch, "z", None)
        if z is not None and self.elements:
            zz = z.numpy()
            new = ~np.isin(zz, self.elements)
            unknown |= new
            for g in np.unique(graph_of[new]):
                names = ", ".join(_symbol(e, chemical_symbols) for e in sorted(set(zz[graph_of == g][new[graph_of == g]].tolist())))
                reasons[g].append(f"element(s) {names} not in the training data")
        x = getattr(batch, "x", None)
        if x is not None and self.x_min and x.dim() == 2 and x.shape[1] == len(self.x_min):
            xx = x.double().numpy()
            span = np.maximum(np.asarray(self.x_max) - np.asarray(self.x_min), 1e-12)
            outside = (xx < np.asarray(self.x_min) - 1e-6 * span) | (xx > np.asarray(self.x_max) + 1e-6 * span)
            rows = outside.any(1)
            unknown |= rows
            for g in np.unique(graph_of[rows]):
                cols = np.flatnonzero(outside[graph_of == g].any(0))
                reasons[g].append(f"node features x[:, {', '.join(map(str, cols.tolist()))}] outside the training range")
        shells = shell_counts(batch, self.cutoff, self.shell_edges)
        low, high = np.asarray(self.shell_low), np.asarray(self.shell_high)
        over = np.nansum(np.maximum(shells - high, 0.0) + np.maximum(low - shells, 0.0), axis=1)
        flagged = np.bincount(graph_of, over > 0, minlength=len(graphs))
        mean_over = np.bincount(graph_of, over, minlength=len(graphs)) / np.maximum(sizes, 1)
        for g in np.flatnonzero(flagged):
            reasons[g].append(f"{int(flagged[g])} of {sizes[g]} atom(s) with neighbour shells outside the "
                              f"training envelope ({mean_over[g]:.2g} neighbours per atom beyond it)")
        return DomainCheck(reasons, over, unknown)


def _symbol(z: int, symbols: Sequence[str]) -> str:
    return symbols[z] if 0 < z < len(symbols) else str(z)


def _geometry_only(graph: Data) -> Data:
    """The fields the checks read (targets and names dropped, so any graphs batch together)."""
    out = Data()
    for key in ("x", "z", "pos", "edge_index", "edge_shift", "cell"):
        value = getattr(graph, key, None)
        if value is not None:
            out[key] = value
    return out
