"""Datasets of many ``.bp`` shards: written in parallel and in bounded memory, read as one.

A sharded dataset is a directory holding ``shards.json`` (:class:`ShardIndex`) and the shards, each
a complete dataset file in HydraGNN's layout (its own trainset/valset/testset, its own facts), so
HydraGNN reads each one with its own loader, as its multi-dataset loader does. Split ``s`` of the
dataset is split ``s`` of every shard, in the order of the index.

Writing (:class:`ShardWriter`): graphs arrive one at a time with their split and are written as a
shard every ``shard_size`` graphs, so memory holds one shard at most; several writers (MPI ranks)
write their own shards side by side and one index lists them all (:func:`write_index`). Appending
adds shards and replaces the index; shards the index does not list are not part of the dataset.

Reading (:class:`ShardedStore`): the API of :class:`~graph_builders.store.GraphStore` over all
shards; a shard is opened when first read. At open, every shard listed must be there with the
content it was indexed with (:func:`graph_builders.store.facts_cache.fingerprint`), and every
shard has the index's head registry and layout: a missing, changed or foreign shard is named.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry
import graph_builders.store._layout as L
from graph_builders.store.errors import DatasetNotFoundError, SampleIndexError, StoreError
from graph_builders.store.facts import DatasetFacts
from graph_builders.store.facts_cache import fingerprint
from graph_builders.store.reader import GraphBlock, GraphStore

INDEX_NAME = L.SHARD_INDEX_NAME
INDEX_FORMAT = L.SHARD_INDEX_FORMAT
MAX_OPEN_SHARDS = 16  # shards kept open at once per process (least recently used closed first)


@dataclass(frozen=True)
class ShardEntry:
    """One shard: its directory name, graphs per split and content key."""

    path: str
    ndata: dict[str, int]
    fingerprint: str


@dataclass
class ShardIndex:
    """``shards.json``: the shards in order, and what they all share."""

    heads_json: str
    layout: str
    metadata: dict = field(default_factory=dict)
    shards: list[ShardEntry] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"format": INDEX_FORMAT, "heads": self.heads_json, "layout": self.layout,
                           "metadata": self.metadata,
                           "shards": [{"path": s.path, "ndata": s.ndata, "fingerprint": s.fingerprint}
                                      for s in self.shards]}, indent=1, sort_keys=True)

    @classmethod
    def read(cls, root: Path) -> "ShardIndex":
        path = root / INDEX_NAME
        try:
            data = json.loads(path.read_text())
            if data.get("format") != INDEX_FORMAT:
                raise ValueError(f"format {data.get('format')!r} is not {INDEX_FORMAT!r}")
            shards = [ShardEntry(str(s["path"]), {k: int(v) for k, v in s["ndata"].items()}, str(s["fingerprint"]))
                      for s in data["shards"]]
            return cls(str(data["heads"]), str(data["layout"]), dict(data["metadata"]), shards)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"{path}: not a shard index ({exc})") from None


def is_sharded(path: str | os.PathLike) -> bool:
    return (Path(path) / INDEX_NAME).is_file()


def open_dataset(path: str | os.PathLike) -> "GraphStore | ShardedStore":
    """A dataset file (``.bp``) or a sharded dataset directory, opened for reading."""
    return ShardedStore(path) if is_sharded(path) else GraphStore(path)


def entry_of(shard: Path) -> ShardEntry:
    """The index entry of a written shard (graphs per split, content key)."""
    with GraphStore(shard) as store:
        ndata = {s: store.num_graphs(s) for s in store.split_names}
    return ShardEntry(shard.name, ndata, fingerprint(shard))


def write_index(root: Path, heads: HeadRegistry, layout: str, metadata: Mapping, shards: Sequence[ShardEntry]) -> Path:
    """Write ``root/shards.json`` atomically, listing ``shards`` in order; every shard's heads and
    layout must be the index's (StoreError naming the shard otherwise)."""
    for entry in shards:
        with GraphStore(root / entry.path) as store:
            if store.heads != heads or store.layout != layout:
                raise StoreError(f"{root / entry.path}: shard of another schema (heads {store.heads.names}, "
                                 f"layout {store.layout}) than the dataset's ({heads.names}, {layout})")
    index = ShardIndex(heads.to_json(), layout, dict(metadata), list(shards))
    path = root / INDEX_NAME
    tmp = path.with_name(f"{INDEX_NAME}.tmp{os.getpid()}")
    tmp.write_text(index.to_json())
    os.replace(tmp, path)
    return path


