"""What each process of a trial trains and evaluates on, batch by batch, with bounded memory.

**One epoch's global batches** (:func:`epoch_plan`): the training split is cut into chunks of
``chunk`` consecutive graphs, and the chunks into windows of ``window`` consecutive graphs. Each
epoch visits the windows in a seeded random order and, inside a window, its chunks in a seeded
random order; the stream of graphs is cut into global batches of ``batch_size`` (a window is a
whole number of batches, so a batch never straddles two). Each global batch is a few contiguous
runs of one window: one process reads the window once (one block read per field) and serves its
batches from memory; the writer stores every split in random order, so a run is a random sample.
The plan does not depend on the number of processes: one process and N processes train on the same
global batches.

**Each process's share** (:func:`balanced_cuts`): a global batch is split among the processes of a
data-parallel trial so that each share has equal work, not equal graph counts: the graphs' costs
(edges + nodes) in the batch's order are cut at the prefix sums nearest ``k/N`` of the total. Every
step waits for its slowest process, so balancing work balances steps. Such a process reads only
its share's runs (reading whole windows would multiply its reads by N).

**Where graphs come from** (:class:`SplitView`): in memory (preloaded, slimmed once) or read
from the dataset as they are needed (:class:`hydragnn_ensemble.train.data.StreamedSplit`: memory
holds one window, :data:`WINDOW_BYTES` of stored data, whatever the dataset's size).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np
import torch
from torch_geometric.data import Batch, Data

#: a streamed global batch is made of about this many contiguous runs of the split (each one block
#: read per field; the writer stores a split in random order, so a run is a random sample, and the
#: runs that make a batch are drawn anew every epoch)
RUNS_PER_BATCH = 2

Run = tuple[int, int]  # graphs [start, stop) of a split

#: stored bytes of graphs a streamed split reads at once and keeps (its window); the memory bound
WINDOW_BYTES = 16 * 2**20


def window_graphs(bytes_per_graph: float, batch_size: int) -> int:
    """Graphs per window: whole batches of about :data:`WINDOW_BYTES` of stored data (at least one)."""
    batches = int(WINDOW_BYTES // max(1.0, bytes_per_graph * batch_size))
    return max(1, batches) * batch_size


def streamed_chunk(batch_size: int) -> int:
    """Graphs per chunk of a streamed split's plan: a batch is :data:`RUNS_PER_BATCH` chunks (one
    when that does not divide it), so chunks, batches and windows stay aligned."""
    return batch_size // RUNS_PER_BATCH if batch_size % RUNS_PER_BATCH == 0 else batch_size


class SplitView(Protocol):
    """One split as the trainer reads it: its size, each graph's work, and batches of runs."""

    def __len__(self) -> int: ...

    def costs(self, start: int, stop: int) -> np.ndarray:
        """Each graph's work (edges + nodes) for graphs ``[start, stop)``."""

    def batch(self, runs: Sequence[Run]) -> Batch:
        """The graphs of ``runs`` as one batch, ready for the model (slimmed, inputs standardised)."""


class InMemorySplit:
    """A split held in memory as ready graphs (preloaded)."""

    def __init__(self, graphs: Sequence[Data]) -> None:
        self._graphs = list(graphs)
        self._costs = np.fromiter((g.num_nodes + int(g.edge_index.shape[1]) for g in self._graphs),
                                  dtype=np.int64, count=len(self._graphs))

    def __len__(self) -> int:
        return len(self._graphs)

    def __getitem__(self, i: int) -> Data:
        return self._graphs[i]

    def costs(self, start: int, stop: int) -> np.ndarray:
        return self._costs[start:stop]

    def batch(self, runs: Sequence[Run]) -> Batch:
        return Batch.from_data_list([g for a, b in runs for g in self._graphs[a:b]])


def epoch_plan(n: int, batch_size: int, chunk: int, seed: int, epoch: int, shuffle: bool = True,
               window: int = 0) -> list[list[Run]]:
    """The global batches of one epoch over ``n`` graphs as lists of runs (module docstring).
    ``window``: graphs per window, a multiple of ``chunk`` (0: the whole split is one window). A
    last, shorter chunk comes last, so the other batches stay aligned with the chunks."""
    if n <= 0:
        return []
    full, rest = divmod(n, chunk)
    if not shuffle:
        order = list(range(full + (1 if rest else 0)))
    else:
        rng = np.random.default_rng((seed, epoch))
        per_window = window // chunk if window else full
        if per_window <= 0 or per_window >= full:
            order = rng.permutation(full).tolist()
        else:
            starts = np.arange(0, full, per_window)
            order = [c for w in rng.permutation(len(starts)).tolist()
                     for c in (starts[w] + rng.permutation(min(per_window, full - starts[w]))).tolist()]
        order += [full] if rest else []
    batches: list[list[Run]] = []
    current: list[Run] = []
    room = batch_size
    for c in order:
        start, stop = c * chunk, min(n, (c + 1) * chunk)
        while start < stop:
            take = min(room, stop - start)
            current.append((start, start + take))
            start += take
            room -= take
            if room == 0:
                batches.append(current)
                current, room = [], batch_size
    if current:
        batches.append(current)
    return batches


