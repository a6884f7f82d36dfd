"""Turn the accepted mesh inputs (meshio.Mesh, a file meshio reads, a scikit-fem mesh) into arrays."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

# scikit-fem orders hexahedron corners differently from meshio/VTK; this picks VTK's order
# (the same permutation skfem.io.meshio uses when it exports a MeshHex).
_SKFEM_HEX_TO_VTK = (0, 3, 6, 2, 1, 5, 7, 4)
_SKFEM_REFDOM_TO_CELL_TYPE = {
    "RefLine": "line",
    "RefTri": "triangle",
    "RefQuad": "quad",
    "RefTet": "tetra",
    "RefHex": "hexahedron",
    "RefWedge": "wedge",
}


class MeshError(ValueError):
    """A mesh cannot be turned into a graph; the message starts with the file or sample name."""


@dataclass
class RawMesh:
    """A mesh as plain arrays, before any checks.

    ``points`` [N, 3] float64 (2-D and 1-D meshes padded with zeros), ``blocks`` the cell blocks as
    (meshio cell type, point indices [C, nodes per cell]), ``point_data`` named arrays with one row per
    point, ``source`` the file or sample name used in error messages.
    """

    points: np.ndarray
    blocks: list[tuple[str, np.ndarray]]
    point_data: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = "mesh"


def pad_to_3d(points: np.ndarray, source: str) -> np.ndarray:
    """[N, d<=3] coordinates -> [N, 3] float64 with zeros in the missing columns."""
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or not 1 <= points.shape[1] <= 3:
        raise MeshError(f"{source}: points must be an [N, 1..3] array, got shape {points.shape}")
    if points.shape[1] == 3:
        return points
    padded = np.zeros((points.shape[0], 3))
    padded[:, : points.shape[1]] = points
    return padded


def _is_skfem_mesh(mesh: object) -> bool:
    skfem = sys.modules.get("skfem")  # a scikit-fem mesh can only exist if skfem is imported
    return skfem is not None and isinstance(mesh, skfem.Mesh)


def _from_meshio(mesh: Any, source: str) -> RawMesh:
    return RawMesh(
        points=pad_to_3d(mesh.points, source),
        blocks=[(block.type, np.asarray(block.data)) for block in mesh.cells],
        point_data={key: np.asarray(value) for key, value in mesh.point_data.items()},
        source=source,
    )


def _from_skfem(mesh: Any, source: str) -> RawMesh:
    refdom = mesh.elem.refdom.__name__
    cell_type = _SKFEM_REFDOM_TO_CELL_TYPE.get(refdom)
    if cell_type is None:
        raise MeshError(
            f"{source}: scikit-fem reference domain {refdom} is not supported; "
            f"supported: {sorted(_SKFEM_REFDOM_TO_CELL_TYPE)}"
        )
    cells = np.asarray(mesh.t)
    if cell_type == "hexahedron":
        cells = cells[list(_SKFEM_HEX_TO_VTK)]
    # mesh.p holds every node (for second-order meshes also the edge/face nodes after the vertices);
    # mesh.t holds the corner vertices only, so extra nodes end up unused.
    return RawMesh(points=pad_to_3d(np.asarray(mesh.p).T, source), blocks=[(cell_type, cells.T)],
                   source=source)


def _read_file(path: Path) -> RawMesh:
    import meshio

    if not path.is_file():
        raise MeshError(f"{path}: mesh file does not exist")
    # meshio prints its reader errors and then calls sys.exit(1) when no reader succeeds; capture
    # both so that a bad file becomes a MeshError carrying meshio's own explanation.
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            mesh = meshio.read(path)
    except (Exception, SystemExit) as exc:  # readers raise ReadError, KeyError, struct.error, ...
        detail = " ".join(printed.getvalue().split()) or f"{type(exc).__name__}: {exc}"
        raise MeshError(f"{path}: meshio cannot read this file ({detail})") from exc
    return _from_meshio(mesh, str(path))


def load_raw_mesh(
    mesh: Any, name: str | None = None, point_data: Mapping[str, Any] | None = None
) -> RawMesh:
    """Arrays of a meshio.Mesh, a mesh file path, or a scikit-fem mesh; ``point_data`` adds arrays."""
    if isinstance(mesh, (str, os.PathLike)):
        raw = _read_file(Path(mesh))
    elif _is_skfem_mesh(mesh):
        raw = _from_skfem(mesh, name or type(mesh).__name__)
    elif hasattr(mesh, "points") and hasattr(mesh, "cells") and hasattr(mesh, "point_data"):
        raw = _from_meshio(mesh, name or "mesh")
    else:
        raise MeshError(
            f"{name or 'mesh'}: expected a meshio.Mesh, a mesh file path or a scikit-fem mesh, "
            f"got {type(mesh).__name__}"
        )
    for key, value in (point_data or {}).items():
        raw.point_data[key] = np.asarray(value)
    return raw