class ShardedStore:
    """A sharded dataset read as one (see the module docstring)."""

    sharded = True

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise DatasetNotFoundError(f"{self.path}: no such dataset")
        self.index = ShardIndex.read(self.path)
        self.heads = HeadRegistry.from_json(self.index.heads_json)
        self.metadata = dict(self.index.metadata)
        self.layout = self.index.layout
        self.normalisation = None
        if not self.index.shards:
            raise StoreError(f"{self.path}: the shard index lists no shards")
        for entry in self.index.shards:
            shard = self.path / entry.path
            if not (shard / L.BP_INDEX_FILE).is_file():
                raise StoreError(f"{self.path}: shard {entry.path} is missing (listed in {INDEX_NAME})")
            if fingerprint(shard) != entry.fingerprint:
                raise StoreError(f"{self.path}: shard {entry.path} is not the one indexed (its files changed, "
                                 "or it was replaced by a foreign shard)")
        names = []
        for entry in self.index.shards:
            names += [s for s in entry.ndata if s not in names]
        self.split_names = [s for s in L.SPLIT_NAMES if s in names] + [s for s in names if s not in L.SPLIT_NAMES]
        self._starts = {s: np.cumsum([0] + [e.ndata.get(s, 0) for e in self.index.shards]) for s in self.split_names}
        self._open: dict[int, GraphStore] = {}
        self._facts: DatasetFacts | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        for store in self._open.values():
            store.close()
        self._open.clear()

    def __enter__(self) -> "ShardedStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={self.num_graphs(s)}" for s in self.split_names)
        return f"ShardedStore({str(self.path)!r}: {len(self.index.shards)} shards, {sizes}; heads {self.heads.names})"

    # -- queries ---------------------------------------------------------------------------------
    def num_graphs(self, split: str) -> int:
        self._check_split(split)
        return int(self._starts[split][-1])

    def keys(self, split: str) -> list[str]:
        k = self._first_with(split)
        return self._shard(k).keys(split) if k is not None else []

    def sizes(self, split: str, key: str) -> np.ndarray:
        parts = [self._shard(k).sizes(split, key) for k in self._shards_of(split)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def graph_sizes(self, split: str, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes and edges of each graph ``[start, stop)`` of ``split`` (reads only sizes)."""
        parts = [self._shard(k).graph_sizes(split, a, b) for k, a, b in self._pieces(split, start, stop)]
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def total_rows(self, split: str, key: str) -> int:
        return sum(self._shard(k).total_rows(split, key) for k in self._shards_of(split))

    def source_indices(self, split: str) -> np.ndarray | None:
        """Each graph's position in its shard's input (the shard's own numbering)."""
        parts = [self._shard(k).source_indices(split) for k in self._shards_of(split)]
        return None if any(p is None for p in parts) else (np.concatenate(parts) if parts else np.zeros(0, np.int64))

    @property
    def facts(self) -> DatasetFacts:
        """The shards' facts merged in index order (each checked against its shard)."""
        if self._facts is None:
            from graph_builders.store.facts_cache import dataset_facts

            merged: DatasetFacts | None = None
            for k in range(len(self.index.shards)):
                facts = dataset_facts(self._shard(k))
                merged = facts if merged is None else merged.merged(facts)
            self._facts = merged
        return self._facts

    def get(self, split: str, index: int) -> Data:
        n = self.num_graphs(split)
        if not -n <= index < n:
            raise SampleIndexError(f"{self.path}: index {index} is out of range for {split!r} with {n} graphs")
        index = int(index) % n
        return self.read_block(split, index, index + 1).graphs()[0]

    def read_range(self, split: str, start: int, stop: int, keys: list[str] | None = None) -> list[Data]:
        return self.read_block(split, start, stop, keys).graphs()

    def read_block(self, split: str, start: int, stop: int, keys: list[str] | None = None) -> GraphBlock:
        """Graphs ``[start, stop)`` of ``split`` across shards: one block read per shard touched."""
        n = self.num_graphs(split)
        if not 0 <= start <= stop <= n:
            raise SampleIndexError(f"{self.path}: range [{start}, {stop}) is not inside {split!r} with {n} graphs")
        blocks = [self._shard(k).read_block(split, a, b, keys) for k, a, b in self._pieces(split, start, stop)]
        if not blocks:
            return self._shard(self._first_with(split) or 0).read_block(split, 0, 0, keys)
        return GraphBlock.concat(blocks)

    # -- internals -------------------------------------------------------------------------------
    def _check_split(self, split: str) -> None:
        if split not in self._starts:
            raise StoreError(f"{self.path}: unknown split {split!r}; this dataset has {self.split_names}")

    def _pieces(self, split: str, start: int, stop: int) -> list[tuple[int, int, int]]:
        """``(shard, local start, local stop)`` of the shards that graphs ``[start, stop)`` span."""
        starts = self._starts[split]
        out = []
        k = bisect.bisect_right(starts, start) - 1
        while start < stop:
            local_stop = min(stop, int(starts[k + 1]))
            if local_stop > start:
                out.append((k, start - int(starts[k]), local_stop - int(starts[k])))
            start = local_stop
            k += 1
        return out

    def _shards_of(self, split: str) -> list[int]:
        return [k for k, e in enumerate(self.index.shards) if e.ndata.get(split, 0)]

    def _first_with(self, split: str) -> int | None:
        return next(iter(self._shards_of(split)), None)

    def _shard(self, k: int) -> GraphStore:
        store = self._open.pop(k, None)
        if store is None:
            entry = self.index.shards[k]
            store = GraphStore(self.path / entry.path)
            if store.heads != self.heads or store.layout != self.layout:
                store.close()
                raise StoreError(f"{self.path}: shard {entry.path} has another schema than the dataset "
                                 f"(heads {store.heads.names}, layout {store.layout})")
        self._open[k] = store  # most recently used last
        if len(self._open) > MAX_OPEN_SHARDS:
            oldest = next(iter(self._open))
            self._open.pop(oldest).close()
        return store


@dataclass
class ShardWriter:
    """Writes graphs as shards of at most ``shard_size`` graphs into ``root`` (see the module
    docstring); :meth:`finish` returns the entries of the shards it wrote, in order."""

    root: Path
    heads: HeadRegistry
    shard_size: int
    prefix: str = "shard"
    metadata: Mapping = field(default_factory=dict)
    layout: str = "hydragnn"
    seed: int = 0  # each shard's splits are stored in random order (contiguous runs are random samples)
    _graphs: list[Data] = field(default_factory=list)
    _splits: list[str] = field(default_factory=list)
    _written: list[ShardEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.shard_size < 1:
            raise StoreError(f"shard size must be >= 1, got {self.shard_size}")
        self.root.mkdir(parents=True, exist_ok=True)

    def add(self, graph: Data, split: str) -> None:
        self._graphs.append(graph)
        self._splits.append(split)
        if len(self._graphs) >= self.shard_size:
            self.flush()

    def flush(self) -> None:
        """Write the graphs held as one shard (nothing when none are held)."""
        if not self._graphs:
            return
        from graph_builders.store.writer import write_dataset

        rng = np.random.default_rng((self.seed, len(self._written)))
        splits = {s: rng.permutation([i for i, t in enumerate(self._splits) if t == s]).tolist() for s in L.SPLIT_NAMES}
        splits = {s: v for s, v in splits.items() if v or s != L.CALIBRATION_SPLIT}
        name = f"{self.prefix}-{len(self._written):05d}.bp"
        write_dataset(self.root / name, self._graphs, self.heads, splits=splits, metadata=self.metadata,
                      layout=self.layout)
        self._written.append(entry_of(self.root / name))
        self._graphs, self._splits = [], []

    def finish(self) -> list[ShardEntry]:
        self.flush()
        return list(self._written)

