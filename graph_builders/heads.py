"""Heads: the prediction targets a dataset carries (name, level, dimension, unit).

Plain Python (no torch), so a campaign's rank 0, the report and the baselines read heads without
importing the graph schema's tensors; :mod:`graph_builders.schema` re-exports these names.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Iterable, Iterator, Literal

HeadLevel = Literal["graph", "node"]
TARGET_PREFIX = "y_"


@dataclass(frozen=True)
class HeadSpec:
    """One prediction target: ``name`` (stored as ``y_<name>``), ``level``, ``dim`` and ``unit``."""

    name: str
    level: HeadLevel
    dim: int
    unit: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"head name {self.name!r} must be a Python identifier")
        if self.level not in ("graph", "node"):
            raise ValueError(f"head {self.name!r}: level must be 'graph' or 'node', got {self.level!r}")
        if int(self.dim) < 1:
            raise ValueError(f"head {self.name!r}: dim must be >= 1, got {self.dim}")

    @property
    def key(self) -> str:
        """Attribute name of this head's target on a ``Data`` object."""
        return TARGET_PREFIX + self.name


@dataclass(frozen=True)
class HeadRegistry:
    """Ordered collection of heads of one dataset."""

    heads: tuple[HeadSpec, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        names = [h.name for h in self.heads]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate head names: {sorted(dup)}")

    def __iter__(self) -> Iterator[HeadSpec]:
        return iter(self.heads)

    def __len__(self) -> int:
        return len(self.heads)

    def __contains__(self, name: object) -> bool:
        return any(h.name == name for h in self.heads)

    def __getitem__(self, name: str) -> HeadSpec:
        for h in self.heads:
            if h.name == name:
                return h
        raise KeyError(f"unknown head {name!r}; known heads: {self.names}")

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.heads]

    def to_json(self) -> str:
        return json.dumps([asdict(h) for h in self.heads])

    @classmethod
    def from_json(cls, text: str) -> "HeadRegistry":
        return cls(tuple(HeadSpec(**d) for d in json.loads(text)))

    @classmethod
    def of(cls, heads: Iterable[HeadSpec]) -> "HeadRegistry":
        return cls(tuple(heads))
