"""The trial's data: splits from the dataset file, checks before training, statistics, loaders.

:func:`prepare_data` reads every sample once: it checks the targets of the predicted heads (shape
and finiteness; NaN samples are listed, or skipped on request), fits the normalisation on the
training split, collects the input widths and (for PNA) the in-degree histogram, and keeps a slim
copy of each graph with only the fields the model and the loss read (optionally in memory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Protocol, Sequence

import torch
from torch.utils.data import Dataset, Sampler
from torch_geometric.data import Data

from graph_builders.schema import TARGET_PREFIX, HeadRegistry
from hydragnn_ensemble.model.edges import sort_edges_by_target
from hydragnn_ensemble.train.normalisation import HeadStats, Normaliser, NormaliserFit, RunningMoments

SPLITS: tuple[str, ...] = ("trainset", "valset", "testset")
GEOMETRY_KEYS: tuple[str, ...] = ("cell", "pbc", "edge_shift")
MAX_LISTED = 20


class DataError(ValueError):
    """The dataset cannot be trained on (missing/empty split, NaN targets, wrong shapes)."""


class GraphSource(Protocol):
    """What the trainer reads from a dataset (:class:`StoreSource` for a dataset file,
    :class:`InMemoryGraphs` for lists of graphs)."""

    heads: HeadRegistry

    def num_graphs(self, split: str) -> int: ...
    def dataset(self, split: str) -> Dataset: ...


@dataclass
class InMemoryGraphs:
    """A :class:`GraphSource` over lists of graphs (for library use without a dataset file)."""

    heads: HeadRegistry
    splits: dict[str, list[Data]]
    metadata: dict = field(default_factory=dict)

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    def num_graphs(self, split: str) -> int:
        return len(self.splits[split])

    def dataset(self, split: str) -> Sequence[Data]:
        return self.splits[split]

    def close(self) -> None:
        """Nothing to release."""


class StoreSource:
    """A dataset file as a :class:`GraphSource`: heads, metadata and split sizes from the open
    store; each split as a lazy dataset that opens the file per process (DataLoader workers)."""

    def __init__(self, path: Path) -> None:
        from graph_builders.store import GraphStore

        self.path = path
        self.store = GraphStore(path)
        self.heads: HeadRegistry = self.store.heads
        self.metadata: dict = self.store.metadata
        self.split_names: list[str] = self.store.split_names

    def num_graphs(self, split: str) -> int:
        return self.store.num_graphs(split)

    def dataset(self, split: str) -> Dataset:
        from graph_builders.store import AdiosGraphDataset

        return AdiosGraphDataset(self.path, split)

    def close(self) -> None:
        self.store.close()


def open_source(data: str | os.PathLike | GraphSource) -> GraphSource:
    """A path opens the ADIOS2 store; anything else is used as it is."""
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


class SlimDataset(Dataset):
    """Lazy view of a split: the selected samples, slimmed (and ``x`` standardised) as read."""

    def __init__(self, base: Sequence[Data] | Dataset, indices: list[int], fields: FieldSelection):
        self.base, self.indices, self.fields = base, indices, fields
        self.x_stats: HeadStats | None = None

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> Data:
        d = self.fields.slim(self.base[self.indices[i]])
        if self.x_stats is not None:
            d.x = standardise_x(d.x, self.x_stats)
        return d


def standardise_x(x: torch.Tensor, stats: HeadStats) -> torch.Tensor:
    """``(x - mean) / std`` per column (the model's input scaling, fitted on the training split)."""
    return (x - stats.mean.to(x.device, x.dtype)) / stats.std.to(x.device, x.dtype)


@dataclass
class PreparedData:
    """Everything the trainer needs from the dataset, checked."""

    heads: HeadRegistry  # the predicted heads, in config order
    splits: dict[str, Sequence[Data]]
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

    def num_graphs(self, split: str) -> int:
        return len(self.splits[split])


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
    preload: bool = True,
    degree_histogram: bool = False,
) -> PreparedData:
    """Check and summarise ``source`` for training ``heads`` (see the module docstring).

    ``where`` names the dataset in error messages. NaN/inf targets raise :class:`DataError`
    listing ``split[index]`` of each bad sample unless ``skip_nan_targets``.
    """
    _check_splits(source, where)
    stats = _TrainStats(heads, fields, degree_histogram)
    splits: dict[str, Sequence[Data]] = {}
    skipped: dict[str, list[int]] = {}
    problems = _Problems()
    widths: tuple[int, int, bool] | None = None
    for split in SPLITS:
        base = source.dataset(split)
        keep: list[int] = []
        slim: list[Data] = []
        for i in range(source.num_graphs(split)):
            d = base[i]
            if problems.found(split, i, d, heads):
                continue
            this = _widths(d)
            if widths is None:
                widths = this
            elif this[:2] != widths[:2]:
                problems.shape.append((split, i, f"x/edge_attr widths {this[:2]} differ from the first "
                                                 f"graph's {widths[:2]}"))
                continue
            keep.append(i)
            if preload:
                slim.append(fields.slim(d))
            if split == "trainset":
                stats.add(d)
        splits[split] = slim if preload else SlimDataset(base, keep, fields)
        if len(keep) < source.num_graphs(split):
            kept = set(keep)
            skipped[split] = [i for i in range(source.num_graphs(split)) if i not in kept]
    problems.check(where, skip_nan_targets)
    for split in SPLITS:
        if len(splits[split]) == 0:
            raise DataError(f"{where}: split {split!r} has no usable graphs after skipping NaN targets")
    assert widths is not None and stats.x_moments is not None
    x_stats = stats.x_moments.stats()
    _standardise(splits, x_stats)
    return PreparedData(
        heads=heads, splits=splits, normaliser=stats.fit.finish(), x_stats=x_stats,
        node_feature_dim=widths[0], edge_dim=widths[1], has_atomic_numbers=widths[2],
        degree_histogram=stats.deg_hist.tolist() if degree_histogram else None,
        skipped=skipped, metadata=dict(getattr(source, "metadata", None) or {}),
        per_node_stats={name: m.stats() for name, m in stats.per_node.items()},
    )


