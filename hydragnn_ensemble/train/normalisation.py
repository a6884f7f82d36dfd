"""Per-head target normalisation fitted on the training split (from the dataset's facts,
:mod:`graph_builders.store.facts`).

Graph heads get one mean/std per component over graphs, node heads one per component over all
nodes of all training graphs. The model predicts normalised values (``(y - mean) / std``) except
for heads it reports in physical units itself (energy/forces/stress in potential mode): there the
loss divides the residual by ``std`` instead, so both kinds of head weigh the same in the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


#: A component whose training std is below this is treated as constant (std 1).
MIN_STD = 1e-12


@dataclass
class HeadStats:
    """Mean and std (per component) of one head's training targets."""

    mean: Tensor  # [dim] float32
    std: Tensor  # [dim] float32

    def to_dict(self) -> dict[str, list[float]]:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "HeadStats":
        return cls(torch.tensor(d["mean"], dtype=torch.float32),
                   torch.tensor(d["std"], dtype=torch.float32))


@dataclass
class Normaliser:
    """Statistics of every predicted head, in head order."""

    stats: dict[str, HeadStats] = field(default_factory=dict)

    def __getitem__(self, head: str) -> HeadStats:
        return self.stats[head]

    def to_dict(self) -> dict[str, dict[str, list[float]]]:
        return {name: s.to_dict() for name, s in self.stats.items()}

    @classmethod
    def from_dict(cls, d: dict) -> "Normaliser":
        return cls({name: HeadStats.from_dict(v) for name, v in d.items()})

    def normalise(self, head: str, y: Tensor) -> Tensor:
        s = self.stats[head]
        return (y - s.mean.to(y.device)) / s.std.to(y.device)

    def denormalise(self, head: str, y: Tensor) -> Tensor:
        s = self.stats[head]
        return y * s.std.to(y.device) + s.mean.to(y.device)

    def denormalise_variance(self, head: str, var: Tensor) -> Tensor:
        s = self.stats[head]
        return var * (s.std.to(var.device) ** 2)
