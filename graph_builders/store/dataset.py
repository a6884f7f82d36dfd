"""A lazy torch Dataset over one split of a dataset file, safe for DataLoader workers and MPI ranks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
from torch.utils.data import Dataset
from torch_geometric.data import Data

from graph_builders.store.errors import SampleIndexError, StoreError
from graph_builders.store.reader import GraphStore
from graph_builders.store.sharded import ShardedStore, open_dataset


def shard_indices(n: int, rank: int, world_size: int) -> range:
    """Contiguous shard of ``range(n)`` for ``rank``; shard sizes differ by at most one."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise StoreError(f"rank {rank} is not in 0..{world_size - 1}")
    if n < 0:
        raise StoreError(f"number of samples must be >= 0, got {n}")
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))


class AdiosGraphDataset(Dataset):
    """Graphs of ``split`` in the file at ``path``, read one at a time on access.

    ``indices`` selects a subset (positions in the split), e.g. an MPI rank's shard. The file is
    opened on first access in each process, so the object pickles to DataLoader workers and
    across processes; batch it with ``torch_geometric.loader.DataLoader``.
    """

    def __init__(self, path: str | Path, split: str, indices: Sequence[int] | None = None) -> None:
        self.path = Path(path)
        self.split = split
        with open_dataset(self.path) as store:
            n = store.num_graphs(split)
            self.heads = store.heads
        if indices is None:
            self.indices = np.arange(n, dtype=np.int64)
        else:
            self.indices = np.asarray(list(indices), dtype=np.int64).reshape(-1)
            bad = self.indices[(self.indices < 0) | (self.indices >= n)]
            if len(bad):
                raise SampleIndexError(
                    f"{self.path}: index {int(bad[0])} is out of range for {split!r} with {n} graphs"
                )
        self._store: GraphStore | ShardedStore | None = None
        self._pid: int | None = None

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int) -> Data:
        if not -len(self) <= position < len(self):
            raise SampleIndexError(f"position {position} is out of range for a dataset of {len(self)} graphs")
        return self._open().get(self.split, int(self.indices[position]))

    def shard(self, rank: int, world_size: int) -> "AdiosGraphDataset":
        """This dataset's contiguous shard for ``rank`` of ``world_size``."""
        part = shard_indices(len(self), rank, world_size)
        return AdiosGraphDataset(self.path, self.split, self.indices[part.start:part.stop])

    def close(self) -> None:
        """Close this process's file handle (reopened on next access)."""
        if self._store is not None and self._pid == os.getpid():
            self._store.close()
        self._store = None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_store"] = None
        state["_pid"] = None
        return state

    def _open(self) -> GraphStore | ShardedStore:
        if self._store is None or self._pid != os.getpid():
            # A handle inherited through fork belongs to the parent: leave it alone, open our own.
            self._store = open_dataset(self.path)
            self._pid = os.getpid()
        return self._store
