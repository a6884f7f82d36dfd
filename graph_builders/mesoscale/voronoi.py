"""Periodic and bounded 3-D Voronoi cells of seed points from one scipy Delaunay call.

Algorithm (vectorised, no per-cell Python loop):

1. Pad the seeds: periodic boxes get the periodic images that lie within a *skin* around the box;
   bounded boxes get the mirror images of the seeds within the skin of each of the 6 walls (the
   bisector between a seed and its mirror is the wall, so cells are clipped exactly by the box).
2. ``scipy.spatial.Delaunay`` of the padded points. Every tetrahedron touching an original seed must
   be a true (periodic) Delaunay tetrahedron: this holds when its circumsphere lies inside the padded
   region, which is checked; otherwise the skin grows and step 2 repeats.
3. Each Delaunay edge touching an original seed is a Voronoi face. Its polygon is the ring of the
   circumcentres of the tetrahedra around the edge, ordered by angle in the bisector plane (one
   lexsort for all faces) and fan-triangulated for area and centroid.
4. Cell volume = sum over faces of area * (half the seed distance) / 3; the cell centroid comes from
   the same pyramid decomposition.

Degenerate input (cospherical seeds, e.g. a perfect lattice, or mirrors at the walls) yields Delaunay
edges whose dual face has zero area: faces with area below ``AREA_TOLERANCE * spacing**2`` (spacing =
(box volume / number of seeds)**(1/3)) are dropped. Flat tetrahedra from such configurations take
their circumcentre from Qhull's lifted hyperplane; Qhull input that leaves points out of the
triangulation is retried with joggled input (``QJ``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import Delaunay, cKDTree

from graph_builders.mesoscale.errors import MicrostructureError

#: Faces with area below this times spacing**2 are dropped (degenerate, cospherical seeds).
AREA_TOLERANCE = 1e-9
#: Seeds closer than this times the spacing are "coinciding".
COINCIDENCE_TOLERANCE = 1e-8
#: Tetrahedra with |det| below this times spacing**3 are treated as flat.
FLAT_TOLERANCE = 1e-10
#: Initial skin thickness in units of the spacing; grows until every circumsphere fits.
INITIAL_SKIN = 3.0
MAX_ATTEMPTS = 8
_JOGGLE = "Qbb Qc Q12 QJ"
_EDGES_OF_TET = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])


@dataclass(frozen=True)
class VoronoiFaces:
    """Faces between grains, one row per face: grain ``first`` meets the image of grain ``second``
    shifted by ``shift`` box lengths (all zeros in bounded boxes)."""

    first: np.ndarray  # [F] int64
    second: np.ndarray  # [F] int64
    shift: np.ndarray  # [F, 3] int64
    area: np.ndarray  # [F] float64


@dataclass(frozen=True)
class VoronoiCells:
    """Geometry of the Voronoi cells of G seeds."""

    volume: np.ndarray  # [G]
    surface_area: np.ndarray  # [G] all faces, box walls included (bounded boxes)
    wall_area: np.ndarray  # [G] area on the box walls (zeros for periodic boxes)
    centroid: np.ndarray  # [G, 3] cell centroid, not wrapped (lies near its seed)
    faces: VoronoiFaces


@dataclass(frozen=True)
class _Padded:
    points: np.ndarray  # [P, 3], the G seeds first
    source: np.ndarray  # [P] index of the seed each point is a copy of
    image: np.ndarray  # [P, 3] int64 periodic image (periodic boxes)
    is_mirror: np.ndarray  # [P] bool (bounded boxes)


def validate_seeds(seeds: np.ndarray, box: np.ndarray | float, periodic: bool, name: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Check seeds [G, 3] and box lengths; return them as float64 arrays or raise MicrostructureError."""
    s = np.asarray(seeds, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != 3:
        raise MicrostructureError(f"{name}: seeds must be [G, 3], got shape {s.shape}")
    if s.shape[0] < 2:
        raise MicrostructureError(f"{name}: too few seeds ({s.shape[0]}); need at least 2")
    b = np.broadcast_to(np.asarray(box, dtype=np.float64), (3,)).copy()
    if not np.isfinite(b).all() or (b <= 0).any():
        raise MicrostructureError(f"{name}: box lengths must be positive and finite, got {b.tolist()}")
    bad = np.flatnonzero(~np.isfinite(s).all(axis=1))
    if bad.size:
        raise MicrostructureError(f"{name}: seeds contain NaN or inf (seeds {bad[:10].tolist()})")
    if periodic:
        outside = np.flatnonzero(((s < 0) | (s > b)).any(axis=1))
        where = "outside the box [0, L]"
    else:
        outside = np.flatnonzero(((s <= 0) | (s >= b)).any(axis=1))
        where = "outside the open box (0, L) of a bounded tessellation"
    if outside.size:
        raise MicrostructureError(f"{name}: seeds {outside[:10].tolist()} lie {where}, L = {b.tolist()}")
    if periodic:
        s = np.where(s >= b, s - b, s)  # a seed at L is the seed at 0
    spacing = (np.prod(b) / len(s)) ** (1.0 / 3.0)
    tree = cKDTree(s, boxsize=b if periodic else None)
    pairs = tree.query_pairs(COINCIDENCE_TOLERANCE * spacing, output_type="ndarray")
    if len(pairs):
        shown = sorted(map(tuple, pairs.tolist()))[:10]
        raise MicrostructureError(f"{name}: coinciding seeds (index pairs {shown})")
    return s, b


def voronoi_cells(seeds: np.ndarray, box: np.ndarray | float, periodic: bool = True,
                  name: str = "sample", joggle: bool = False) -> VoronoiCells:
    """Voronoi cells of ``seeds`` [G, 3] in the orthorhombic box [0, box] (periodic or bounded).

    ``joggle=True`` forces Qhull's joggled input (``QJ``), which is otherwise used only when Qhull
    leaves points out of the triangulation; it costs ~1e-9 relative accuracy on degenerate input.
    """
    seeds, box = validate_seeds(seeds, box, periodic, name)
    count = len(seeds)
    spacing = float((np.prod(box) / count) ** (1.0 / 3.0))
    skin = INITIAL_SKIN * spacing
    options: str | None = _JOGGLE if joggle else None
    for _ in range(MAX_ATTEMPTS):
        padded = _pad_periodic(seeds, box, skin) if periodic else _pad_mirrored(seeds, box, skin)
        tri = Delaunay(padded.points, qhull_options=options)
        if tri.coplanar.size and options is None:
            options = _JOGGLE  # Qhull left points out (degenerate input)
            continue
        selected = np.flatnonzero((tri.simplices < count).any(axis=1))
        tets = tri.simplices[selected]
        centres, radius = _circumcentres(padded.points, tets, tri.equations[selected],
                                         float(tri.paraboloid_scale), spacing)
        overshoot = max(float((radius[:, None] - centres).max()),
                        float((centres + radius[:, None] - box).max()))
        on_hull = bool((tri.convex_hull < count).any())
        if overshoot <= skin and not on_hull:
            return _cells_from_delaunay(padded, tets, centres, count, spacing, periodic)
        skin = max(1.5 * skin, 1.05 * overshoot)
    raise MicrostructureError(f"{name}: Voronoi tessellation did not converge (skin {skin:g})")


def _pad_periodic(seeds: np.ndarray, box: np.ndarray, skin: float) -> _Padded:
    layers = np.ceil(skin / box).astype(int)
    grids = np.meshgrid(*[np.arange(-n, n + 1) for n in layers], indexing="ij")
    shifts = np.stack(grids, axis=-1).reshape(-1, 3)
    shifts = shifts[(shifts != 0).any(axis=1)]
    cand = seeds[None, :, :] + (shifts * box)[:, None, :]  # [S, G, 3]
    inside = ((cand >= -skin) & (cand <= box + skin)).all(axis=2)
    which_shift, which_seed = np.nonzero(inside)
    count = len(seeds)
    return _Padded(
        points=np.concatenate([seeds, cand[which_shift, which_seed]]),
        source=np.concatenate([np.arange(count), which_seed]),
        image=np.concatenate([np.zeros((count, 3), dtype=np.int64), shifts[which_shift].astype(np.int64)]),
        is_mirror=np.zeros(count + len(which_seed), dtype=bool),
    )


def _pad_mirrored(seeds: np.ndarray, box: np.ndarray, skin: float) -> _Padded:
    points, source = [seeds], [np.arange(len(seeds))]
    for axis in range(3):
        for wall in (0.0, box[axis]):
            near = np.flatnonzero(np.abs(seeds[:, axis] - wall) <= skin)
            mirrored = seeds[near].copy()
            mirrored[:, axis] = 2.0 * wall - mirrored[:, axis]
            points.append(mirrored)
            source.append(near)
    pts = np.concatenate(points)
    is_mirror = np.zeros(len(pts), dtype=bool)
    is_mirror[len(seeds):] = True
    return _Padded(pts, np.concatenate(source), np.zeros((len(pts), 3), dtype=np.int64), is_mirror)


def _circumcentres(points: np.ndarray, tets: np.ndarray, equations: np.ndarray, scale: float,
                   spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """Circumcentres [T, 3] and radii [T] of tetrahedra ``tets``; ``equations`` are their rows of
    ``Delaunay.equations`` and ``scale`` its ``paraboloid_scale``."""
    p0 = points[tets[:, 0]]
    a, b, c = (points[tets[:, k]] - p0 for k in (1, 2, 3))
    bc, ca, ab = np.cross(b, c), np.cross(c, a), np.cross(a, b)
    det = np.einsum("ij,ij->i", a, bc)
    flat = np.abs(det) <= FLAT_TOLERANCE * spacing**3
    num = ((a * a).sum(1)[:, None] * bc + (b * b).sum(1)[:, None] * ca + (c * c).sum(1)[:, None] * ab)
    safe = np.where(flat, 1.0, det)
    centre = p0 + num / (2.0 * safe[:, None])
    if flat.any():
        # all sub-simplices of a (merged, cospherical) Qhull facet share its lifted hyperplane
        # n . (x, scale*|x|^2 + shift) + offset = 0, whose sphere centre is -n_x / (2 n_w scale)
        eq = equations[flat]
        centre[flat] = -eq[:, :3] / (2.0 * eq[:, 3:4] * scale)
    radius = np.linalg.norm(centre - p0, axis=1)
    return centre, radius


def _cells_from_delaunay(padded: _Padded, tets: np.ndarray, centres: np.ndarray, count: int,
                         spacing: float, periodic: bool) -> VoronoiCells:
    pts = padded.points
    # directed Delaunay edges (u original seed -> v padded point), one entry per tetrahedron around it
    a = tets[:, _EDGES_OF_TET[:, 0]].ravel()
    b = tets[:, _EDGES_OF_TET[:, 1]].ravel()
    tet_of = np.repeat(np.arange(len(tets)), 6)
    from_a, from_b = a < count, b < count
    u = np.concatenate([a[from_a], b[from_b]])
    v = np.concatenate([b[from_a], a[from_b]])
    ring_tet = np.concatenate([tet_of[from_a], tet_of[from_b]])
    # keep one direction per face: the one starting at the smaller seed index (periodic self-faces:
    # the image with lexicographically positive shift); bounded walls only have one direction
    if periodic:
        sv = padded.source[v]
        img = padded.image[v]
        first_nonzero = np.where(img[:, 0] != 0, img[:, 0], np.where(img[:, 1] != 0, img[:, 1], img[:, 2]))
        keep = (u < sv) | ((u == sv) & (first_nonzero > 0))
    else:
        keep = padded.is_mirror[v] | (u < v)
    u, v, ring_tet = u[keep], v[keep], ring_tet[keep]

    # group ring entries by face, then order each ring by angle in its bisector plane
    key = u.astype(np.int64) * len(pts) + v
    order = np.argsort(key, kind="stable")
    key, u, v, ring_tet = key[order], u[order], v[order], ring_tet[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    face_of = np.cumsum(np.r_[False, key[1:] != key[:-1]])
    sizes = np.diff(np.r_[starts, len(key)])
    fu, fv = u[starts], v[starts]
    ring = centres[ring_tet]
    mean = np.add.reduceat(ring, starts, axis=0) / sizes[:, None]
    normal = pts[fv] - pts[fu]
    seed_distance = np.linalg.norm(normal, axis=1)
    normal /= seed_distance[:, None]
    helper = np.eye(3)[np.argmin(np.abs(normal), axis=1)]
    e1 = np.cross(normal, helper)
    e1 /= np.linalg.norm(e1, axis=1)[:, None]
    e2 = np.cross(normal, e1)
    rel = ring - mean[face_of]
    angle = np.arctan2((rel * e2[face_of]).sum(1), (rel * e1[face_of]).sum(1))
    order = np.lexsort((angle, face_of))
    rel = rel[order]
    nxt = np.arange(1, len(rel) + 1)
    nxt[starts + sizes - 1] = starts
    tri_area = 0.5 * (np.cross(rel, rel[nxt]) * normal[face_of]).sum(1)
    area = np.add.reduceat(tri_area, starts)
    moment = np.add.reduceat(tri_area[:, None] * (rel + rel[nxt]) / 3.0, starts, axis=0)

    ok = area > AREA_TOLERANCE * spacing**2
    fu, fv, area, seed_distance = fu[ok], fv[ok], area[ok], seed_distance[ok]
    face_centroid = mean[ok] + moment[ok] / area[:, None]
    pyramid = area * seed_distance / 6.0  # area * (distance / 2) / 3

    # each face closes the cell of u and (unless it is a wall) the cell of the seed behind v
    grain_side = ~padded.is_mirror[fv]
    sv = padded.source[fv]
    owner = np.concatenate([fu, sv[grain_side]])
    apex = np.concatenate([pts[fu], pts[fv[grain_side]]])
    back = np.concatenate([np.zeros_like(pts[fu]), pts[fv[grain_side]] - pts[sv[grain_side]]])
    base = np.concatenate([face_centroid, face_centroid[grain_side]])
    weight = np.concatenate([pyramid, pyramid[grain_side]])
    face_area = np.concatenate([area, area[grain_side]])
    pyramid_centre = apex + 0.75 * (base - apex) - back
    volume = np.bincount(owner, weights=weight, minlength=count)
    centroid = np.stack([np.bincount(owner, weights=weight * pyramid_centre[:, k], minlength=count)
                         for k in range(3)], axis=1) / volume[:, None]
    surface = np.bincount(owner, weights=face_area, minlength=count)
    wall = np.bincount(fu[~grain_side], weights=area[~grain_side], minlength=count)
    faces = VoronoiFaces(
        first=fu[grain_side].astype(np.int64),
        second=sv[grain_side].astype(np.int64),
        shift=padded.image[fv[grain_side]].astype(np.int64),
        area=area[grain_side],
    )
    return VoronoiCells(volume=volume, surface_area=surface, wall_area=wall, centroid=centroid, faces=faces)
