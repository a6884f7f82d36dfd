"""Element edge tables and element measures (length, area, volume) per meshio cell type.

Node numbering follows meshio/VTK: a quad's corners go round its boundary (so 0-2 and 1-3 are
diagonals, not edges); a hexahedron has corners 0-3 at the bottom and 4-7 above them; a wedge has the
triangle 0-1-2 below 3-4-5; a pyramid has the quad base 0-3 and apex 4. Second-order types
(``triangle6``, ``tetra10``, ...) list their corners first; only the corners make graph edges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ElementType:
    """One linear element shape: its corner count, dimension and edges (corner index pairs)."""

    name: str
    num_corners: int
    dim: int
    edges: tuple[tuple[int, int], ...]


_QUAD_EDGES = ((0, 1), (1, 2), (2, 3), (3, 0))

LINEAR_ELEMENTS: dict[str, ElementType] = {
    e.name: e
    for e in (
        ElementType("line", 2, 1, ((0, 1),)),
        ElementType("triangle", 3, 2, ((0, 1), (1, 2), (2, 0))),
        ElementType("quad", 4, 2, _QUAD_EDGES),
        ElementType("tetra", 4, 3, ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))),
        ElementType(
            "hexahedron",
            8,
            3,
            _QUAD_EDGES
            + ((4, 5), (5, 6), (6, 7), (7, 4))  # top face
            + ((0, 4), (1, 5), (2, 6), (3, 7)),  # vertical edges
        ),
        ElementType(
            "wedge",
            6,
            3,
            ((0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3), (0, 3), (1, 4), (2, 5)),
        ),
        ElementType("pyramid", 5, 3, _QUAD_EDGES + ((0, 4), (1, 4), (2, 4), (3, 4))),
    )
}

#: Second-order meshio cell types whose first corners are those of a linear type.
HIGHER_ORDER_ALIASES: dict[str, str] = {
    "line3": "line",
    "triangle6": "triangle",
    "quad8": "quad",
    "quad9": "quad",
    "tetra10": "tetra",
    "hexahedron20": "hexahedron",
    "hexahedron27": "hexahedron",
    "wedge15": "wedge",
    "wedge18": "wedge",
    "pyramid13": "pyramid",
    "pyramid14": "pyramid",
}

#: Cell types that carry no edges and are skipped (point markers in .msh/.vtu files).
IGNORED_CELL_TYPES = frozenset({"vertex"})

SUPPORTED_CELL_TYPES: tuple[str, ...] = tuple(LINEAR_ELEMENTS) + tuple(HIGHER_ORDER_ALIASES)


def linear_element(cell_type: str) -> ElementType | None:
    """The linear element a meshio cell type reduces to, or None if unsupported."""
    return LINEAR_ELEMENTS.get(HIGHER_ORDER_ALIASES.get(cell_type, cell_type))


# Tetrahedra (corner indices) whose signed volumes add up to the volume of each solid.
_TET_SPLITS: dict[str, tuple[tuple[int, int, int, int], ...]] = {
    "tetra": ((0, 1, 2, 3),),
    "pyramid": ((0, 1, 2, 4), (0, 2, 3, 4)),
    "wedge": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5)),
    "hexahedron": (  # six tetrahedra around the diagonal 0-6
        (0, 1, 2, 6),
        (0, 2, 3, 6),
        (0, 3, 7, 6),
        (0, 7, 4, 6),
        (0, 4, 5, 6),
        (0, 5, 1, 6),
    ),
}


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross products of [3, C] column vectors."""
    return np.stack((a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]))


def measures_and_sizes(
    points: np.ndarray, cells: np.ndarray, element: ElementType
) -> tuple[np.ndarray, np.ndarray]:
    """Per cell: its length / area / volume (absolute) and a length scale, both [C] float64.

    ``points`` is [N, 3] float64, ``cells`` [C, >=num_corners] (corners first). The length scale is
    the largest distance from corner 0 to another corner (within a factor 2 of the cell diameter).
    Quads use the vector area (half the cross product of the diagonals), exact for planar quads;
    solids add the signed volumes of a split into tetrahedra.
    """
    columns = np.ascontiguousarray(points.T)
    corner = [columns[:, cells[:, k]] for k in range(element.num_corners)]  # each [3, C]
    offsets = [corner[k] - corner[0] for k in range(1, element.num_corners)]
    size2 = np.zeros(cells.shape[0])
    for offset in offsets:
        np.maximum(size2, np.einsum("ij,ij->j", offset, offset), out=size2)
    if element.name == "line":
        measure = np.sqrt(size2)
    elif element.name == "triangle":
        normal = _cross(offsets[0], offsets[1])
        measure = 0.5 * np.sqrt(np.einsum("ij,ij->j", normal, normal))
    elif element.name == "quad":
        normal = _cross(offsets[1], corner[3] - corner[1])
        measure = 0.5 * np.sqrt(np.einsum("ij,ij->j", normal, normal))
    else:
        volume6 = np.zeros(cells.shape[0])
        for a, b, c, d in _TET_SPLITS[element.name]:
            pa = corner[a]
            volume6 += np.einsum("ij,ij->j", _cross(corner[b] - pa, corner[c] - pa), corner[d] - pa)
        measure = np.abs(volume6) / 6.0
    return measure, np.sqrt(size2)
