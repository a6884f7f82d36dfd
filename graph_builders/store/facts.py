"""What a trial needs to know about a whole dataset, computed once when the dataset is written.

A trial used to read every sample of every split at start (checks, normalisation, input widths, the
PNA degree histogram): minutes per trial and per rank at 10^6 graphs. The writer accumulates these
facts as it writes (:class:`FactsBuilder`) and stores them in the file (a JSON attribute); a dataset
written before (or by another program) gets them by one scan, cached beside it and keyed by its
content (:mod:`graph_builders.store.facts_cache`). Per split:

* sizes: graphs, nodes, edges, the largest graph, stored bytes;
* per head, the moments (count, sum, sum of squares, min, max per component) over the samples whose
  targets are finite, and the samples whose targets are not (by index);
* per graph head of dim 1, the moments per node (a total energy's statistics per atom);
* the moments of every column of ``x`` and the widths of ``x`` and ``edge_attr``;
* the histogram of the nodes' in-degrees (PNA's ``deg``).

Moments add up, so the facts of shards merge exactly (:meth:`SplitFacts.merged`), and a sample left
out (a non-finite target) is taken back out of them exactly (:meth:`SplitFacts.without`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch_geometric.data import Data

from graph_builders.schema import TARGET_PREFIX, HeadRegistry

FACTS_VERSION = 2


@dataclass
class Moments:
    """Count, sum, sum of squares, min and max of the columns of ``[rows, dim]`` arrays (float64)."""

    dim: int
    count: int = 0
    total: np.ndarray | None = None
    squares: np.ndarray | None = None
    low: np.ndarray | None = None
    high: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.total is None:
            self.total, self.squares = np.zeros(self.dim), np.zeros(self.dim)
            self.low, self.high = np.full(self.dim, np.inf), np.full(self.dim, -np.inf)

    def add(self, rows: np.ndarray, sign: int = 1) -> None:
        """Add (``sign`` 1) or take back (-1) the rows of ``rows`` ([n, dim]); min/max only grow."""
        rows = np.asarray(rows, dtype=np.float64).reshape(-1, self.dim)
        if rows.shape[0] == 0:
            return
        self.count += sign * rows.shape[0]
        self.total += sign * rows.sum(0)
        self.squares += sign * (rows * rows).sum(0)
        if sign > 0:
            np.minimum(self.low, rows.min(0), out=self.low)
            np.maximum(self.high, rows.max(0), out=self.high)

    def merged(self, other: "Moments") -> "Moments":
        return Moments(self.dim, self.count + other.count, self.total + other.total, self.squares + other.squares,
                       np.minimum(self.low, other.low), np.maximum(self.high, other.high))

    def copy(self) -> "Moments":
        return Moments(self.dim, self.count, self.total.copy(), self.squares.copy(), self.low.copy(), self.high.copy())

    @property
    def mean(self) -> np.ndarray:
        return self.total / max(self.count, 1)

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation per column."""
        mean = self.mean
        return np.sqrt(np.clip(self.squares / max(self.count, 1) - mean * mean, 0.0, None))

    def to_json(self) -> dict:
        return {"dim": self.dim, "count": self.count, "total": self.total.tolist(),
                "squares": self.squares.tolist(), "low": self.low.tolist(), "high": self.high.tolist()}

    @classmethod
    def from_json(cls, d: dict) -> "Moments":
        return cls(int(d["dim"]), int(d["count"]), np.asarray(d["total"], dtype=np.float64),
                   np.asarray(d["squares"], dtype=np.float64), np.asarray(d["low"], dtype=np.float64),
                   np.asarray(d["high"], dtype=np.float64))


