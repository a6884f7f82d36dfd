"""FEM mesh -> graph: nodes are mesh vertices, edges are element edges (both directions)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Union

import numpy as np
import torch
from torch_geometric.data import Data

from graph_builders.continuum._checks import checked_blocks
from graph_builders.continuum._edges import both_directions, unique_element_edges
from graph_builders.continuum._elements import ElementType
from graph_builders.continuum._reading import MeshError, RawMesh, load_raw_mesh
from graph_builders.schema import TARGET_PREFIX

#: A target: the name of a point-data array (node head) or a number/array (graph head).
TargetValue = Union[str, float, int, Sequence[float], np.ndarray, torch.Tensor]


def mesh_to_graph(
    mesh: Any,
    features: Sequence[str] | str | None = None,
    targets: Mapping[str, TargetValue] | None = None,
    name: str | None = None,
    *,
    point_data: Mapping[str, Any] | None = None,
    drop_unused_points: bool = True,
) -> Data:
    """Build a schema graph from a finite-element mesh.

    Args:
        mesh: a ``meshio.Mesh``, a path to any file meshio reads (.msh, .vtu, .xdmf, ...), or a
            scikit-fem mesh (MeshTri/Quad/Tet/Hex/Wedge/Line, first or second order).
        features: names of point-data arrays whose columns, in this order, form ``x`` [N, F]
            (a 1-D array is one column). ``None`` or empty: ``x`` is a column of ones [N, 1].
        targets: head name -> point-data name (node head, ``y_<head>`` [N, d]) or a number/array
            (graph head, ``y_<head>`` [1, d]).
        name: sample name stored as ``data.name`` and used in error messages (default: the file
            path for files, else "mesh").
        point_data: extra point arrays (one row per point), added to and overriding the mesh's own;
            the only source of point data for a scikit-fem mesh.
        drop_unused_points: points that belong to no cell (e.g. the edge nodes of second-order
            cells, or stray points) are removed and the rest renumbered in their original order
            (default); ``False`` keeps them as isolated nodes.

    Returns:
        ``Data`` with ``pos`` [N, 3] (z = 0 for 2-D meshes), ``x``, ``edge_index`` [2, E] (each
        element edge once per direction; the first E/2 columns have row 0 < row 1, the rest are
        them reversed), ``edge_attr`` [E, 4] = (pos[j] - pos[i], |pos[j] - pos[i]|) with j = row 0,
        ``name`` and one ``y_<head>`` per target.

    Raises:
        MeshError (a ValueError) naming the file or sample: unreadable file, no points or cells,
        NaN/inf coordinates, out-of-range indices, zero-measure cells, unknown cell types, unknown
        feature/target names (the message lists the available ones), non-finite values.
    """
    raw = load_raw_mesh(mesh, name=name, point_data=point_data)
    blocks = checked_blocks(raw)
    keep = _used_points(blocks, raw.points.shape[0]) if drop_unused_points else None
    if keep is not None:
        blocks = _renumbered(blocks, keep)
    points = raw.points if keep is None else raw.points[keep]
    x = _features(raw, features, keep, points.shape[0])  # name errors before the heavy work
    target_tensors = {TARGET_PREFIX + head: _target(raw, head, value, keep)
                      for head, value in (targets or {}).items()}

    edges = unique_element_edges(blocks, points.shape[0])
    data = Data(
        pos=torch.from_numpy(points.astype(np.float32)),
        x=x,
        edge_index=torch.from_numpy(both_directions(edges)),
        edge_attr=torch.from_numpy(_edge_attributes(points, edges)),
        **target_tensors,
    )
    data.name = name if name is not None else raw.source
    return data


def _edge_attributes(points: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """[2U, 4] float32 (vector pos[j] - pos[i], length) for the edges and then their reverses."""
    count = edges.shape[1]
    vectors = points[edges[0]] - points[edges[1]]  # j = row 0 of the first half
    attr = np.empty((2 * count, 4), dtype=np.float32)
    attr[:count, :3] = vectors
    attr[count:, :3] = -vectors
    attr[:count, 3] = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    attr[count:, 3] = attr[:count, 3]
    return attr


def _used_points(blocks: list[tuple[ElementType, np.ndarray]], num_points: int) -> np.ndarray | None:
    """Boolean mask of points that are corners of some cell, or None if every point is used."""
    used = np.zeros(num_points, dtype=bool)
    for element, cells in blocks:
        used[cells[:, : element.num_corners]] = True
    return None if used.all() else used


def _renumbered(
    blocks: list[tuple[ElementType, np.ndarray]], keep: np.ndarray
) -> list[tuple[ElementType, np.ndarray]]:
    new_index = np.cumsum(keep) - 1
    return [(element, new_index[cells[:, : element.num_corners]]) for element, cells in blocks]


def _point_array(raw: RawMesh, key: str, what: str, keep: np.ndarray | None) -> np.ndarray:
    """Point-data array ``key`` as float [N_kept, d], with checks that name the sample."""
    if key not in raw.point_data:
        available = sorted(raw.point_data) or "none"
        raise MeshError(
            f"{raw.source}: no point-data array {key!r} (asked for as {what}); available: {available}"
        )
    values = np.asarray(raw.point_data[key])
    num_points = raw.points.shape[0]
    if values.ndim == 0 or values.shape[0] != num_points:
        raise MeshError(
            f"{raw.source}: point data {key!r} has shape {values.shape}, expected {num_points} rows"
        )
    if not (np.issubdtype(values.dtype, np.number) or values.dtype == bool):
        raise MeshError(f"{raw.source}: point data {key!r} is not numeric ({values.dtype})")
    values = values.reshape(num_points, -1).astype(np.float64)
    if keep is not None:
        values = values[keep]
    if not np.isfinite(values).all():
        raise MeshError(f"{raw.source}: point data {key!r} contains NaN or inf")
    return values


def _features(
    raw: RawMesh, features: Sequence[str] | str | None, keep: np.ndarray | None, num_nodes: int
) -> torch.Tensor:
    names = [features] if isinstance(features, str) else list(features or [])
    if not names:
        return torch.ones(num_nodes, 1)
    columns = [_point_array(raw, key, "a feature", keep) for key in names]
    return torch.from_numpy(np.concatenate(columns, axis=1).astype(np.float32))


def _target(raw: RawMesh, head: str, value: TargetValue, keep: np.ndarray | None) -> torch.Tensor:
    if not isinstance(head, str) or not head.isidentifier():
        raise MeshError(f"{raw.source}: target head name {head!r} must be a Python identifier")
    if isinstance(value, str):
        return torch.from_numpy(_point_array(raw, value, f"target {head!r}", keep).astype(np.float32))
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    array = np.asarray(value, dtype=np.float64).reshape(1, -1)
    if array.shape[1] == 0 or not np.isfinite(array).all():
        raise MeshError(f"{raw.source}: graph target {head!r} must be finite and non-empty, got {value!r}")
    return torch.from_numpy(array.astype(np.float32))
