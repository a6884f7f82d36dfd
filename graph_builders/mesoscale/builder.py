"""Grain graphs: nodes are grains, edges join grains that share a face (both directions).

Node features ``x`` (columns in :data:`GRAIN_FEATURES` order), ``pos`` = grain centroid (wrapped into
the box), edge features ``edge_attr`` (columns in :data:`EDGE_FEATURES` order). Every grain graph also
carries ``cell`` = diag(box) [1, 3, 3], ``pbc`` [1, 3] (all True for periodic boxes, all False for
bounded ones) and ``edge_shift`` [E, 3] (zeros for bounded boxes) with
``vector = pos[j] + edge_shift @ cell - pos[i]`` equal to the edge's centroid vector.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import Data

from graph_builders.mesoscale.errors import MicrostructureError
from graph_builders.mesoscale.orientation import as_quaternions, misorientation_angle
from graph_builders.mesoscale.voronoi import voronoi_cells
from graph_builders.mesoscale.voxels import voxel_grains

#: Columns of ``x``: volume, total surface area (box walls included for bounded boxes), number of
#: grain-boundary faces (= node degree), orientation quaternion (w, x, y, z; w >= 0), phase id.
GRAIN_FEATURES: tuple[str, ...] = ("volume", "surface_area", "face_count", "q_w", "q_x", "q_y", "q_z",
                                   "phase")
#: Columns of ``edge_attr``: shared face area, centroid vector j - i (3), misorientation angle
#: (radians, cubic symmetry).
EDGE_FEATURES: tuple[str, ...] = ("face_area", "vector_x", "vector_y", "vector_z", "misorientation")


@dataclass(frozen=True)
class _GrainGeometry:
    """What both builders hand to :func:`_assemble`; faces listed once (first, second, shift)."""

    volume: np.ndarray
    surface_area: np.ndarray
    centroid: np.ndarray  # [G, 3] unwrapped
    box: np.ndarray
    periodic: bool
    first: np.ndarray
    second: np.ndarray
    shift: np.ndarray  # [F, 3] int image of ``second`` (ignored when minimum_image)
    area: np.ndarray
    minimum_image: bool  # True: choose edge shifts by minimum image of the centroids


def grains_to_graph(seeds: np.ndarray, box: np.ndarray | float, orientations: np.ndarray | None = None,
                    phases: np.ndarray | None = None, periodic: bool = True,
                    targets: Mapping[str, object] | None = None, name: str | None = None) -> Data:
    """Graph of the Voronoi grains of ``seeds`` [G, 3] in the box [0, box] (lengths [3] or a scalar).

    ``orientations``: [G, 4] unit quaternions (crystal -> sample, scalar first) or [G, 3] Bunge Euler
    angles in radians (told apart by shape); default identity. ``phases``: int [G], default 0.
    ``targets``: ``{head: value}`` stored as ``y_<head>`` (see :func:`attach_targets`).
    Edge vectors: the centroid of the neighbour across the face (the periodic image the face belongs
    to) minus the centroid of the grain; this is the minimum-image vector whenever the box spans more
    than two grain diameters. Degenerate (cospherical) seeds, e.g. a perfect lattice, give Delaunay
    edges with zero-area faces: faces below ``voronoi.AREA_TOLERANCE * spacing**2`` are dropped and
    are no edges. Bad input raises MicrostructureError naming ``name``.
    """
    label = name or "grains"
    cells = voronoi_cells(seeds, box, periodic=periodic, name=label)
    count = len(cells.volume)
    geometry = _GrainGeometry(
        volume=cells.volume, surface_area=cells.surface_area, centroid=cells.centroid,
        box=np.broadcast_to(np.asarray(box, dtype=np.float64), (3,)).copy(), periodic=periodic,
        first=cells.faces.first, second=cells.faces.second, shift=cells.faces.shift, area=cells.faces.area,
        minimum_image=False)
    quats = as_quaternions(orientations, count, label)
    phase = _as_phases(phases, count, label)
    data = _assemble(geometry, quats, phase, label)
    attach_targets(data, targets, label)
    return data


def voxels_to_graph(labels: np.ndarray, orientations: np.ndarray | Mapping[int, object] | None = None,
                    phases: np.ndarray | Mapping[int, int] | None = None,
                    voxel_size: float | np.ndarray = 1.0, periodic: bool = False,
                    targets: Mapping[str, object] | None = None, name: str | None = None) -> Data:
    """Graph of the grains of a 3-D integer label map (one grain per distinct label, ascending).

    ``orientations``/``phases`` are indexed by label value: an array with one row per label value
    (``orientations[label]`` is [4] or [3]) or a mapping ``{label: value}``. The graph also carries
    ``grain_label`` [G] int64. Periodic maps use minimum-image centroid vectors for the edges.
    """
    label = name or "voxels"
    grains = voxel_grains(labels, voxel_size=voxel_size, periodic=periodic, name=label)
    count = len(grains.labels)
    geometry = _GrainGeometry(
        volume=grains.volume, surface_area=grains.surface_area, centroid=grains.centroid, box=grains.box,
        periodic=periodic, first=grains.face_first, second=grains.face_second,
        shift=np.zeros((len(grains.face_first), 3), dtype=np.int64), area=grains.face_area,
        minimum_image=periodic)
    quats = as_quaternions(_per_label(orientations, grains.labels, "orientations", label), count, label)
    phase = _as_phases(_per_label(phases, grains.labels, "phases", label), count, label)
    data = _assemble(geometry, quats, phase, label)
    data.grain_label = torch.from_numpy(grains.labels.astype(np.int64))
    attach_targets(data, targets, label)
    return data


def attach_targets(data: Data, targets: Mapping[str, object] | None, name: str) -> None:
    """Store ``targets`` as ``y_<head>`` float32 tensors.

    2-D values are kept as they are; a scalar becomes [1, 1]; a 1-D value of length N (number of
    nodes) becomes a node target [N, 1], any other 1-D value a graph target [1, d].
    """
    num_nodes = data.pos.shape[0]
    for head, value in (targets or {}).items():
        if not str(head).isidentifier():
            raise MicrostructureError(f"{name}: target name {head!r} is not a Python identifier")
        arr = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value,
                         dtype=np.float64)
        if arr.ndim == 0:
            arr = arr.reshape(1, 1)
        elif arr.ndim == 1:
            arr = arr.reshape(num_nodes, 1) if arr.size == num_nodes else arr.reshape(1, -1)
        elif arr.ndim != 2:
            raise MicrostructureError(f"{name}: target {head!r} must be at most 2-D, got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise MicrostructureError(f"{name}: target {head!r} contains NaN or inf")
        setattr(data, f"y_{head}", torch.tensor(arr, dtype=torch.float32))


def _as_phases(phases: np.ndarray | None, count: int, name: str) -> np.ndarray:
    if phases is None:
        return np.zeros(count, dtype=np.int64)
    arr = np.asarray(phases)
    if arr.shape != (count,):
        raise MicrostructureError(f"{name}: phases must have shape ({count},), got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.isfinite(arr.astype(np.float64)).all() or (arr != np.round(arr)).any():
            raise MicrostructureError(f"{name}: phases must be integers")
    return arr.astype(np.int64)


def _per_label(values: np.ndarray | Mapping[int, object] | None, grain_labels: np.ndarray, what: str,
               name: str) -> np.ndarray | None:
    """Rows of ``values`` for each grain label (array indexed by label value, or a mapping)."""
    if values is None:
        return None
    if isinstance(values, Mapping):
        missing = [int(g) for g in grain_labels if int(g) not in values]
        if missing:
            raise MicrostructureError(f"{name}: {what} missing for labels {missing[:10]}")
        return np.asarray([values[int(g)] for g in grain_labels])
    arr = np.asarray(values)
    if arr.ndim == 0 or arr.shape[0] <= int(grain_labels.max()):
        have = 0 if arr.ndim == 0 else arr.shape[0]
        missing = grain_labels[grain_labels >= have]
        raise MicrostructureError(
            f"{name}: {what} missing for labels {missing[:10].tolist()} ({what} has {have} rows, "
            f"indexed by label value)")
    return arr[grain_labels]


def _assemble(geo: _GrainGeometry, quats: np.ndarray, phase: np.ndarray, name: str) -> Data:
    box = geo.box
    wrap = np.floor(geo.centroid / box)
    pos = geo.centroid - wrap * box
    pos = np.where(pos >= box, pos - box, np.maximum(pos, 0.0))
    first, second = geo.first, geo.second
    if not geo.periodic:
        shift = np.zeros((len(first), 3))
    elif geo.minimum_image:
        shift = -np.round((pos[second] - pos[first]) / box)
    else:
        shift = geo.shift + wrap[second] - wrap[first]
    vector = pos[second] + shift * box - pos[first]
    misorientation = misorientation_angle(quats[first], quats[second])
    # both directions: centre i = first, neighbour j = second, and the reverse
    centre = np.concatenate([first, second])
    neighbour = np.concatenate([second, first])
    edge_shift = np.concatenate([shift, -shift])
    edge_attr = np.concatenate([
        np.column_stack([geo.area, vector, misorientation]),
        np.column_stack([geo.area, -vector, misorientation]),
    ])
    count = len(geo.volume)
    face_count = np.bincount(centre, minlength=count)
    x = np.column_stack([geo.volume, geo.surface_area, face_count, quats, phase])
    if not np.isfinite(x).all() or not np.isfinite(edge_attr).all():
        raise MicrostructureError(f"{name}: non-finite grain geometry (degenerate input)")
    data = Data(
        x=torch.tensor(x, dtype=torch.float32),
        pos=torch.tensor(pos, dtype=torch.float32),
        edge_index=torch.from_numpy(np.stack([neighbour, centre]).astype(np.int64)),
        edge_attr=torch.tensor(edge_attr, dtype=torch.float32),
        edge_shift=torch.tensor(edge_shift, dtype=torch.float32),
        cell=torch.tensor(np.diag(box)[None], dtype=torch.float32),
        pbc=torch.full((1, 3), bool(geo.periodic)),
    )
    data.name = name
    return data