@dataclass
class SplitFacts:
    """The facts of one split (see the module docstring)."""

    ndata: int = 0
    nodes: int = 0
    edges: int = 0
    max_nodes: int = 0
    max_edges: int = 0
    nbytes: int = 0
    heads: dict[str, Moments] = field(default_factory=dict)
    per_node: dict[str, Moments] = field(default_factory=dict)  # graph heads of dim 1, per node
    nonfinite: dict[str, list[int]] = field(default_factory=dict)  # head -> samples with NaN/inf targets
    x: Moments | None = None
    x_width: int = -1
    edge_width: int = 0
    has_z: bool = False
    degree_histogram: list[int] = field(default_factory=list)
    min_nodes: int = 0  # (0 for an empty split)
    min_edges: int = 0

    def merged(self, other: "SplitFacts", offset: int) -> "SplitFacts":
        """These facts and ``other``'s, whose samples follow at ``offset`` (their indices shift)."""
        if self.ndata and other.ndata and (self.x_width, self.edge_width, self.has_z) != (
                other.x_width, other.edge_width, other.has_z):
            raise ValueError(f"x/edge_attr widths {other.x_width}/{other.edge_width} differ from "
                             f"{self.x_width}/{self.edge_width}")
        first = self if self.ndata else other
        out = SplitFacts(
            self.ndata + other.ndata, self.nodes + other.nodes, self.edges + other.edges,
            max(self.max_nodes, other.max_nodes), max(self.max_edges, other.max_edges), self.nbytes + other.nbytes,
            _merge(self.heads, other.heads), _merge(self.per_node, other.per_node),
            {h: self.nonfinite.get(h, []) + [offset + i for i in other.nonfinite.get(h, [])]
             for h in set(self.nonfinite) | set(other.nonfinite)},
            other.x if self.x is None else (self.x if other.x is None else self.x.merged(other.x)),
            first.x_width, first.edge_width, first.has_z,
            _add_lists(self.degree_histogram, other.degree_histogram),
            _least(self, other, "min_nodes"), _least(self, other, "min_edges"))
        return out

    def without(self, graphs: Iterable[Data]) -> "SplitFacts":
        """These facts with ``graphs`` (samples of this split, e.g. those with a non-finite target
        that a trial leaves out) taken back out: exact, as the moments are sums."""
        out = SplitFacts(self.ndata, self.nodes, self.edges, self.max_nodes, self.max_edges, self.nbytes,
                         {h: m.copy() for h, m in self.heads.items()},
                         {h: m.copy() for h, m in self.per_node.items()}, {}, self.x.copy() if self.x else None,
                         self.x_width, self.edge_width, self.has_z, list(self.degree_histogram),
                         self.min_nodes, self.min_edges)
        for g in graphs:
            out.ndata -= 1
            out.nodes -= g.num_nodes
            out.edges -= int(g.edge_index.shape[1])
            _count(out, g, -1)
        return out


