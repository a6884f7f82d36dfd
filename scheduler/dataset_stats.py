"""What the cost of a trial depends on in its dataset (:class:`DatasetStats`): training-set size,
mean node and edge counts per graph and stored bytes per graph, read from an ADIOS2 graph store's
facts (:meth:`DatasetStats.from_store`) or given."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["DatasetStats"]


@dataclass(frozen=True)
class DatasetStats:
    """What the cost of a trial depends on in its dataset."""

    num_graphs: int
    mean_nodes: float
    mean_edges: float
    bytes_per_graph: float = 0.0  # as stored (what a streamed epoch reads per graph)

    def __post_init__(self) -> None:
        if self.num_graphs < 1 or self.mean_nodes <= 0 or self.mean_edges < 0:
            raise ValueError(f"dataset statistics must be positive, got {self}")

    @classmethod
    def from_store(cls, path: str) -> "DatasetStats":
        """From a dataset's facts (:mod:`graph_builders.store.facts`, O(1) however large it is):
        training-set size, mean node and edge counts and stored bytes per graph."""
        if not Path(path).is_dir():  # ADIOS2 BP4/BP5 stores are directories; spare the torch import
            raise ValueError(f"{path}: not an ADIOS2 graph store (no such directory)")
        from graph_builders.store import dataset_facts, open_dataset

        with open_dataset(path) as store:
            train = dataset_facts(store).splits.get("trainset")
        if train is None or train.ndata < 1:
            raise ValueError(f"{path}: empty trainset")
        return cls(train.ndata, train.nodes / train.ndata, train.edges / train.ndata, train.nbytes / train.ndata)
