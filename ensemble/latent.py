"""How far an input lies from the training data in one member's learned representation.

A member's representation of a node is the output of each of its message-passing layers before
normalisation, concatenated (``HydraModel.forward_with_embedding``). :class:`LatentReference`,
fitted on the training split at ``select`` time, keeps:

* the standardisation of those features and a PCA projection to at most :data:`PCA_DIMS` dims;
* the projected mean feature of every training graph (at most :data:`MAX_GRAPHS`, a random
  subset beyond that) and of up to :data:`MAX_ATOMS` training nodes per element (``z``; graphs
  without ``z`` count as one element 0);
* the typical distance of a training graph (node) to its :data:`K` nearest training neighbours
  (median over a leave-one-out sample): the unit of every distance reported.

:meth:`LatentReference.distances` returns, per graph and per node, the mean distance to the ``K``
nearest references in that unit: about 1 in distribution, larger the further out. A node of an
element the training never saw is measured against all elements' references. The cost is a
matrix product of the query against at most 2,048 x 32 (graphs) and 256 x 32 per element
(nodes) numbers and a top-K.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

PCA_DIMS = 32
MAX_GRAPHS = 2048
MAX_ATOMS = 256
LOO_SAMPLE = 512
K = 5
_EPS = 1e-8


def _knn_mean(query: np.ndarray, reference: np.ndarray, k: int, exclude_self: bool = False) -> np.ndarray:
    """Mean Euclidean distance of each query row to its ``k`` nearest reference rows."""
    k = min(k, len(reference) - (1 if exclude_self else 0))
    if k < 1 or len(query) == 0:
        return np.full(len(query), np.inf)
    q = torch.from_numpy(np.ascontiguousarray(query, dtype=np.float32))
    r = torch.from_numpy(np.ascontiguousarray(reference, dtype=np.float32))
    sq = (q * q).sum(1, keepdim=True) + (r * r).sum(1)[None, :] - 2.0 * q @ r.T
    if exclude_self:
        sq[torch.arange(len(q)), torch.arange(len(q))] = float("inf")
    # the k smallest per row, unordered: numpy's introselect is ~3.5x torch.topk on CPU here
    nearest = np.partition(sq.numpy(), k - 1, axis=1)[:, :k]
    return np.sqrt(np.maximum(nearest, 0.0)).mean(1, dtype=np.float64)


def pool(features: np.ndarray, graph_index: np.ndarray, num_graphs: int) -> np.ndarray:
    """Mean of the node rows of each graph."""
    x = torch.from_numpy(np.ascontiguousarray(features))
    sums = torch.zeros((num_graphs, x.shape[1]), dtype=x.dtype).index_add_(0, torch.from_numpy(graph_index), x)
    counts = np.maximum(np.bincount(graph_index, minlength=num_graphs), 1)
    return sums.numpy() / counts[:, None]


@dataclass
class LatentDistances:
    """Distances of a batch of inputs, in units of the training data's typical distance."""

    graph: np.ndarray  # [num_graphs]
    node: np.ndarray  # [num_nodes]


@dataclass
class LatentReference:
    """A member's training data in its own representation (see the module docstring)."""

    mean: np.ndarray  # [D]
    scale: np.ndarray  # [D]
    components: np.ndarray  # [D, P]
    graphs: np.ndarray  # [G, P]
    graph_unit: float
    elements: np.ndarray  # [E] atomic numbers (0: graphs without z)
    atoms: np.ndarray  # [A, P] references of all elements, grouped by element
    atom_offsets: np.ndarray  # [E + 1] where each element's references start in ``atoms``
    atom_units: np.ndarray  # [E]

    @classmethod
    def fit(cls, features: np.ndarray, z: np.ndarray, graph_index: np.ndarray, num_graphs: int,
            seed: int = 0) -> "LatentReference":
        """From the node features ``[N, D]`` of the training graphs, their elements ``z`` [N] and
        the graph of each node ``graph_index`` [N]."""
        rng = np.random.default_rng(seed)
        x = np.asarray(features, dtype=np.float64)
        mean = x.mean(0)
        scale = x.std(0) + _EPS
        xs = (x - mean) / scale
        if num_graphs < 2 or len(xs) < 2:
            raise ValueError("the latent distance model needs at least 2 training graphs")
        _, _, vt = np.linalg.svd(xs[rng.choice(len(xs), min(len(xs), 20000), replace=False)], full_matrices=False)
        components = vt[: min(PCA_DIMS, vt.shape[0])].T
        nodes = xs @ components
        graphs = pool(nodes, graph_index, num_graphs)
        if len(graphs) > MAX_GRAPHS:
            graphs = graphs[rng.choice(len(graphs), MAX_GRAPHS, replace=False)]
        graph_unit = float(np.median(_knn_mean(graphs[:LOO_SAMPLE], graphs, K, exclude_self=True)))
        elements = np.unique(z)
        parts, units = [], []
        for element in elements:
            own = nodes[z == element]
            if len(own) > MAX_ATOMS:
                own = own[rng.choice(len(own), MAX_ATOMS, replace=False)]
            parts.append(own)
            units.append(float(np.median(_knn_mean(own[:LOO_SAMPLE], own, K, exclude_self=True))) if len(own) > 1
                         else 1.0)
        offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])])
        return cls(mean, scale, components, graphs.astype(np.float32), max(graph_unit, _EPS),
                   elements.astype(np.int64), np.concatenate(parts).astype(np.float32), offsets.astype(np.int64),
                   np.maximum(np.asarray(units), _EPS))

    def distances(self, features: np.ndarray, z: np.ndarray, graph_index: np.ndarray,
                  num_graphs: int) -> LatentDistances:
        """Distances of the query graphs and nodes (see the module docstring)."""
        nodes = ((np.asarray(features, dtype=np.float32) - self.mean.astype(np.float32)) / self.scale.astype(np.float32)
                 ) @ self.components.astype(np.float32)
        graph = _knn_mean(pool(nodes, graph_index, num_graphs).astype(np.float32), self.graphs, K) / self.graph_unit
        node = np.empty(len(nodes))
        known = {int(e): k for k, e in enumerate(self.elements)}
        overall_unit = float(np.median(self.atom_units))
        for element in np.unique(z):
            rows = z == element
            k = known.get(int(element))
            if k is None:  # an element the training never saw: against every reference
                node[rows] = _knn_mean(nodes[rows], self.atoms, K) / overall_unit
            else:
                refs = self.atoms[self.atom_offsets[k]:self.atom_offsets[k + 1]]
                node[rows] = _knn_mean(nodes[rows], refs, K) / self.atom_units[k]
        return LatentDistances(graph, node)

    # -- storage (plain arrays: saved with numpy, never pickled) ---------------------------------
    FIELDS = ("mean", "scale", "components", "graphs", "graph_unit", "elements", "atoms", "atom_offsets",
              "atom_units")

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}{name}": np.asarray(getattr(self, name)) for name in self.FIELDS}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> "LatentReference":
        values = {name: arrays[f"{prefix}{name}"] for name in cls.FIELDS}
        values["graph_unit"] = float(values["graph_unit"])
        return cls(**values)
