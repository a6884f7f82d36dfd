"""Checks on a raw mesh: empty, non-finite coordinates, unknown cell types, bad indices, degenerate cells."""

from __future__ import annotations

import numpy as np

from graph_builders.continuum._elements import (
    IGNORED_CELL_TYPES,
    SUPPORTED_CELL_TYPES,
    ElementType,
    linear_element,
    measures_and_sizes,
)
from graph_builders.continuum._reading import MeshError, RawMesh

#: A cell is degenerate when its measure is below this fraction of (its size) ** dimension.
DEGENERATE_RELATIVE_MEASURE = 1e-10
_SHOW = 5  # how many offending indices an error message lists


def checked_blocks(raw: RawMesh) -> list[tuple[ElementType, np.ndarray]]:
    """Validate ``raw`` and return its non-empty cell blocks with their element types.

    Raises MeshError (naming ``raw.source``) for: no points, NaN/inf coordinates, unknown cell types,
    no cells, malformed or out-of-range indices, and zero-length/area/volume cells.
    """
    src = raw.source
    num_points = raw.points.shape[0]
    if num_points == 0:
        raise MeshError(f"{src}: mesh has no points")
    bad_points = np.flatnonzero(~np.isfinite(raw.points).all(axis=1))
    if bad_points.size:
        raise MeshError(
            f"{src}: {bad_points.size} point(s) have NaN or inf coordinates, "
            f"first: {bad_points[:_SHOW].tolist()}"
        )
    blocks: list[tuple[ElementType, np.ndarray]] = []
    for number, (cell_type, cells) in enumerate(raw.blocks):
        if cell_type in IGNORED_CELL_TYPES:
            continue
        element = linear_element(cell_type)
        if element is None:
            raise MeshError(
                f"{src}: unknown cell type {cell_type!r} in cell block {number}; "
                f"supported: {', '.join(SUPPORTED_CELL_TYPES)} (and 'vertex', which is ignored)"
            )
        if cells.size == 0:
            continue
        _check_indices(src, number, cell_type, cells, element, num_points)
        _check_measures(src, number, cell_type, raw.points, cells, element)
        blocks.append((element, cells))
    if not blocks:
        kinds = sorted({cell_type for cell_type, _ in raw.blocks})
        raise MeshError(f"{src}: mesh has no cells with edges (cell types present: {kinds or 'none'})")
    return blocks


def _check_indices(
    src: str, number: int, cell_type: str, cells: np.ndarray, element: ElementType, num_points: int
) -> None:
    where = f"cell block {number} ({cell_type})"
    if cells.ndim != 2 or cells.shape[1] < element.num_corners:
        raise MeshError(
            f"{src}: {where} must be [C, {element.num_corners}] point indices, got {cells.shape}"
        )
    if not np.issubdtype(cells.dtype, np.integer):
        raise MeshError(f"{src}: {where} holds {cells.dtype} values, expected integer point indices")
    low, high = int(cells.min()), int(cells.max())
    if low < 0 or high >= num_points:
        bad = np.flatnonzero(((cells < 0) | (cells >= num_points)).any(axis=1))
        value = low if low < 0 else high
        raise MeshError(
            f"{src}: {where} refers to point {value} but the mesh has {num_points} points "
            f"(0..{num_points - 1}); bad cells: {bad[:_SHOW].tolist()}"
        )


def _check_measures(
    src: str, number: int, cell_type: str, points: np.ndarray, cells: np.ndarray, element: ElementType
) -> None:
    measure, size = measures_and_sizes(points, cells, element)
    bad = np.flatnonzero(measure <= DEGENERATE_RELATIVE_MEASURE * size**element.dim)
    if bad.size:
        kind = {1: "length", 2: "area", 3: "volume"}[element.dim]
        raise MeshError(
            f"{src}: {bad.size} degenerate {cell_type} cell(s) with zero {kind} in cell block "
            f"{number}, first: {bad[:_SHOW].tolist()}"
        )
