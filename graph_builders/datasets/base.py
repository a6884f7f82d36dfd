"""The container every built-in dataset generator returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry


@dataclass
class LabelledGraphs:
    """Graphs with targets, their head registry, optional split indices and dataset metadata.

    ``splits`` maps "trainset"/"valset"/"testset" to indices into ``graphs``; ``None`` lets the store
    split randomly.
    """

    graphs: list[Data]
    heads: HeadRegistry
    name: str
    splits: dict[str, list[int]] | None = None
    metadata: dict[str, str | int | float] = field(default_factory=dict)
