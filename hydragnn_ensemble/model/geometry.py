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

from hydragnn_ensemble.model.edges import csr_matrix, sparse_times

#: grid points of a radial table per spacing of the Gaussian basis: linear interpolation is then
#: within (1/64)^2 / 8 = 3e-5 of a basis function's height
TABLE_POINTS_PER_SPACING = 64


@dataclass
class EdgeGeometry:
    """What a layer may read about the edges.

    ``vector`` [E, 3], ``distance`` [E], ``unit`` [E, 3], ``rbf`` [E, num_gaussians] and ``cutoff`` [E]
    are present when the model's layer family needs geometry (or in potential mode), else ``None``.
    ``edge_attr`` [E, D] is the builder's edge features when the spec asks for them (``edge_dim > 0``).
    ``radial``: the same basis and cutoff on a grid of distances, for filters that depend on the
    distance alone (:class:`RadialTable`), where no gradient with respect to the distances is wanted;
    when it is there, ``rbf`` is not computed (only layers that read the table get one). The basis is
    Gaussian, or (HydraGNN-shaped PaiNN) sinc: :data:`RADIAL_BASES`.
    """

    vector: Tensor | None = None
    distance: Tensor | None = None
    unit: Tensor | None = None
    rbf: Tensor | None = None
    cutoff: Tensor | None = None
    edge_attr: Tensor | None = None
    radial: "RadialTable | None" = None

    def require(self, name: str) -> Tensor:
        """Return field ``name`` or raise ValueError when it was not computed."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"this layer needs edge geometry field {name!r}, which was not computed")
        return value


# exp(-50) ~ 2e-22: the exponent is clamped there so that far tails stay normal floats. Denormal
# values (below ~1e-38) make CPU matrix products with the basis tens of times slower.
MIN_EXPONENT = -50.0


def _check_basis(cutoff: float, size: int, least: int, name: str) -> None:
    """ValueError unless the basis has at least ``least`` functions and a positive cutoff."""
    if size < least:
        raise ValueError(f"{name} must be >= {least}, got {size}")
    if cutoff <= 0:
        raise ValueError(f"radius (cutoff) must be > 0, got {cutoff}")


class GaussianBasis(nn.Module):
    """Gaussians with centres evenly spaced on [0, cutoff] and width equal to the spacing.

    The exponent is clamped at :data:`MIN_EXPONENT`, so the basis is continuous and never denormal.
    """

    def __init__(self, cutoff: float, num_gaussians: int) -> None:
        super().__init__()
        _check_basis(cutoff, num_gaussians, 2, "num_gaussians")
        centres = torch.linspace(0.0, float(cutoff), num_gaussians)
        spacing = float(cutoff) / (num_gaussians - 1)
        self.register_buffer("centres", centres, persistent=False)
        self.coeff = -0.5 / spacing**2

    @property
    def size(self) -> int:
        """The number of basis functions."""
        return int(self.centres.shape[0])

    def forward(self, distance: Tensor) -> Tensor:
        diff = distance.unsqueeze(-1) - self.centres.to(distance.dtype)
        return torch.exp((self.coeff * diff * diff).clamp_min(MIN_EXPONENT))


class SincBasis(nn.Module):
    """``sin(n pi d / rc) / d`` for ``n = 1..size`` (HydraGNN's PaiNN basis), ``n pi / rc`` at ``d = 0``."""

    def __init__(self, cutoff: float, size: int) -> None:
        super().__init__()
        _check_basis(cutoff, size, 1, "num_radial")
        self.register_buffer("orders", torch.arange(1, size + 1, dtype=torch.float32), persistent=False)
        self.cutoff = float(cutoff)

    @property
    def size(self) -> int:
        """The number of basis functions."""
        return int(self.orders.shape[0])

    def forward(self, distance: Tensor) -> Tensor:
        # sin(n pi d / rc) / d = (n pi / rc) sinc(n d / rc), torch.sinc(t) = sin(pi t) / (pi t): finite at 0
        scaled = distance.unsqueeze(-1) * (self.orders.to(distance.dtype) / self.cutoff)
        return torch.sinc(scaled) * (self.orders.to(distance.dtype) * (math.pi / self.cutoff))


#: the radial bases a layer family may ask for (``ConvLayer.hydragnn_radial_basis``)
RADIAL_BASES: dict[str, type[nn.Module]] = {"gaussian": GaussianBasis, "sinc": SincBasis}


def cosine_cutoff(distance: Tensor, cutoff: float) -> Tensor:
    """``0.5 (cos(pi d / rc) + 1)`` for ``d < rc``, else 0: smooth to first order at the cutoff."""
    value = 0.5 * (torch.cos(distance * (math.pi / cutoff)) + 1.0)
    return value * (distance < cutoff).to(distance.dtype)


def table_points(basis: "GaussianBasis | SincBasis") -> int:
    """Grid points of a :class:`RadialTable` for ``basis``: :data:`TABLE_POINTS_PER_SPACING` per
    spacing of its Gaussians (a sinc basis of the same size varies no faster)."""
    return TABLE_POINTS_PER_SPACING * max(basis.size - 1, 1) + 1


class RadialTable:
    """A function of the edge distance alone, such as a continuous filter ``f(rbf(d), cutoff(d))``,
    evaluated on ``G`` distances evenly spaced on [0, cutoff] and interpolated linearly for each
    edge: ``lookup(f(table.rbf, table.cutoff))`` stands for ``f(rbf, cutoff)`` [E, ...] at ``G``
    rows' cost instead of ``E`` rows' (a batch of 32 64-atom alloy cells at 5 A has 85,000 edges; the
    grid of a 50-Gaussian basis 3,137 points). ``weights`` is the CSR [E, G] interpolation (two
    entries per edge); the lookup's gradient flows to the table (not to the distances: a model whose
    forces come from autograd uses the per-edge basis)."""

    def __init__(self, distance: Tensor, cutoff: float, basis: "GaussianBasis | SincBasis") -> None:
        points = table_points(basis)
        grid = torch.linspace(0.0, cutoff, points, dtype=distance.dtype, device=distance.device)
        self.distance = grid
        self.rbf = basis(grid)
        self.cutoff = cosine_cutoff(grid, cutoff)
        position = distance.detach() * ((points - 1) / cutoff)
        low = position.floor().clamp(0, points - 2)
        frac = (position - low).clamp(0.0, 1.0)
        low = low.long()
        edges = torch.arange(distance.shape[0], device=distance.device)
        self._rows = edges.repeat_interleave(2)  # sorted: the [E, G] matrix needs no sort
        self._cols = torch.stack([low, low + 1], dim=1).reshape(-1)
        self._values = torch.stack([1.0 - frac, frac], dim=1).reshape(-1)
        self.weights = csr_matrix(self._rows, self._cols, self._values, distance.shape[0], points)
        self._weights_t: Tensor | None = None

    def lookup(self, table: Tensor) -> Tensor:
        """The per-edge rows [E, F] of ``table`` [G, F], interpolated."""
        return sparse_times(self.weights, table, self._transpose)

    def _transpose(self) -> Tensor:
        """The CSR [G, E] the lookups' gradients multiply by, built once for every layer."""
        if self._weights_t is None:
            self._weights_t = csr_matrix(self._cols, self._rows, self._values, self.weights.shape[1],
                                         self.weights.shape[0])
        return self._weights_t


class GeometryEncoder(nn.Module):
    """Turns edge vectors into :class:`EdgeGeometry` (distances, unit vectors, radial basis, cutoff)."""

    def __init__(self, cutoff: float, num_gaussians: int, radial_table: bool = False,
                 basis: str = "gaussian") -> None:
        super().__init__()
        if basis not in RADIAL_BASES:
            raise ValueError(f"unknown radial basis {basis!r}; valid names: {', '.join(RADIAL_BASES)}")
        self.cutoff = float(cutoff)
        self.basis_name = basis
        self.basis = RADIAL_BASES[basis](cutoff, num_gaussians)
        self.radial_table = radial_table  # whether a layer reads EdgeGeometry.radial

    @property
    def basis_key(self) -> tuple[float, str, int]:
        """What the geometry depends on besides the batch: radius, basis and its size."""
        return (self.cutoff, self.basis_name, self.basis.size)

    def forward(self, vector: Tensor, edge_attr: Tensor | None = None) -> EdgeGeometry:
        sq = (vector * vector).sum(dim=-1)
        distance = sq.clamp_min(1e-12).sqrt()
        unit = vector / distance.unsqueeze(-1)
        radial = RadialTable(distance, self.cutoff, self.basis) if self.tabulates(distance) else None
        return EdgeGeometry(
            vector=vector,
            distance=distance,
            unit=unit,
            # the layers that read a table need no per-edge basis ([E, 50]: 50 ms a batch at 85,000 edges)
            rbf=self.basis(distance) if radial is None else None,
            cutoff=cosine_cutoff(distance, self.cutoff),
            edge_attr=edge_attr,
            radial=radial,
        )

    def complete(self, geometry: EdgeGeometry) -> EdgeGeometry:
        """``geometry``, computed by an encoder of the same radius and basis for another layer
        family, with what this encoder's layers read added in place: the radial table, or the
        per-edge basis (shared geometry in an ensemble, :mod:`ensemble.edge_work`)."""
        distance = geometry.require("distance")
        if geometry.radial is None and self.tabulates(distance):
            geometry.radial = RadialTable(distance, self.cutoff, self.basis)
        if geometry.rbf is None and not self.radial_table:
            geometry.rbf = self.basis(distance)
        return geometry

    def tabulates(self, distance: Tensor) -> bool:
        """Whether distance-only filters go through a :class:`RadialTable`: float32 distances that
        need no gradient (not a potential), and more edges than twice the grid's points, for layers
        that read it (``radial_table``)."""
        if not self.radial_table:
            return False
        points = table_points(self.basis)
        return distance.dtype == torch.float32 and not distance.requires_grad and distance.shape[0] > 2 * points