def _check_splits(source: GraphSource, where: str) -> None:
    names = list(getattr(source, "split_names", SPLITS))
    missing = [s for s in SPLITS if s not in names]
    if missing:
        raise DataError(f"{where}: split(s) {missing} missing; the file has {names}")
    for split in SPLITS:
        if source.num_graphs(split) == 0:
            raise DataError(f"{where}: split {split!r} is empty; training needs graphs in "
                            f"{', '.join(SPLITS)}")


def _widths(d: Data) -> tuple[int, int, bool]:
    """(x width, edge_attr width, has z) of one graph."""
    x_w = d.x.shape[1] if d.x is not None and d.x.dim() == 2 else -1
    e_w = d.edge_attr.shape[1] if getattr(d, "edge_attr", None) is not None else 0
    return x_w, e_w, getattr(d, "z", None) is not None


@dataclass
class _Problems:
    """Samples whose targets do not fit the heads (always an error) or are not finite."""

    shape: list[tuple[str, int, str]] = field(default_factory=list)
    nan: list[tuple[str, int, str]] = field(default_factory=list)

    def found(self, split: str, i: int, d: Data, heads: HeadRegistry) -> bool:
        """Record the first problem of sample ``split[i]``; True when it has one."""
        for h in heads:
            y = getattr(d, h.key, None)
            rows = 1 if h.level == "graph" else d.num_nodes
            if y is None or tuple(y.shape) != (rows, h.dim):
                got = None if y is None else tuple(y.shape)
                self.shape.append((split, i, f"{h.key} must be [{rows}, {h.dim}], got {got}"))
                return True
            if not bool(torch.isfinite(y).all()):
                self.nan.append((split, i, f"{h.key} has NaN/inf"))
                return True
        return False

    def check(self, where: str, skip_nan_targets: bool) -> None:
        if self.shape:
            raise DataError(f"{where}: {len(self.shape)} sample(s) do not match the heads: {_describe(self.shape)}")
        if self.nan and not skip_nan_targets:
            raise DataError(f"{where}: {len(self.nan)} sample(s) have NaN/inf targets: {_describe(self.nan)} "
                            "(set NeuralNetwork.Training.skip_nan_targets to leave them out)")


