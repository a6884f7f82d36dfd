"""Tests of the mesoscale grain builders: Voronoi geometry, voxel maps, orientations, bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.spatial import Delaunay, cKDTree

from graph_builders.mesoscale import (
    EDGE_FEATURES,
    GRAIN_FEATURES,
    MicrostructureError,
    cubic_symmetry_quaternions,
    euler_to_quaternion,
    grains_to_graph,
    misorientation_angle,
    quaternion_multiply,
    quaternion_to_matrix,
    random_quaternions,
    voronoi_cells,
    voxels_to_graph,
)
from graph_builders.mesoscale.orientation import rotation_vector_to_quaternion
from graph_builders.schema import edge_vectors, validate_graph

BOX = np.array([6.0, 7.0, 5.5])


def random_seeds(count: int, box: np.ndarray, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((count, 3)) * box


def lattice(n: int) -> np.ndarray:
    return np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing="ij"), -1).reshape(-1, 3) + 0.5


def edge_set(data) -> set[tuple[int, int]]:
    return set(map(tuple, data.edge_index.T.tolist()))


def periodic_delaunay_faces(seeds: np.ndarray, box: np.ndarray) -> set[tuple[int, int, int, int, int]]:
    """Independent reference: Delaunay of the 27 periodic copies; (i, j, shift of j) for edges from
    an original seed i, each periodic face listed from both sides."""
    count = len(seeds)
    shifts = np.array(list(itertools.product((0, -1, 1), repeat=3)))  # (0, 0, 0) first
    points = (seeds[None] + (shifts * box)[:, None]).reshape(-1, 3)
    tri = Delaunay(points)
    faces = set()
    for simplex in tri.simplices[(tri.simplices < count).any(axis=1)]:
        for a, b in itertools.permutations(simplex.tolist(), 2):
            if a < count:
                shift = shifts[b // count]
                faces.add((a, b % count, *shift.tolist()))
    return faces


# ----------------------------------------------------------------------------------- Voronoi geometry
@pytest.mark.parametrize("periodic", [True, False])
def test_volumes_sum_to_box_volume(periodic):
    seeds = random_seeds(300, BOX, 1)
    cells = voronoi_cells(seeds, BOX, periodic=periodic)
    assert cells.volume.min() > 0
    assert abs(cells.volume.sum() / np.prod(BOX) - 1.0) < 1e-9
    walls = 2 * (BOX[0] * BOX[1] + BOX[1] * BOX[2] + BOX[0] * BOX[2])
    if periodic:
        assert cells.wall_area.sum() == 0.0
    else:
        assert abs(cells.wall_area.sum() / walls - 1.0) < 1e-9
    # surface area = both sides of every grain face + the walls
    assert cells.surface_area.sum() == pytest.approx(2 * cells.faces.area.sum() + cells.wall_area.sum(),
                                                     rel=1e-12)


def test_face_triples_equal_periodic_delaunay_adjacency():
    seeds = random_seeds(120, BOX, 2)
    cells = voronoi_cells(seeds, BOX, periodic=True)
    f = cells.faces
    ours = {(int(i), int(j), *s.tolist()) for i, j, s in zip(f.first, f.second, f.shift)}
    ours |= {(int(j), int(i), *(-s).tolist()) for i, j, s in zip(f.first, f.second, f.shift)}
    assert ours == periodic_delaunay_faces(seeds, BOX)


def test_graph_edges_equal_delaunay_pairs_and_are_symmetric():
    seeds = random_seeds(150, BOX, 3)
    data = grains_to_graph(seeds, BOX, orientations=random_quaternions(150, np.random.default_rng(0)),
                           name="sym")
    validate_graph(data, name="sym")
    pairs = edge_set(data)
    reference = {(j, i) for i, j, *_ in periodic_delaunay_faces(seeds, BOX)}
    assert pairs == reference
    assert pairs == {(i, j) for j, i in pairs}
    # the reverse edge carries the same area/misorientation, the opposite vector and shift
    e = data.edge_index.shape[1] // 2
    assert torch.equal(data.edge_index[:, :e], data.edge_index[:, e:].flip(0))
    assert torch.equal(data.edge_attr[:e, [0, 4]], data.edge_attr[e:, [0, 4]])
    assert torch.equal(data.edge_attr[:e, 1:4], -data.edge_attr[e:, 1:4])
    assert torch.equal(data.edge_shift[:e], -data.edge_shift[e:])
    # face count column = node degree
    degree = torch.bincount(data.edge_index[1], minlength=150).float()
    assert torch.equal(data.x[:, GRAIN_FEATURES.index("face_count")], degree)


def test_periodic_graph_fields_and_minimum_image_vectors():
    seeds = random_seeds(200, BOX, 4)
    data = grains_to_graph(seeds, BOX, name="pbc")
    assert data.x.shape == (200, len(GRAIN_FEATURES)) and data.edge_attr.shape[1] == len(EDGE_FEATURES)
    assert torch.equal(data.cell, torch.tensor(np.diag(BOX)[None], dtype=torch.float32))
    assert data.pbc.tolist() == [[True, True, True]]
    assert bool((data.pos >= 0).all()) and bool((data.pos < torch.tensor(BOX, dtype=torch.float32)).all())
    vec = edge_vectors(data)
    assert torch.allclose(vec, data.edge_attr[:, 1:4], atol=1e-5)
    j, i = data.edge_index
    delta = (data.pos[j] - data.pos[i]).double().numpy()
    min_image = delta - BOX * np.round(delta / BOX)
    assert np.allclose(min_image, data.edge_attr[:, 1:4].double().numpy(), atol=1e-5)
    assert torch.equal(data.edge_shift, data.edge_shift.round())
    # pos = centroid of the Voronoi cell (float64 reference), wrapped into the box
    cells = voronoi_cells(seeds, BOX)
    assert np.allclose(np.mod(cells.centroid, BOX), data.pos.double().numpy(), atol=1e-5)
    assert np.allclose(data.x[:, 0].double().numpy(), cells.volume, rtol=1e-6)
    assert data.name == "pbc"


def test_bounded_graph_has_no_shifts_and_clips_at_walls():
    seeds = random_seeds(100, BOX, 5)
    data = grains_to_graph(seeds, BOX, periodic=False, name="bounded")
    assert data.pbc.tolist() == [[False, False, False]]
    assert float(data.edge_shift.abs().sum()) == 0.0
    assert torch.allclose(data.edge_attr[:, 1:4], edge_vectors(data), atol=1e-6)
    assert abs(float(data.x[:, 0].double().sum()) / np.prod(BOX) - 1.0) < 1e-6
    # bounded adjacency = Delaunay of seeds + their mirrors, restricted to seed pairs
    mirrors = [seeds]
    for axis in range(3):
        for wall in (0.0, BOX[axis]):
            m = seeds.copy()
            m[:, axis] = 2 * wall - m[:, axis]
            mirrors.append(m)
    tri = Delaunay(np.concatenate(mirrors))
    reference = {(a, b) for s in tri.simplices for a, b in itertools.permutations(s.tolist(), 2)
                 if a < 100 and b < 100}
    assert edge_set(data) == reference


@pytest.mark.parametrize("periodic", [True, False])
def test_exact_cubic_lattice_is_degenerate_but_exact(periodic):
    cells = voronoi_cells(lattice(4), 4.0, periodic=periodic)
    assert np.allclose(cells.volume, 1.0, atol=1e-12)
    faces = np.bincount(np.r_[cells.faces.first, cells.faces.second], minlength=64)
    # zero-area faces of cospherical seeds are dropped: 6 faces per interior cube
    assert np.allclose(cells.faces.area, 1.0, atol=1e-12)
    if periodic:
        assert (faces == 6).all()
    else:
        corner = [0, 3, 12, 15, 48, 51, 60, 63]
        assert (faces[corner] == 3).all() and faces.sum() == 2 * 3 * 4 * 4 * 3


@pytest.mark.parametrize("periodic", [True, False])
def test_joggled_fallback_on_exact_lattice(periodic):
    cells = voronoi_cells(lattice(4), 4.0, periodic=periodic, joggle=True)
    assert np.allclose(cells.volume, 1.0, atol=1e-8)
    assert np.allclose(cells.faces.area, 1.0, atol=1e-8)
    assert len(cells.faces.area) == (192 if periodic else 144)


def test_perturbed_cubic_lattice_face_areas():
    seeds = lattice(5) + np.random.default_rng(6).uniform(-1e-3, 1e-3, (125, 3))
    data = grains_to_graph(seeds, 5.0, name="lattice")
    area = data.edge_attr[:, 0].double().numpy()
    big = area > 0.5
    # each cell keeps its 6 cube faces of area ~1; any extra faces from the perturbation are tiny
    assert np.abs(area[big] - 1.0).max() < 0.02
    assert (~big).sum() == 0 or area[~big].max() < 1e-2
    assert (np.bincount(data.edge_index[1].numpy()[big], minlength=125) == 6).all()
    assert np.allclose(data.x[:, 0].numpy(), 1.0, atol=0.01)
    assert np.allclose(data.x[:, 1].numpy(), 6.0, atol=0.05)


def test_small_periodic_box_with_self_faces():
    """Two seeds in a periodic box: cells touch their own images; volumes still exact."""
    seeds = np.array([[0.2, 0.3, 0.4], [0.7, 0.6, 0.9]])
    cells = voronoi_cells(seeds, 1.0, periodic=True)
    assert abs(cells.volume.sum() - 1.0) < 1e-12
    data = grains_to_graph(seeds, 1.0, name="tiny")
    assert torch.allclose(edge_vectors(data), data.edge_attr[:, 1:4], atol=1e-6)
    assert (cells.faces.first == cells.faces.second).any()


# ----------------------------------------------------------------------------------------- voxels
def nearest_seed_map(seeds: np.ndarray, box: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    size = box / n
    centres = (np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing="ij"), -1).reshape(-1, 3) + 0.5) * size
    _, label = cKDTree(seeds, boxsize=box).query(centres)
    return label.reshape(n, n, n), size


def test_voxel_map_of_nearest_seeds_matches_voronoi():
    box = np.array([4.0, 4.0, 4.0])
    seeds = random_seeds(40, box, 7)
    labels, size = nearest_seed_map(seeds, box, 48)
    quats = random_quaternions(40, np.random.default_rng(1))
    vox = voxels_to_graph(labels, orientations=quats, voxel_size=size, periodic=True, name="vox")
    vor = grains_to_graph(seeds, box, orientations=quats, name="vor")
    validate_graph(vox, name="vox")
    # exact voxel-count volumes
    counts = np.bincount(labels.ravel(), minlength=40)
    assert np.array_equal(vox.x[:, 0].numpy(), (counts * np.prod(size)).astype(np.float32))
    assert vox.grain_label.tolist() == list(range(40))
    # adjacency: the same faces up to a few small ones that the voxel staircase gains or loses
    vox_pairs, vor_pairs = edge_set(vox), edge_set(vor)
    assert len(vox_pairs & vor_pairs) >= 0.9 * len(vor_pairs | vox_pairs)

    def areas(data):
        return {e: float(a) for e, a in zip(map(tuple, data.edge_index.T.tolist()), data.edge_attr[:, 0])}

    vor_area, vox_area = areas(vor), areas(vox)
    mean_area = np.mean(list(vor_area.values()))
    assert max(vor_area[e] for e in vor_pairs - vox_pairs) < 0.1 * mean_area
    assert max([vox_area[e] for e in vox_pairs - vor_pairs], default=0.0) < 0.1 * mean_area
    # centroids within a voxel or so; misorientations identical on shared faces
    delta = (vox.pos - vor.pos).double().numpy()
    delta -= box * np.round(delta / box)
    assert np.abs(delta).max() < 1.5 * size[0]
    assert torch.allclose(edge_vectors(vox), vox.edge_attr[:, 1:4], atol=1e-5)


def test_voxel_two_grain_slab_values():
    labels = np.zeros((4, 3, 2), dtype=np.int32)
    labels[2:] = 5
    orient = {0: [1.0, 0, 0, 0], 5: [np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)]}  # 45 deg about z
    data = voxels_to_graph(labels, orientations=orient, phases={0: 0, 5: 1}, voxel_size=0.5, name="slab")
    assert data.grain_label.tolist() == [0, 5]
    assert data.edge_index.tolist() == [[1, 0], [0, 1]]
    assert data.x[:, 0].tolist() == [1.5, 1.5]  # 12 voxels * 0.125
    # shared face 3 x 2 voxel faces of 0.25; each grain: 2*(1*1.5) + 2*(1*1) + 1*1.5 (outer) + 1.5 shared
    assert data.edge_attr[:, 0].tolist() == [1.5, 1.5]
    assert data.x[:, 1].tolist() == [8.0, 8.0]
    assert data.x[:, 7].tolist() == [0.0, 1.0]
    assert data.edge_attr[0, 1:4].tolist() == [1.0, 0.0, 0.0]
    assert float(data.edge_attr[0, 4]) == pytest.approx(np.pi / 4, abs=1e-6)
    # periodic: a second shared face across the boundary doubles the area, and there is no outer surface
    periodic = voxels_to_graph(labels, voxel_size=0.5, periodic=True, name="slab")
    assert periodic.edge_attr[:, 0].tolist() == [3.0, 3.0]
    assert periodic.x[:, 1].tolist() == [3.0, 3.0]


def test_voxel_periodic_centroid_of_wrapped_grain():
    labels = np.zeros((10, 4, 4), dtype=np.int64)
    labels[[0, 1, 8, 9]] = 1  # grain 1 spans the x boundary: centroid at x = 0
    data = voxels_to_graph(labels, periodic=True)
    assert data.pos[1].tolist() == pytest.approx([0.0, 2.0, 2.0], abs=1e-6) or \
        data.pos[1].tolist() == pytest.approx([10.0, 2.0, 2.0], abs=1e-6)
    assert data.pos[0].tolist() == pytest.approx([5.0, 2.0, 2.0], abs=1e-6)


# ----------------------------------------------------------------------------------- orientations
def test_euler_angles_match_bunge_rotation_matrix():
    euler = np.random.default_rng(8).uniform([0, 0, 0], [2 * np.pi, np.pi, 2 * np.pi], (30, 3))

    def rz(a):
        return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])

    def rx(a):
        return np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])

    expected = np.array([rz(p1) @ rx(big) @ rz(p2) for p1, big, p2 in euler])
    assert np.allclose(quaternion_to_matrix(euler_to_quaternion(euler)), expected, atol=1e-12)
    seeds = random_seeds(30, BOX, 9)
    by_euler = grains_to_graph(seeds, BOX, orientations=euler, name="e")
    by_quat = grains_to_graph(seeds, BOX, orientations=euler_to_quaternion(euler), name="q")
    assert torch.equal(by_euler.x, by_quat.x)


def test_cubic_symmetry_group():
    sym = cubic_symmetry_quaternions()
    assert sym.shape == (24, 4)
    assert np.allclose(sym[0], [1, 0, 0, 0])
    mats = quaternion_to_matrix(sym)
    # every matrix is a signed permutation, all distinct
    assert np.allclose(np.abs(mats).sum(axis=2), 1.0)
    assert len({tuple(np.round(m).astype(int).ravel()) for m in mats}) == 24


def test_misorientation_values():
    rng = np.random.default_rng(10)
    q = random_quaternions(50, rng)
    assert np.allclose(misorientation_angle(q, q), 0.0, atol=1e-6)
    sym = cubic_symmetry_quaternions()
    for s in sym:  # symmetric-equivalent orientations
        assert np.allclose(misorientation_angle(q, quaternion_multiply(q, s)), 0.0, atol=1e-6)
    axis111 = np.ones(3) / np.sqrt(3)
    twin = quaternion_multiply(q, rotation_vector_to_quaternion(np.deg2rad(60.0) * axis111))
    assert np.allclose(np.rad2deg(misorientation_angle(q, twin)), 60.0, atol=1e-5)
    # 50 deg about <100> is 40 deg after the 90 deg symmetry; symmetric in its arguments
    rot50 = quaternion_multiply(q, rotation_vector_to_quaternion(np.deg2rad(50.0) * np.array([0, 0, 1.0])))
    assert np.allclose(np.rad2deg(misorientation_angle(q, rot50)), 40.0, atol=1e-5)
    assert np.allclose(misorientation_angle(rot50, q), misorientation_angle(q, rot50))
    # the cubic maximum is 62.8 deg
    angles = np.rad2deg(misorientation_angle(random_quaternions(4000, rng), random_quaternions(4000, rng)))
    assert angles.max() <= 62.81 and angles.max() > 55.0


def test_quaternions_near_unit_are_normalised():
    q = np.tile([1.0, 0.0, 0.0, 0.0], (20, 1)) * 1.001
    q[3] = [-0.5, 0.5, 0.5, 0.5]  # w < 0 is flipped to the same rotation with w >= 0
    data = grains_to_graph(random_seeds(20, BOX, 11), BOX, orientations=q, name="n")
    assert torch.allclose(data.x[:, 3:7].norm(dim=1), torch.ones(20))
    assert data.x[3, 3:7].tolist() == [0.5, -0.5, -0.5, -0.5]


def test_targets_are_attached_with_schema_shapes():
    data = grains_to_graph(random_seeds(10, BOX, 12), BOX, name="t",
                           targets={"energy": 1.5, "per_grain": np.arange(10.0), "vec": [1.0, 2.0, 3.0]})
    assert data.y_energy.tolist() == [[1.5]]
    assert data.y_per_grain.shape == (10, 1) and data.y_per_grain[9, 0] == 9.0
    assert data.y_vec.tolist() == [[1.0, 2.0, 3.0]]


# ------------------------------------------------------------------------------------- bad input
def seeds_with(row: int, value) -> np.ndarray:
    seeds = random_seeds(10, BOX, 13)
    seeds[row] = value
    return seeds


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seeds": seeds_with(4, random_seeds(10, BOX, 13)[1])},
         r"sample-7: coinciding seeds \(index pairs \[\(1, 4\)\]\)"),
        ({"seeds": seeds_with(2, [1.0, -0.5, 1.0])}, r"sample-7: seeds \[2\] lie outside the box"),
        ({"seeds": seeds_with(3, [1.0, np.nan, 1.0])}, r"sample-7: seeds contain NaN or inf \(seeds \[3\]\)"),
        ({"seeds": random_seeds(1, BOX, 0)}, r"sample-7: too few seeds \(1\)"),
        ({"box": [6.0, 0.0, 5.5]}, r"sample-7: box lengths must be positive"),
        ({"seeds": np.zeros((10, 2))}, r"sample-7: seeds must be \[G, 3\]"),
        ({"orientations": np.tile([2.0, 0, 0, 0], (10, 1))},
         r"sample-7: non-unit quaternions \(rows \[0, 1,"),
        ({"orientations": np.zeros((10, 4))}, r"sample-7: zero quaternions \(rows \[0, 1,"),
        ({"orientations": np.zeros((9, 4))}, r"sample-7: orientations must be \[10, 4\]"),
        ({"orientations": np.full((10, 3), np.nan)}, r"sample-7: orientations contain NaN"),
        ({"phases": np.zeros(3, dtype=int)}, r"sample-7: phases must have shape \(10,\)"),
        ({"periodic": False, "seeds": seeds_with(0, [0.0, 1.0, 1.0])},
         r"sample-7: seeds \[0\] lie outside the open box"),
        ({"targets": {"bad": [np.nan]}}, r"sample-7: target 'bad' contains NaN"),
    ],
)
def test_bad_grain_input_names_sample_and_problem(kwargs, message):
    args = {"seeds": random_seeds(10, BOX, 13), "box": BOX}
    args.update(kwargs)
    with pytest.raises(MicrostructureError, match=message):
        grains_to_graph(**args, name="sample-7")


@pytest.mark.parametrize(
    ("labels", "kwargs", "message"),
    [
        (np.zeros((0, 3, 3), dtype=int), {}, r"map-3: empty label map"),
        (np.zeros((3, 3), dtype=int), {}, r"map-3: label map must be 3-D"),
        (np.full((2, 2, 2), 0.5), {}, r"map-3: label map must hold integers"),
        (np.full((2, 2, 2), -1), {}, r"map-3: label map has negative labels"),
        (np.arange(8).reshape(2, 2, 2), {"orientations": np.tile([1.0, 0, 0, 0], (6, 1))},
         r"map-3: orientations missing for labels \[6, 7\]"),
        (np.arange(8).reshape(2, 2, 2), {"orientations": {0: [1.0, 0, 0, 0]}},
         r"map-3: orientations missing for labels \[1, 2, 3"),
        (np.arange(8).reshape(2, 2, 2), {"voxel_size": -1.0}, r"map-3: voxel_size must be positive"),
    ],
)
def test_bad_voxel_input_names_sample_and_problem(labels, kwargs, message):
    with pytest.raises(MicrostructureError, match=message):
        voxels_to_graph(labels, name="map-3", **kwargs)


def test_microstructure_error_is_a_value_error():
    assert issubclass(MicrostructureError, ValueError)
