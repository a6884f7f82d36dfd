"""Grains of a 3-D integer label map (EBSD- or phase-field-like voxel data).

A grain is the set of voxels carrying one label (connectivity is not checked). Two grains share a face
where voxels of the two labels touch across a voxel face; the shared area is the number of such voxel
faces times the voxel face area. Periodic maps also compare the last and first voxel layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graph_builders.mesoscale.errors import MicrostructureError


@dataclass(frozen=True)
class VoxelGrains:
    """Geometry of the grains of a label map; grains are ordered by increasing label."""

    labels: np.ndarray  # [G] int64 label value of each grain
    voxel_count: np.ndarray  # [G] int64
    volume: np.ndarray  # [G]
    surface_area: np.ndarray  # [G] grain boundaries plus (bounded maps) the outer surface
    centroid: np.ndarray  # [G, 3] in [0, box) (periodic maps: mean over the minimum-image offsets)
    box: np.ndarray  # [3] map extent = shape * voxel_size
    face_first: np.ndarray  # [F] grain index, face_first < face_second
    face_second: np.ndarray  # [F]
    face_area: np.ndarray  # [F]


def validate_label_map(labels: np.ndarray, voxel_size: float | np.ndarray, name: str
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Check a 3-D non-negative integer label map and the voxel size; return (labels int64, size [3])."""
    arr = np.asarray(labels)
    if arr.ndim != 3:
        raise MicrostructureError(f"{name}: label map must be 3-D, got {arr.ndim}-D shape {arr.shape}")
    if arr.size == 0:
        raise MicrostructureError(f"{name}: empty label map (shape {arr.shape})")
    if not np.issubdtype(arr.dtype, np.integer):
        raise MicrostructureError(f"{name}: label map must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if int(arr.min()) < 0:
        raise MicrostructureError(f"{name}: label map has negative labels (min {int(arr.min())})")
    size = np.broadcast_to(np.asarray(voxel_size, dtype=np.float64), (3,)).copy()
    if not np.isfinite(size).all() or (size <= 0).any():
        raise MicrostructureError(f"{name}: voxel_size must be positive and finite, got {size.tolist()}")
    return arr, size


def voxel_grains(labels: np.ndarray, voxel_size: float | np.ndarray = 1.0, periodic: bool = False,
                 name: str = "sample") -> VoxelGrains:
    """Grain volumes, surface areas, centroids and shared faces of a 3-D label map."""
    arr, size = validate_label_map(labels, voxel_size, name)
    grain_labels, grain = _dense_index(arr.ravel())
    grain = grain.reshape(arr.shape)
    count = len(grain_labels)
    box = np.array(arr.shape, dtype=np.float64) * size
    voxel_count = np.bincount(grain.ravel(), minlength=count)
    volume = voxel_count * float(np.prod(size))
    centroid = _centroids(grain, size, box, voxel_count, periodic)

    face_area_of_axis = np.array([size[1] * size[2], size[0] * size[2], size[0] * size[1]])
    pair_keys, pair_areas = [], []
    surface = np.zeros(count)
    for axis in range(3):
        if periodic:
            here, there = grain, np.roll(grain, -1, axis=axis)
        else:
            here = np.take(grain, np.arange(arr.shape[axis] - 1), axis=axis)
            there = np.take(grain, np.arange(1, arr.shape[axis]), axis=axis)
            for layer in (0, arr.shape[axis] - 1):  # the outer surface of the map
                surface += face_area_of_axis[axis] * np.bincount(
                    np.take(grain, layer, axis=axis).ravel(), minlength=count)
        differ = here != there
        lo = np.minimum(here[differ], there[differ]).astype(np.int64)
        hi = np.maximum(here[differ], there[differ]).astype(np.int64)
        pair_keys.append(lo * count + hi)
        pair_areas.append(np.full(lo.size, face_area_of_axis[axis]))
    keys = np.concatenate(pair_keys)
    areas = np.concatenate(pair_areas)
    order = np.argsort(keys, kind="stable")
    keys, areas = keys[order], areas[order]
    if keys.size:
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        face_keys = keys[starts]
        face_area = np.add.reduceat(areas, starts)
    else:
        face_keys, face_area = keys, areas
    first, second = face_keys // count, face_keys % count
    surface += np.bincount(first, weights=face_area, minlength=count)
    surface += np.bincount(second, weights=face_area, minlength=count)
    return VoxelGrains(labels=grain_labels, voxel_count=voxel_count, volume=volume, surface_area=surface,
                       centroid=centroid, box=box, face_first=first, face_second=second,
                       face_area=face_area)


def _dense_index(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct labels and each voxel's index into them (bincount when labels are small)."""
    top = int(flat.max())
    if top <= 4 * flat.size + 1024:
        present = np.bincount(flat, minlength=top + 1) > 0
        lookup = np.cumsum(present) - 1
        return np.flatnonzero(present).astype(np.int64), lookup[flat]
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    new = np.r_[True, ordered[1:] != ordered[:-1]]
    index = np.empty_like(flat)
    index[order] = np.cumsum(new) - 1
    return ordered[new], index


def _centroids(grain: np.ndarray, size: np.ndarray, box: np.ndarray, voxel_count: np.ndarray,
               periodic: bool) -> np.ndarray:
    count = len(voxel_count)
    flat = grain.ravel()
    centres = (np.stack(np.unravel_index(np.arange(flat.size), grain.shape), axis=1) + 0.5) * size
    if not periodic:
        return np.stack([np.bincount(flat, weights=centres[:, k], minlength=count) for k in range(3)],
                        axis=1) / voxel_count[:, None]
    # unwrap each grain around its circular-mean position so grains crossing the boundary stay whole
    angle = 2.0 * np.pi * centres / box
    sin = np.stack([np.bincount(flat, weights=np.sin(angle[:, k]), minlength=count) for k in range(3)], 1)
    cos = np.stack([np.bincount(flat, weights=np.cos(angle[:, k]), minlength=count) for k in range(3)], 1)
    reference = np.arctan2(sin, cos) * box / (2.0 * np.pi)
    offset = centres - reference[flat]
    offset -= box * np.round(offset / box)
    mean = np.stack([np.bincount(flat, weights=offset[:, k], minlength=count) for k in range(3)],
                    axis=1) / voxel_count[:, None]
    return np.mod(reference + mean, box)
