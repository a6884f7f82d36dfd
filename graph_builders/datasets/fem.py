"""Built-in continuum dataset: steady heat conduction through a unit square (or cube) with inclusions.

Each sample is the unit square (1 m x 1 m) meshed with scikit-fem's ``MeshTri`` refined ``refine``
times (2 * 4**refine triangles), or with ``dim=3`` the unit cube from ``MeshTet`` (5 * 8**refine
tetrahedra); the mesh is identical for all samples. A matrix of conductivity ``matrix_conductivity``
holds 1-4 (``inclusions``) random discs (balls in 3-D) whose conductivity is the matrix value times a
log-uniform factor from ``contrast``; each element takes the conductivity of the inclusion containing
its centroid (the last drawn one wins where they overlap). Steady heat conduction
``-div(k grad T) = 0`` is solved with P1 elements: T = 0 K on the face x = 0, T = 1 K on x = 1, all
other boundaries insulated.

Graph (see :func:`graph_builders.continuum.mesh_to_graph`): nodes = mesh vertices, edges = element
edges with (vector, length). ``x`` [N, 1 + dim] = (vertex conductivity in W/(m K), the
area/volume-weighted mean of the adjacent elements; then the vertex coordinates in m). The
temperature is not in ``x``.
Targets: ``y_temperature`` [N, 1] in K (node head) and ``y_effective_conductivity`` [1, 1] in
W/(m K) (graph head): the heat flow through the face x = 1 (per unit depth in 2-D) divided by the
applied gradient (1 K over 1 m) and the face size (1 m or 1 m^2). Each graph has ``name``
("fem_<seed>_<index>") and ``num_inclusions`` [1].
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch_geometric.data import Data
from tqdm import tqdm

from graph_builders.continuum import mesh_to_graph
from graph_builders.datasets.base import LabelledGraphs
from graph_builders.schema import HeadRegistry, HeadSpec

FEM_HEADS = HeadRegistry.of(
    [
        HeadSpec("temperature", "node", 1, "K", "steady temperature, 0 K left edge, 1 K right edge"),
        HeadSpec(
            "effective_conductivity",
            "graph",
            1,
            "W/(m K)",
            "heat flow through the domain divided by the applied temperature gradient",
        ),
    ]
)
NODE_FEATURES = ("conductivity", "coordinates")
_MAX_REFINE = {2: 9, 3: 6}
DEFAULT_REFINE = {2: 5, 3: 3}


@dataclass(frozen=True)
class FemConfig:
    """Parameters of the random microstructures (conductivities in W/(m K), lengths in m)."""

    inclusions: tuple[int, int] = (1, 4)
    contrast: tuple[float, float] = (0.1, 10.0)
    radius: tuple[float, float] = (0.05, 0.2)
    matrix_conductivity: float = 1.0
    refine: int = 5
    dim: int = 2

    def __post_init__(self) -> None:
        if self.dim not in (2, 3):
            raise ValueError(f"dim must be 2 or 3, got {self.dim}")
        low, high = self.inclusions
        if not (0 <= low <= high):
            raise ValueError(f"inclusions must be (min, max) with 0 <= min <= max, got {self.inclusions}")
        for label, (a, b) in (("contrast", self.contrast), ("radius", self.radius)):
            if not (0 < a <= b and np.isfinite(b)):
                raise ValueError(f"{label} must be (min, max) with 0 < min <= max, got {(a, b)}")
        if not (self.matrix_conductivity > 0 and np.isfinite(self.matrix_conductivity)):
            raise ValueError(f"matrix_conductivity must be positive, got {self.matrix_conductivity}")
        if not 1 <= self.refine <= _MAX_REFINE[self.dim]:
            raise ValueError(f"refine must be in 1..{_MAX_REFINE[self.dim]} for dim={self.dim}, "
                             f"got {self.refine}")


@dataclass(frozen=True)
class HeatSolution:
    """Solution of one sample: nodal temperature [N] (K) and effective conductivity (W/(m K))."""

    temperature: np.ndarray
    effective_conductivity: float


@dataclass(frozen=True)
class FemSample:
    """One random microstructure: per-element conductivity [C], its solution and inclusion count."""

    element_conductivity: np.ndarray
    solution: HeatSolution
    num_inclusions: int


class HeatConductionSolver:
    """P1 steady heat conduction on one fixed unit-square triangle (or unit-cube tetrahedron) mesh.

    The mesh, basis, boundary dofs, element centroids and ``element_measures`` (area in 2-D, volume
    in 3-D) are built once and reused for every conductivity field.
    """

    def __init__(self, refine: int, dim: int = 2) -> None:
        from skfem import Basis, ElementTetP0, ElementTetP1, ElementTriP0, ElementTriP1, MeshTet, MeshTri

        mesh_type, p1, p0 = (MeshTri, ElementTriP1, ElementTriP0) if dim == 2 else (
            MeshTet, ElementTetP1, ElementTetP0)
        self.mesh = mesh_type().refined(refine)
        self._basis = Basis(self.mesh, p1())
        self._basis_p0 = self._basis.with_element(p0())
        self._left = self._basis.get_dofs(lambda x: np.isclose(x[0], 0.0)).all()
        self._right = self._basis.get_dofs(lambda x: np.isclose(x[0], 1.0)).all()
        corners = self.mesh.p[:, self.mesh.t]  # [dim, dim + 1, C]
        self.centroids = corners.mean(axis=1)  # [dim, C]
        jacobians = np.moveaxis(corners[:, 1:] - corners[:, :1], -1, 0)  # [C, dim, dim]
        self.element_measures = np.abs(np.linalg.det(jacobians)) / math.factorial(dim)

    def solve(self, element_conductivity: np.ndarray) -> HeatSolution:
        """Temperature and effective conductivity for one per-element conductivity field."""
        from skfem import BilinearForm, asm, condense, solve
        from skfem.helpers import dot, grad

        @BilinearForm
        def conduction(u, v, w):  # type: ignore[no-untyped-def]
            return w.k * dot(grad(u), grad(v))

        stiffness = asm(conduction, self._basis, k=self._basis_p0.interpolate(element_conductivity))
        temperature = np.zeros(self._basis.N)
        temperature[self._right] = 1.0
        fixed = np.concatenate([self._left, self._right])
        temperature = solve(*condense(stiffness, x=temperature, D=fixed))
        # Reaction at the x = 1 nodes = heat flow entering there (per metre of depth in 2-D);
        # divided by the gradient (1 K / 1 m) and the face size (1 m or 1 m^2).
        heat_flow = float((stiffness @ temperature)[self._right].sum())
        return HeatSolution(temperature=temperature, effective_conductivity=heat_flow)

    def vertex_conductivity(self, element_conductivity: np.ndarray) -> np.ndarray:
        """Area- (volume-) weighted mean conductivity of the elements around each vertex, [N]."""
        t = self.mesh.t
        weight = np.repeat(self.element_measures[None, :], t.shape[0], axis=0)
        total = np.bincount(t.ravel(), weights=(weight * element_conductivity).ravel(),
                            minlength=self.mesh.nvertices)
        return total / np.bincount(t.ravel(), weights=weight.ravel(), minlength=self.mesh.nvertices)


def sample_rngs(seed: int, count: int) -> list[np.random.Generator]:
    """Independent generators per sample, so sample i does not depend on ``num_samples``."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(count)]


