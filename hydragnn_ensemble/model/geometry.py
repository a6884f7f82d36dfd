"""Per-edge geometry computed once per forward pass and shared by every layer.

Edge vectors follow the schema (:func:`graph_builders.schema.edge_vectors`):
``vector_ij = pos[j] + edge_shift @ cell - pos[i]`` for edge ``(j -> i)``, i.e. from the centre ``i``
to the neighbour ``j``. Models never build neighbour lists; they only read the builder's edges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass
class EdgeGeometry:
    """What a layer may read about the edges.

    ``vector`` [E, 3], ``distance`` [E], ``unit`` [E, 3], ``rbf`` [E, num_gaussians] and ``cutoff`` [E]
    are present when the model's layer family needs geometry (or in potential mode), else ``None``.
    ``edge_attr`` [E, D] is the builder's edge features when the spec asks for them (``edge_dim > 0``).
    """

    vector: Tensor | None = None
    distance: Tensor | None = None
    unit: Tensor | None = None
    rbf: Tensor | None = None
    cutoff: Tensor | None = None
    edge_attr: Tensor | None = None

    def require(self, name: str) -> Tensor:
        """Return field ``name`` or raise ValueError when it was not computed."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"this layer needs edge geometry field {name!r}, which was not computed")
        return value


# exp(-50) ~ 2e-22: the exponent is clamped there so that far tails stay normal floats. Denormal
# values (below ~1e-38) make CPU matrix products with the basis tens of times slower.
MIN_EXPONENT = -50.0


class GaussianBasis(nn.Module):
    """Gaussians with centres evenly spaced on [0, cutoff] and width equal to the spacing.

    The exponent is clamped at :data:`MIN_EXPONENT`, so the basis is continuous and never denormal.
    """

    def __init__(self, cutoff: float, num_gaussians: int) -> None:
        super().__init__()
        if num_gaussians < 2:
            raise ValueError(f"num_gaussians must be >= 2, got {num_gaussians}")
        if cutoff <= 0:
            raise ValueError(f"radius (cutoff) must be > 0, got {cutoff}")
        centres = torch.linspace(0.0, float(cutoff), num_gaussians)
        spacing = float(cutoff) / (num_gaussians - 1)
        self.register_buffer("centres", centres, persistent=False)
        self.coeff = -0.5 / spacing**2

    def forward(self, distance: Tensor) -> Tensor:
        diff = distance.unsqueeze(-1) - self.centres.to(distance.dtype)
        return torch.exp((self.coeff * diff * diff).clamp_min(MIN_EXPONENT))


def cosine_cutoff(distance: Tensor, cutoff: float) -> Tensor:
    """``0.5 (cos(pi d / rc) + 1)`` for ``d < rc``, else 0: smooth to first order at the cutoff."""
    value = 0.5 * (torch.cos(distance * (math.pi / cutoff)) + 1.0)
    return value * (distance < cutoff).to(distance.dtype)


class GeometryEncoder(nn.Module):
    """Turns edge vectors into :class:`EdgeGeometry` (distances, unit vectors, radial basis, cutoff)."""

    def __init__(self, cutoff: float, num_gaussians: int) -> None:
        super().__init__()
        self.cutoff = float(cutoff)
        self.basis = GaussianBasis(cutoff, num_gaussians)

    def forward(self, vector: Tensor, edge_attr: Tensor | None = None) -> EdgeGeometry:
        sq = (vector * vector).sum(dim=-1)
        distance = sq.clamp_min(1e-12).sqrt()
        unit = vector / distance.unsqueeze(-1)
        return EdgeGeometry(
            vector=vector,
            distance=distance,
            unit=unit,
            rbf=self.basis(distance),
            cutoff=cosine_cutoff(distance, self.cutoff),
            edge_attr=edge_attr,
        )
