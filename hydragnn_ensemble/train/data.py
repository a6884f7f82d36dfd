"""The trial's data: splits from the dataset, checks before training, statistics, what is read.

:func:`prepare_data` reads no sample to check or summarise the dataset: the facts computed when
the dataset was written (:mod:`graph_builders.store.facts`: target moments, the samples with
non-finite targets, input moments and widths, the PNA degree histogram) give the normalisation,
the input scaling and the checks, so a trial's start-up does not grow with the dataset. Only
samples a trial leaves out (non-finite targets, ``skip_nan_targets``) are read, to take them back
out of the facts. Then each split is either preloaded (read once in blocks, slimmed to the fields
the model and loss read) or streamed (:class:`StreamedSplit`: read batch by batch, memory bounded).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset
from torch_geometric.data import Batch, Data

from graph_builders.schema import HeadRegistry
from graph_builders.store.facts import DatasetFacts, FactsBuilder, Moments
from hydragnn_ensemble.model.edges import sort_edges_by_target
from hydragnn_ensemble.train.batches import EpochBatches, InMemorySplit, SplitView, streamed_chunk, window_graphs
from hydragnn_ensemble.train.normalisation import MIN_STD, HeadStats, Normaliser

SPLITS: tuple[str, ...] = ("trainset", "valset", "testset")
GEOMETRY_KEYS: tuple[str, ...] = ("cell", "pbc", "edge_shift")
MAX_LISTED = 20


class DataError(ValueError):
    """The dataset cannot be trained on (missing/empty split, NaN targets, wrong shapes)."""


class GraphSource(Protocol):
    """What the trainer reads from a dataset (:class:`StoreSource` for a dataset file or a sharded
    dataset, :class:`InMemoryGraphs` for lists of graphs)."""

    heads: HeadRegistry
    split_names: list[str]

    def num_graphs(self, split: str) -> int: ...
    def keys(self, split: str) -> list[str]: ...
    def dataset(self, split: str) -> Dataset: ...
    def facts(self) -> DatasetFacts: ...
    def read_range(self, split: str, start: int, stop: int, keys: list[str] | None = None) -> list[Data]: ...
    def sizes(self, split: str, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass
class InMemoryGraphs:
    """A :class:`GraphSource` over lists of graphs (for library use without a dataset file)."""

    heads: HeadRegistry
    splits: dict[str, list[Data]]
    metadata: dict = field(default_factory=dict)
    in_memory = True  # never streamed: the graphs are in memory already
    _facts: DatasetFacts | None = field(default=None, init=False, repr=False)

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    def num_graphs(self, split: str) -> int:
        return len(self.splits[split])

    def dataset(self, split: str) -> Sequence[Data]:
        return self.splits[split]

    def keys(self, split: str) -> list[str]:
        graphs = self.splits[split]
        return list(graphs[0].keys()) if graphs else []

    def facts(self) -> DatasetFacts:
        """Computed on first use (the graphs are in memory already)."""
        if self._facts is None:
            builder = FactsBuilder(self.heads)
            for split, graphs in self.splits.items():
                builder.open_split(split)
                for g in graphs:
                    builder.add(split, g)
            self._facts = builder.finish()
        return self._facts

    def read_range(self, split: str, start: int, stop: int, keys: list[str] | None = None) -> list[Data]:
        return self.splits[split][start:stop]

    def sizes(self, split: str, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        graphs = self.splits[split][start:stop]
        return (np.array([g.num_nodes for g in graphs], dtype=np.int64),
                np.array([g.edge_index.shape[1] for g in graphs], dtype=np.int64))

    def close(self) -> None:
        """Nothing to release."""


class StoreSource:
    """A dataset file or sharded dataset as a :class:`GraphSource`: heads, metadata, split sizes
    and facts from the open store; graphs read by contiguous ranges; each split as a lazy dataset
    that opens the file per process (DataLoader workers)."""

    def __init__(self, path: Path) -> None:
        from graph_builders.store import open_dataset

        self.path = path
        self.store = open_dataset(path)
        self.heads: HeadRegistry = self.store.heads
        self.metadata: dict = self.store.metadata
        self.split_names: list[str] = self.store.split_names

    def num_graphs(self, split: str) -> int:
        return self.store.num_graphs(split)

    def keys(self, split: str) -> list[str]:
        return self.store.keys(split)

    def dataset(self, split: str) -> Dataset:
        from graph_builders.store import AdiosGraphDataset

        return AdiosGraphDataset(self.path, split)

    def facts(self) -> DatasetFacts:
        """Stored, cached beside the dataset, or computed once by a scan; checked against the file."""
        from graph_builders.store import dataset_facts

        return dataset_facts(self.store)

    def read_range(self, split: str, start: int, stop: int, keys: list[str] | None = None) -> list[Data]:
        return self.store.read_range(split, start, stop, keys)

    def read_block(self, split: str, start: int, stop: int, keys: list[str] | None = None):
        """Graphs ``[start, stop)`` as a :class:`graph_builders.store.GraphBlock`."""
        return self.store.read_block(split, start, stop, keys)

    def sizes(self, split: str, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        return self.store.graph_sizes(split, start, stop)

    def close(self) -> None:
        self.store.close()


def open_source(data: str | os.PathLike | GraphSource) -> GraphSource:
    """A path opens the dataset (a ``.bp`` file or a sharded dataset); anything else is used as it is."""
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.exists():
            raise DataError(f"{path}: dataset file does not exist")
        return StoreSource(path)
    return data


@dataclass(frozen=True)
class FieldSelection:
    """Which fields of a graph the model and loss need."""

    target_keys: tuple[str, ...]
    x_columns: tuple[int, ...] | None  # None: all columns
    edge_attr: bool
    geometry: bool

    def keys_to_read(self, available: Sequence[str]) -> list[str]:
        """The fields :meth:`slim` keeps, of those a split has."""
        wanted = {"x", "pos", "edge_index", "z", *self.target_keys}
        if self.edge_attr:
            wanted.add("edge_attr")
        if self.geometry:
            wanted.update(GEOMETRY_KEYS)
        return [k for k in available if k in wanted]

    def slim(self, d: Data) -> Data:
        """A new ``Data`` with only the selected fields (x columns selected), edges in the order of
        their target node."""
        out = Data()
        x = d.x
        if self.x_columns is not None:
            x = x[:, list(self.x_columns)]
        out.x = x
        out.pos = d.pos
        out.edge_index = d.edge_index
        z = getattr(d, "z", None)
        if z is not None:
            out.z = z
        if self.edge_attr and getattr(d, "edge_attr", None) is not None:
            out.edge_attr = d.edge_attr
        if self.geometry:
            for key in GEOMETRY_KEYS:
                value = getattr(d, key, None)
                if value is not None:
                    out[key] = value
        for key in self.target_keys:
            out[key] = d[key]
        return sort_edges_by_target(out)  # the model's sparse operators then need no sort per batch


def standardise_x(x: torch.Tensor, stats: HeadStats) -> torch.Tensor:
    """``(x - mean) / std`` per column (the model's input scaling, fitted on the training split)."""
    return (x - stats.mean.to(x.device, x.dtype)) / stats.std.to(x.device, x.dtype)


class StreamedSplit:
    """A split read from the dataset as it is needed (only the fields the model and loss read),
    collated without a ``Data`` object per graph (:func:`collate_blocks`); only ``kept`` graphs
    (positions in the split) when some are left out.

    With ``window`` set (:meth:`keep_windows`; one process of a trial), the window of ``window``
    graphs holding a batch is read at once (one block read per field) and kept for the batches
    that follow; memory holds one window. Without (a data-parallel process), each batch's runs are
    read as they come: one block read per run and field, memory holds one batch.
    """

    def __init__(self, source: GraphSource, split: str, fields: FieldSelection, x_stats: HeadStats,
                 kept: np.ndarray | None = None) -> None:
        self.source, self.split, self.fields, self.x_stats = source, split, fields, x_stats
        self.kept = kept
        self.keys = fields.keys_to_read(source.keys(split))
        self.window = 0
        self._kept_window: tuple[int, object] | None = None  # (first position, its GraphBlock)

    def __len__(self) -> int:
        return len(self.kept) if self.kept is not None else self.source.num_graphs(self.split)

    @property
    def bytes_per_graph(self) -> float:
        """Stored bytes per graph of the split (its facts), what sizes a window."""
        facts = self.source.facts().splits[self.split]
        return facts.nbytes / max(1, facts.ndata)

    def keep_windows(self, window: int) -> None:
        """Read windows of ``window`` graphs and keep the last one (0: read each batch's runs)."""
        self.window, self._kept_window = max(0, int(window)), None

    def _ranges(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The dataset's ranges holding positions ``[start, stop)`` (contiguous runs of ``kept``)."""
        if self.kept is None:
            return [(start, stop)]
        idx = self.kept[start:stop]
        breaks = np.flatnonzero(np.diff(idx) != 1) + 1
        return [(int(r[0]), int(r[-1]) + 1) for r in np.split(idx, breaks) if len(r)]

    def costs(self, start: int, stop: int) -> np.ndarray:
        parts = [self.source.sizes(self.split, a, b) for a, b in self._ranges(start, stop)]
        return np.concatenate([n + e for n, e in parts]) if parts else np.zeros(0, dtype=np.int64)

    def batch(self, runs) -> Batch:
        if self.window:
            blocks = [piece for a, b in runs for piece in self._from_windows(a, b)]
        else:
            blocks = [self.read(a, b) for a, b in runs]
        return collate_blocks(blocks, self.fields, self.x_stats)

    def read(self, start: int, stop: int):
        """Positions ``[start, stop)`` as one :class:`graph_builders.store.GraphBlock`."""
        from graph_builders.store import GraphBlock

        return GraphBlock.concat([self.source.read_block(self.split, a, b, self.keys)
                                  for a, b in self._ranges(start, stop)])

    def _from_windows(self, start: int, stop: int) -> list:
        """Positions ``[start, stop)`` as slices of the windows holding them (read when not kept)."""
        pieces = []
        while start < stop:
            first = start - start % self.window
            if self._kept_window is None or self._kept_window[0] != first:
                self._kept_window = None  # the old window goes before the new one is read
                self._kept_window = (first, self.read(first, min(len(self), first + self.window)))
            end = min(stop, first + self.window)
            pieces.append(self._kept_window[1].slice(start - first, end - first))
            start = end
        return pieces

    def graphs(self, start: int, stop: int) -> list[Data]:
        """Graphs ``[start, stop)``, slimmed and standardised (one ``Data`` each)."""
        out = []
        for a, b in self._ranges(start, stop):
            for d in self.source.read_range(self.split, a, b, self.keys):
                d = self.fields.slim(d)
                d.x = standardise_x(d.x, self.x_stats)
                out.append(d)
        return out

    def whole(self):
        """Every kept graph of the split as one block (the preload), read in blocks."""
        from graph_builders.store import GraphBlock

        n = len(self)
        return GraphBlock.concat([self.read(lo, min(n, lo + _READ_BLOCK)) for lo in range(0, n, _READ_BLOCK)])


class BlockSplit:
    """A split held in memory as one block of arrays (preloaded from a dataset file: no ``Data``
    per graph), batched like a streamed one (:func:`collate_blocks`) without reading."""

    def __init__(self, view: StreamedSplit) -> None:
        self.fields, self.x_stats = view.fields, view.x_stats
        self.block = view.whole()
        self._costs = self.block.counts["pos"] + self.block.counts["edge_index"]

    def __len__(self) -> int:
        return len(self.block)

    def costs(self, start: int, stop: int) -> np.ndarray:
        return self._costs[start:stop]

    def batch(self, runs) -> Batch:
        return collate_blocks([self.block.slice(a, b) for a, b in runs], self.fields, self.x_stats)


#: per-edge keys a batch permutes when it puts its edges in target order
EDGE_KEYS: tuple[str, ...] = ("edge_attr", "edge_shift")


def collate_blocks(blocks: list, fields: FieldSelection, x_stats: HeadStats) -> Batch:
    """The graphs of ``blocks`` (:class:`graph_builders.store.GraphBlock`) as one PyG batch with
    the fields :meth:`FieldSelection.slim` keeps, ``x`` standardised: the blocks' concatenated
    arrays offset and stacked as they are, no ``Data`` per graph (what ``Batch.from_data_list`` of
    the slimmed graphs gives, at a fraction of its cost for small graphs). The blocks' arrays are
    never written to (they may be a kept window's)."""
    from graph_builders.store import GraphBlock

    block = GraphBlock.concat(list(blocks))
    nodes, edges = block.counts["pos"], block.counts["edge_index"]
    first_node = np.cumsum(nodes) - nodes
    edge_index = block.arrays["edge_index"].astype(np.int64)  # a copy: offsets added in place
    edge_index += np.repeat(first_node, edges)
    values = block.tensors()
    target = edge_index[1]
    if len(target) > 1 and bool((target[1:] < target[:-1]).any()):  # edges of a graph not in target order
        order = np.argsort(target, kind="stable")
        edge_index = edge_index[:, order]
        for key in EDGE_KEYS:
            if key in values:
                values[key] = values[key][torch.from_numpy(order)]
    values["edge_index"] = torch.from_numpy(edge_index)
    x = values["x"]
    if fields.x_columns is not None:
        x = x[:, list(fields.x_columns)]
    values["x"] = standardise_x(x, x_stats)
    return assembled_batch(values, nodes)


#: the class ``Batch.from_data_list`` of ``Data`` objects returns; built once (PyG's ``Batch(...)``
#: resolves it anew on every call, a tenth of a millisecond per batch)
_DATA_BATCH = type(Batch())


def assembled_batch(values: dict[str, torch.Tensor], nodes: np.ndarray) -> Batch:
    """The PyG ``Batch`` of graphs whose fields are already concatenated (``values``, ``edge_index``
    offset) and whose node counts are ``nodes``: ``batch`` and ``ptr`` added, built without
    ``Batch(...)``'s per-call class set-up."""
    values["batch"] = torch.from_numpy(np.repeat(np.arange(len(nodes)), nodes))
    values["ptr"] = torch.from_numpy(np.concatenate(([0], np.cumsum(nodes))))
    return type.__call__(_DATA_BATCH, **values)


@dataclass
class PreparedData:
    """Everything the trainer needs from the dataset, checked."""

    heads: HeadRegistry  # the predicted heads, in config order
    splits: dict[str, SplitView]
    normaliser: Normaliser
    x_stats: HeadStats  # per selected column of x, training split
    node_feature_dim: int  # width of the dataset's x (before column selection)
    edge_dim: int
    has_atomic_numbers: bool
    degree_histogram: list[int] | None
    skipped: dict[str, list[int]]
    metadata: dict = field(default_factory=dict)
    #: graph heads of dim 1 divided by each graph's node count, training split (a total energy's
    #: statistics per atom, which potential mode's energy scale is fitted on)
    per_node_stats: dict[str, HeadStats] = field(default_factory=dict)
    streamed: bool = False  # the splits are read batch by batch (not preloaded)

    def num_graphs(self, split: str) -> int:
        return len(self.splits[split])


def epoch_batches(data: PreparedData, batch_size: int, rank: int = 0, world_size: int = 1, seed: int = 0,
                  balance: str = "cost") -> EpochBatches:
    """This process's training batches of every epoch (:mod:`hydragnn_ensemble.train.batches`).
    Streamed splits are planned in chunks and windows; one process reads and keeps whole windows,
    each of N processes reads only its shares' runs."""
    if not data.streamed:
        return EpochBatches(data.splits["trainset"], batch_size, rank, world_size, seed, balance=balance)
    for view in data.splits.values():
        view.keep_windows(window_graphs(view.bytes_per_graph, batch_size) if world_size == 1 else 0)
    train = data.splits["trainset"]
    return EpochBatches(train, batch_size, rank, world_size, seed, chunk=streamed_chunk(batch_size),
                        balance=balance, window=window_graphs(train.bytes_per_graph, batch_size))


def _describe(bad: list[tuple[str, int, str]]) -> str:
    shown = "; ".join(f"{s}[{i}]: {why}" for s, i, why in bad[:MAX_LISTED])
    more = f" (and {len(bad) - MAX_LISTED} more)" if len(bad) > MAX_LISTED else ""
    return shown + more


def prepare_data(
    source: GraphSource,
    heads: HeadRegistry,
    fields: FieldSelection,
    *,
    where: str,
    skip_nan_targets: bool = False,
    preload: bool | str = "auto",
    degree_histogram: bool = False,
) -> PreparedData:
    """Check and summarise ``source`` for training ``heads`` from its facts (see the module
    docstring).

    ``where`` names the dataset in error messages. NaN/inf targets raise :class:`DataError`
    listing ``split[index]`` of each bad sample unless ``skip_nan_targets``. ``preload``: True,
    False or "auto" (preload at most :data:`PRELOAD_AUTO_BYTES` of data).
    """
    _check_splits(source, where)
    facts = source.facts()
    skipped = _left_out(facts, heads, where, skip_nan_targets)
    train = facts.splits["trainset"]
    if skipped.get("trainset"):
        train = train.without(g for i in skipped["trainset"] for g in source.read_range("trainset", i, i + 1))
    for split in SPLITS:
        if facts.splits[split].ndata - len(skipped.get(split, ())) == 0:
            raise DataError(f"{where}: split {split!r} has no usable graphs after skipping NaN targets")
    x_moments = train.x
    if train.x_width < 0 or x_moments is None:
        raise DataError(f"{where}: the graphs have no node features x")
    x_stats = _head_stats(x_moments, fields.x_columns)
    stream = _streams(preload, facts) and not getattr(source, "in_memory", False)
    splits: dict[str, SplitView] = {}
    for split in SPLITS:
        n = source.num_graphs(split)
        kept = np.setdiff1d(np.arange(n), skipped[split]) if skipped.get(split) else None
        if getattr(source, "in_memory", False):
            splits[split] = InMemorySplit(_slimmed(source, split, fields, x_stats, kept))
        else:
            view = StreamedSplit(source, split, fields, x_stats, kept)
            splits[split] = view if stream else BlockSplit(view)
    return PreparedData(
        heads=heads, splits=splits,
        normaliser=Normaliser({h.name: _head_stats(train.heads[h.name]) for h in heads}), x_stats=x_stats,
        node_feature_dim=train.x_width, edge_dim=train.edge_width, has_atomic_numbers=train.has_z,
        degree_histogram=list(train.degree_histogram) if degree_histogram else None,
        skipped={s: v for s, v in skipped.items() if v}, metadata=dict(getattr(source, "metadata", None) or {}),
        per_node_stats={name: _head_stats(m) for name, m in train.per_node.items() if name in heads.names},
        streamed=stream,
    )


#: ``preload: auto`` preloads a dataset of at most this many stored bytes (its three splits)
PRELOAD_AUTO_BYTES = 256 * 2**20
_READ_BLOCK = 512  # graphs per block read when preloading


def _streams(preload: bool | str, facts: DatasetFacts) -> bool:
    if preload == "auto":
        return sum(facts.splits[s].nbytes for s in SPLITS) > PRELOAD_AUTO_BYTES
    return not preload


def _slimmed(source: GraphSource, split: str, fields: FieldSelection, x_stats: HeadStats,
             kept: np.ndarray | None) -> list[Data]:
    """The kept graphs of an in-memory source, slimmed and standardised once."""
    graphs = source.dataset(split)
    out = []
    for i in (range(len(graphs)) if kept is None else kept.tolist()):
        d = fields.slim(graphs[i])
        d.x = standardise_x(d.x, x_stats)
        out.append(d)
    return out


def _head_stats(moments: Moments, columns: Sequence[int] | None = None) -> HeadStats:
    """Mean and std (a constant column: std 1) of ``moments``' columns (all, or ``columns``)."""
    if moments.count == 0:
        raise DataError("cannot fit normalisation on zero samples")
    cols = list(columns) if columns is not None else list(range(moments.dim))
    mean, std = moments.mean[cols], moments.std[cols]
    std = np.where(std < MIN_STD, 1.0, std)
    return HeadStats(torch.tensor(mean, dtype=torch.float32), torch.tensor(std, dtype=torch.float32))


def _left_out(facts: DatasetFacts, heads: HeadRegistry, where: str, skip_nan_targets: bool) -> dict[str, list[int]]:
    """Per split, the samples with a non-finite target of one of ``heads`` (sorted); DataError
    listing them unless ``skip_nan_targets``."""
    out: dict[str, list[int]] = {}
    bad: list[tuple[str, int, str]] = []
    for split in SPLITS:
        first_bad: dict[int, str] = {}
        for h in heads:
            for i in facts.splits[split].nonfinite.get(h.name, ()):
                first_bad.setdefault(i, h.key)
        out[split] = sorted(first_bad)
        bad += [(split, i, f"{first_bad[i]} has NaN/inf") for i in out[split]]
    if bad and not skip_nan_targets:
        raise DataError(f"{where}: {len(bad)} sample(s) have NaN/inf targets: {_describe(bad)} "
                        "(set NeuralNetwork.Training.skip_nan_targets to leave them out)")
    return out


def _check_splits(source: GraphSource, where: str) -> None:
    names = list(getattr(source, "split_names", SPLITS))
    missing = [s for s in SPLITS if s not in names]
    if missing:
        raise DataError(f"{where}: split(s) {missing} missing; the file has {names}")
    for split in SPLITS:
        if source.num_graphs(split) == 0:
            raise DataError(f"{where}: split {split!r} is empty; training needs graphs in "
                            f"{', '.join(SPLITS)}")