def simulate_sample(solver: HeatConductionSolver, config: FemConfig, rng: np.random.Generator) -> FemSample:
    """Draw one microstructure with ``rng`` and solve it."""
    count = int(rng.integers(config.inclusions[0], config.inclusions[1] + 1))
    centres = rng.uniform(0.0, 1.0, size=(count, config.dim))
    radii = rng.uniform(*config.radius, size=count)
    low, high = config.contrast
    factors = low * (high / low) ** rng.uniform(0.0, 1.0, size=count)  # log-uniform in [low, high]
    conductivity = np.full(solver.mesh.nelements, config.matrix_conductivity)
    for centre, radius, factor in zip(centres, radii, factors):
        inside = np.linalg.norm(solver.centroids - centre[:, None], axis=0) <= radius
        conductivity[inside] = config.matrix_conductivity * factor
    return FemSample(conductivity, solver.solve(conductivity), count)


def sample_to_graph(solver: HeatConductionSolver, sample: FemSample, name: str) -> Data:
    """The schema graph of one solved sample (see the module docstring for x and targets)."""
    data = mesh_to_graph(
        solver.mesh,
        features=list(NODE_FEATURES),
        targets={
            "temperature": "temperature",
            "effective_conductivity": sample.solution.effective_conductivity,
        },
        name=name,
        point_data={
            "conductivity": solver.vertex_conductivity(sample.element_conductivity),
            "coordinates": solver.mesh.p.T,
            "temperature": sample.solution.temperature,
        },
    )
    data.num_inclusions = torch.tensor([sample.num_inclusions], dtype=torch.long)
    return data


def make_fem_dataset(
    num_samples: int = 200,
    inclusions: tuple[int, int] = (1, 4),
    contrast: tuple[float, float] = (0.1, 10.0),
    refine: int | None = None,
    seed: int = 0,
    progress: bool = True,
    *,
    radius: tuple[float, float] = (0.05, 0.2),
    matrix_conductivity: float = 1.0,
    dim: int = 2,
) -> LabelledGraphs:
    """Heat conduction through random two-phase squares (see the module docstring), seeded.

    ``inclusions``: (min, max) number of discs per sample; ``contrast``: (min, max) ratio of disc to
    matrix conductivity, drawn log-uniformly; ``refine``: refinements of the two-triangle unit square
    (default 5: 2,048 triangles, 1,089 nodes) or with ``dim=3`` of the five-tetrahedron unit cube
    (default 3: 2,560 tetrahedra, 645 nodes); ``radius``: (min, max) inclusion radius in m.
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if refine is None:
        refine = DEFAULT_REFINE.get(dim, 1)
    config = FemConfig(tuple(inclusions), tuple(contrast), tuple(radius), float(matrix_conductivity),
                       int(refine), int(dim))
    solver = HeatConductionSolver(config.refine, config.dim)
    graphs = []
    for index, rng in enumerate(tqdm(sample_rngs(seed, num_samples), desc="fem samples",
                                     disable=not progress)):
        sample = simulate_sample(solver, config, rng)
        graphs.append(sample_to_graph(solver, sample, f"fem_{seed}_{index:05d}"))
    metadata: dict[str, str | int | float] = {
        "generator": "graph_builders.datasets.fem.make_fem_dataset",
        "seed": seed,
        "num_samples": num_samples,
        "node_features": "conductivity W/(m K) (size-weighted mean of adjacent elements), "
        + ", ".join(f"{axis} m" for axis in "xyz"[: config.dim]),
        "edge_features": "vector pos[j] - pos[i] (m, 3 columns), length (m)",
        "solver": "scikit-fem P1, scipy sparse direct solve",
        "boundary_conditions": "T = 0 K at x = 0, T = 1 K at x = 1, other boundaries insulated",
        "num_elements": int(solver.mesh.nelements),
        "num_nodes": int(solver.mesh.nvertices),
    }
    for key, value in asdict(config).items():
        metadata[key] = str(value) if isinstance(value, tuple) else value
    return LabelledGraphs(graphs=graphs, heads=FEM_HEADS, name="fem", splits=None, metadata=metadata)