@dataclass
class DatasetFacts:
    """The facts of every split of a dataset, and its head registry's JSON."""

    splits: dict[str, SplitFacts]
    heads_json: str = ""
    version: int = FACTS_VERSION

    def to_json(self) -> str:
        return json.dumps({"version": self.version, "heads": self.heads_json,
                           "splits": {s: _split_to_json(f) for s, f in self.splits.items()}}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DatasetFacts":
        data = json.loads(text)
        if int(data.get("version", 0)) != FACTS_VERSION:
            raise ValueError(f"dataset facts of version {data.get('version')}, not {FACTS_VERSION}")
        return cls({s: _split_from_json(f) for s, f in data["splits"].items()}, data["heads"], FACTS_VERSION)

    def merged(self, other: "DatasetFacts") -> "DatasetFacts":
        """These facts followed by ``other``'s (the next shard of a sharded dataset)."""
        names = list(self.splits) + [s for s in other.splits if s not in self.splits]
        return DatasetFacts({s: self.splits.get(s, SplitFacts()).merged(
            other.splits.get(s, SplitFacts()), self.splits.get(s, SplitFacts()).ndata) for s in names},
            self.heads_json or other.heads_json)


class FactsBuilder:
    """Accumulates :class:`DatasetFacts` graph by graph as a dataset is written."""

    def __init__(self, heads: HeadRegistry) -> None:
        self.heads = heads
        self.splits: dict[str, SplitFacts] = {}

    def open_split(self, split: str) -> None:
        """A split is written (its facts exist even when it stays empty)."""
        self.splits.setdefault(split, SplitFacts())

    def add(self, split: str, graph: Data, nbytes: int = 0) -> None:
        """One graph of ``split`` (in the order written), ``nbytes`` as stored."""
        facts = self.splits.setdefault(split, SplitFacts())
        index = facts.ndata
        facts.ndata += 1
        facts.nodes += graph.num_nodes
        edges = int(graph.edge_index.shape[1])
        facts.edges += edges
        facts.max_nodes = max(facts.max_nodes, int(graph.num_nodes))
        facts.max_edges = max(facts.max_edges, edges)
        facts.min_nodes = int(graph.num_nodes) if index == 0 else min(facts.min_nodes, int(graph.num_nodes))
        facts.min_edges = edges if index == 0 else min(facts.min_edges, edges)
        facts.nbytes += nbytes
        if facts.x is None:
            x = getattr(graph, "x", None)
            facts.x_width = int(x.shape[1]) if x is not None and x.dim() == 2 else -1
            edge_attr = getattr(graph, "edge_attr", None)
            facts.edge_width = int(edge_attr.shape[1]) if edge_attr is not None and edge_attr.dim() == 2 else 0
            facts.has_z = getattr(graph, "z", None) is not None
            facts.x = Moments(max(facts.x_width, 0))
            for h in self.heads:
                facts.heads[h.name] = Moments(h.dim)
                if h.level == "graph" and h.dim == 1:
                    facts.per_node[h.name] = Moments(1)
        for h in self.heads:
            y = getattr(graph, h.key, None)
            if y is None or not bool(torch.isfinite(y).all()):
                facts.nonfinite.setdefault(h.name, []).append(index)
        _count(facts, graph, 1)

    def finish(self) -> DatasetFacts:
        return DatasetFacts(dict(self.splits), self.heads.to_json())


def _count(facts: SplitFacts, graph: Data, sign: int) -> None:
    """Add (or take back) one graph's targets, x columns and in-degrees."""
    n = int(graph.num_nodes)
    for name, moments in facts.heads.items():
        y = getattr(graph, TARGET_PREFIX + name, None)
        if y is None or not bool(torch.isfinite(y).all()):
            continue  # listed in nonfinite when added
        values = y.detach().cpu().numpy()
        moments.add(values, sign)
        if name in facts.per_node:
            facts.per_node[name].add(values / max(n, 1), sign)
    x = getattr(graph, "x", None)
    if facts.x is not None and x is not None and x.dim() == 2 and facts.x.dim:
        facts.x.add(x.detach().cpu().numpy(), sign)
    degrees = np.bincount(np.bincount(graph.edge_index[1].cpu().numpy(), minlength=n))
    hist = facts.degree_histogram
    if len(hist) < len(degrees):
        hist.extend([0] * (len(degrees) - len(hist)))
    for d, c in enumerate(degrees.tolist()):
        hist[d] += sign * c


def _least(a: SplitFacts, b: SplitFacts, name: str) -> int:
    """The smaller of two splits' minimum (an empty split has none)."""
    values = [getattr(f, name) for f in (a, b) if f.ndata]
    return min(values) if values else 0


def _merge(a: dict[str, Moments], b: dict[str, Moments]) -> dict[str, Moments]:
    return {k: (a[k].merged(b[k]) if k in a and k in b else (a.get(k) or b[k]).copy()) for k in {*a, *b}}


def _add_lists(a: list[int], b: list[int]) -> list[int]:
    out = list(a) + [0] * max(0, len(b) - len(a))
    for i, v in enumerate(b):
        out[i] += v
    return out


def _split_to_json(f: SplitFacts) -> dict:
    return {"ndata": f.ndata, "nodes": f.nodes, "edges": f.edges, "max_nodes": f.max_nodes,
            "max_edges": f.max_edges, "nbytes": f.nbytes, "min_nodes": f.min_nodes, "min_edges": f.min_edges,
            "heads": {h: m.to_json() for h, m in f.heads.items()},
            "per_node": {h: m.to_json() for h, m in f.per_node.items()}, "nonfinite": f.nonfinite,
            "x": f.x.to_json() if f.x is not None else None, "x_width": f.x_width, "edge_width": f.edge_width,
            "has_z": f.has_z, "degree_histogram": f.degree_histogram}


def _split_from_json(d: dict) -> SplitFacts:
    return SplitFacts(int(d["ndata"]), int(d["nodes"]), int(d["edges"]), int(d["max_nodes"]), int(d["max_edges"]),
                      int(d["nbytes"]), {h: Moments.from_json(m) for h, m in d["heads"].items()},
                      {h: Moments.from_json(m) for h, m in d["per_node"].items()},
                      {h: [int(i) for i in v] for h, v in d["nonfinite"].items()},
                      Moments.from_json(d["x"]) if d["x"] is not None else None, int(d["x_width"]),
                      int(d["edge_width"]), bool(d["has_z"]), [int(c) for c in d["degree_histogram"]],
                      int(d["min_nodes"]), int(d["min_edges"]))