class _TrainStats:
    """What the training split gives the trainer: target normalisation, input-feature moments and
    (for PNA) the in-degree histogram."""

    def __init__(self, heads: HeadRegistry, fields: FieldSelection, degree_histogram: bool) -> None:
        self.fit = NormaliserFit(heads)
        self.per_node = {h.name: RunningMoments(1) for h in heads if h.level == "graph" and h.dim == 1}
        self.fields = fields
        self.x_moments: RunningMoments | None = None
        self.degree_histogram = degree_histogram
        self.deg_hist = torch.zeros(1, dtype=torch.long)

    def add(self, d: Data) -> None:
        self.fit.add(d)
        for name, moments in self.per_node.items():
            moments.add(getattr(d, TARGET_PREFIX + name) / max(int(d.num_nodes), 1))
        x_sel = d.x if self.fields.x_columns is None else d.x[:, list(self.fields.x_columns)]
        if self.x_moments is None:
            self.x_moments = RunningMoments(x_sel.shape[1])
        self.x_moments.add(x_sel)
        if self.degree_histogram:
            h = torch.bincount(torch.bincount(d.edge_index[1], minlength=d.num_nodes))
            if h.numel() > self.deg_hist.numel():
                h, self.deg_hist = self.deg_hist, h
            self.deg_hist[: h.numel()] += h


def _standardise(splits: dict[str, Sequence[Data]], x_stats: HeadStats) -> None:
    """Standardise x with the training split's moments (lazily for a not preloaded split)."""
    for graphs in splits.values():
        if isinstance(graphs, SlimDataset):
            graphs.x_stats = x_stats
        else:
            for d in graphs:
                d.x = standardise_x(d.x, x_stats)


class ShardedBatchSampler(Sampler[list[int]]):
    """Global batches of ``batch_size`` indices, each split into ``world_size`` shards.

    Rank ``r`` gets shard ``r`` of every global batch, so one process and N processes see the same
    global batches (same seed and epoch). With N > 1 a trailing global batch smaller than N is
    dropped (a rank would otherwise get no graph).
    """

    def __init__(self, n: int, batch_size: int, rank: int = 0, world_size: int = 1,
                 shuffle: bool = True, seed: int = 0) -> None:
        self.n, self.batch_size, self.rank, self.world = n, batch_size, rank, world_size
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _order(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.n))
        g = torch.Generator()
        g.manual_seed(self.seed * 100_003 + self.epoch)
        return torch.randperm(self.n, generator=g).tolist()

    def __iter__(self) -> Iterator[list[int]]:
        order = self._order()
        for start in range(0, self.n, self.batch_size):
            batch = order[start: start + self.batch_size]
            if len(batch) < self.world:
                continue
            # contiguous shards of near-equal size
            k, r = divmod(len(batch), self.world)
            lo = self.rank * k + min(self.rank, r)
            hi = lo + k + (1 if self.rank < r else 0)
            yield batch[lo:hi]

    def __len__(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest >= self.world else 0)


class StridedBatchSampler(Sampler[list[int]]):
    """Evaluation: rank ``r`` takes samples ``r, r + N, ...`` in batches of ``batch_size``."""

    def __init__(self, n: int, batch_size: int, rank: int = 0, world_size: int = 1) -> None:
        self.indices = list(range(rank, n, world_size))
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[list[int]]:
        for start in range(0, len(self.indices), self.batch_size):
            yield self.indices[start: start + self.batch_size]

    def __len__(self) -> int:
        return (len(self.indices) + self.batch_size - 1) // self.batch_size