def balanced_cuts(costs: np.ndarray, parts: int) -> list[int]:
    """``parts + 1`` increasing cut positions over graphs of ``costs`` (in order): part ``k`` is
    graphs ``[cut[k], cut[k+1])``, with each part's summed cost as close to ``1/parts`` of the total
    as whole graphs allow, and at least one graph per part (``len(costs) >= parts``)."""
    n = len(costs)
    prefix = np.concatenate(([0], np.cumsum(costs, dtype=np.float64)))
    targets = prefix[-1] * np.arange(1, parts) / parts
    cuts = [0]
    for k, target in enumerate(targets, start=1):
        i = int(np.searchsorted(prefix, target))  # prefix[i - 1] < target <= prefix[i]
        if i > 0 and target - prefix[i - 1] <= prefix[min(i, n)] - target:
            i -= 1
        cuts.append(min(max(i, cuts[-1] + 1), n - (parts - k)))
    cuts.append(n)
    return cuts


def share_of(runs: Sequence[Run], cuts: Sequence[int], part: int) -> list[Run]:
    """The runs of graphs ``[cuts[part], cuts[part + 1])`` of the concatenation of ``runs``."""
    lo, hi = cuts[part], cuts[part + 1]
    out: list[Run] = []
    seen = 0
    for start, stop in runs:
        length = stop - start
        a, b = max(lo, seen), min(hi, seen + length)
        if a < b:
            out.append((start + a - seen, start + b - seen))
        seen += length
    return out


class EpochBatches:
    """This process's part of every global training batch of an epoch (see the module docstring).

    ``balance``: ``"cost"`` (equal work per process) or ``"count"`` (equal graph counts, the way
    before; for comparison). A global batch with fewer graphs than processes is skipped by all."""

    def __init__(self, split: SplitView, batch_size: int, rank: int = 0, world_size: int = 1, seed: int = 0,
                 chunk: int = 1, shuffle: bool = True, balance: str = "cost", window: int = 0) -> None:
        if balance not in ("cost", "count"):
            raise ValueError(f"balance must be 'cost' or 'count', got {balance!r}")
        self.split, self.batch_size, self.rank, self.world = split, batch_size, rank, world_size
        self.seed, self.chunk, self.shuffle, self.balance = seed, max(1, chunk), shuffle, balance
        self.window = window
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def plan(self) -> list[list[Run]]:
        return epoch_plan(len(self.split), self.batch_size, self.chunk, self.seed, self.epoch, self.shuffle,
                          self.window)

    def my_runs(self, runs: list[Run]) -> list[Run] | None:
        """This process's runs of a global batch (None: the batch is skipped)."""
        size = sum(b - a for a, b in runs)
        if size < self.world:
            return None
        if self.world == 1:
            return runs
        if self.balance == "cost":
            costs = np.concatenate([self.split.costs(a, b) for a, b in runs])
        else:
            costs = np.ones(size)
        return share_of(runs, balanced_cuts(costs, self.world), self.rank)

    def __iter__(self) -> Iterator[Batch]:
        for runs in self.plan():
            mine = self.my_runs(runs)
            if mine is not None:
                yield self.split.batch(mine)

    def __len__(self) -> int:
        full, rest = divmod(len(self.split), self.batch_size)
        return full + (1 if rest >= self.world else 0)


class EvalBatches:
    """Evaluation: process ``r`` of ``N`` takes a contiguous ``1/N`` of the split, in batches of
    ``batch_size`` consecutive graphs (one block read each when streamed)."""

    def __init__(self, split: SplitView, batch_size: int, rank: int = 0, world_size: int = 1) -> None:
        n = len(split)
        base, extra = divmod(n, world_size)
        self.start = rank * base + min(rank, extra)
        self.stop = self.start + base + (1 if rank < extra else 0)
        self.split, self.batch_size = split, batch_size

    def __iter__(self) -> Iterator[Batch]:
        for a in range(self.start, self.stop, self.batch_size):
            yield self.split.batch([(a, min(self.stop, a + self.batch_size))])

    def __len__(self) -> int:
        return math.ceil((self.stop - self.start) / self.batch_size)
