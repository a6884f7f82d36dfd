"""Continuum builder: element edge sets, attributes, file and scikit-fem inputs, bad input."""

from __future__ import annotations

import math
from pathlib import Path

import meshio
import numpy as np
import pytest
import skfem
import torch
from scipy.spatial import Delaunay
from skfem.io.meshio import to_meshio
from torch_geometric.data import Data
from torch_geometric.transforms import FaceToEdge

from graph_builders.continuum import MeshError, mesh_to_graph, unique_element_edges
from graph_builders.continuum._elements import LINEAR_ELEMENTS
from graph_builders.schema import HeadRegistry, HeadSpec, edge_vectors, validate_graph


def directed_edges(data: Data) -> set[tuple[int, int]]:
    return set(map(tuple, data.edge_index.t().tolist()))


def undirected_edges(data: Data) -> set[tuple[int, int]]:
    return {(min(a, b), max(a, b)) for a, b in data.edge_index.t().tolist()}


def face_to_edge_set(cells: np.ndarray, num_nodes: int) -> set[tuple[int, int]]:
    data = Data(face=torch.from_numpy(np.ascontiguousarray(cells.T)).long(), num_nodes=num_nodes)
    return set(map(tuple, FaceToEdge()(data).edge_index.t().tolist()))


def assert_each_edge_once_per_direction(data: Data) -> None:
    count = data.edge_index.shape[1]
    assert len(directed_edges(data)) == count
    assert 2 * len(undirected_edges(data)) == count
    assert not (data.edge_index[0] == data.edge_index[1]).any()


def cube_corners(offset: float = 0.0) -> np.ndarray:
    return np.array(
        [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]],
        dtype=float,
    ) + [offset, 0, 0]


# --- edge sets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["skfem", "delaunay"])
def test_triangle_edges_equal_face_to_edge(kind: str) -> None:
    if kind == "skfem":
        mesh = skfem.MeshTri().refined(4)
        points, cells = mesh.p.T, mesh.t.T
    else:
        points = np.random.default_rng(1).uniform(size=(400, 2))
        cells = Delaunay(points).simplices
    data = mesh_to_graph(meshio.Mesh(points, [("triangle", cells)]))
    assert directed_edges(data) == face_to_edge_set(cells, len(points))
    assert_each_edge_once_per_direction(data)


@pytest.mark.parametrize("kind", ["skfem", "delaunay"])
def test_tetra_edges_equal_face_to_edge(kind: str) -> None:
    if kind == "skfem":
        mesh = skfem.MeshTet().refined(2)
        points, cells = mesh.p.T, mesh.t.T
    else:
        points = np.random.default_rng(2).uniform(size=(300, 3))
        cells = Delaunay(points).simplices
    data = mesh_to_graph(meshio.Mesh(points, [("tetra", cells)]))
    # PyG 2.8's FaceToEdge takes a [4, T] tetrahedron index as "face"
    assert directed_edges(data) == face_to_edge_set(cells, len(points))
    assert_each_edge_once_per_direction(data)


def test_isolated_quads_have_four_edges_and_no_diagonals() -> None:
    points = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [3, 0], [4, 0], [4, 1], [3, 1]], dtype=float)
    data = mesh_to_graph(meshio.Mesh(points, [("quad", np.array([[0, 1, 2, 3], [4, 5, 6, 7]]))]))
    assert undirected_edges(data) == {(0, 1), (1, 2), (2, 3), (0, 3), (4, 5), (5, 6), (6, 7), (4, 7)}
    assert data.edge_index.shape == (2, 16)
    assert (0, 2) not in undirected_edges(data) and (1, 3) not in undirected_edges(data)
    assert torch.equal(data.pos[:, 2], torch.zeros(8))  # 2-D mesh: z = 0


def test_isolated_hexahedra_have_twelve_edges_each() -> None:
    points = np.concatenate([cube_corners(), cube_corners(offset=2.0)])
    data = mesh_to_graph(meshio.Mesh(points, [("hexahedron", np.arange(16).reshape(2, 8))]))
    expected = {
        (0, 1), (1, 2), (2, 3), (0, 3), (4, 5), (5, 6), (6, 7), (4, 7), (0, 4), (1, 5), (2, 6), (3, 7)
    }
    assert undirected_edges(data) == expected | {(a + 8, b + 8) for a, b in expected}
    assert data.edge_index.shape == (2, 48)
    assert data.edge_attr[:, 3].max().item() == pytest.approx(1.0)  # no face or body diagonals


def test_wedge_and_pyramid_edges() -> None:
    wedge_points = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [0, 1, 1]], float)
    wedge = mesh_to_graph(meshio.Mesh(wedge_points, [("wedge", np.arange(6)[None])]))
    assert undirected_edges(wedge) == {
        (0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (0, 3), (1, 4), (2, 5)
    }
    pyramid_points = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0.5, 0.5, 1]], float)
    pyramid = mesh_to_graph(meshio.Mesh(pyramid_points, [("pyramid", np.arange(5)[None])]))
    assert undirected_edges(pyramid) == {
        (0, 1), (1, 2), (2, 3), (0, 3), (0, 4), (1, 4), (2, 4), (3, 4)
    }


def test_mixed_mesh_with_lines_and_vertices() -> None:
    points = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [2, 0.5], [3, 0.5]], dtype=float)
    mesh = meshio.Mesh(
        points,
        [
            ("quad", np.array([[0, 1, 2, 3]])),
            ("triangle", np.array([[1, 4, 2]])),
            ("line", np.array([[4, 5], [0, 1]])),  # 0-1 repeats a quad edge
            ("vertex", np.array([[5]])),  # ignored
        ],
    )
    data = mesh_to_graph(mesh)
    assert undirected_edges(data) == {(0, 1), (1, 2), (2, 3), (0, 3), (1, 4), (2, 4), (4, 5)}
    assert_each_edge_once_per_direction(data)


def test_unique_element_edges_is_sorted_upper_pairs() -> None:
    cells = np.array([[2, 1, 0], [0, 2, 3]])
    edges = unique_element_edges([(LINEAR_ELEMENTS["triangle"], cells)], num_points=4)
    assert edges.tolist() == [[0, 0, 0, 1, 2], [1, 2, 3, 2, 3]]


# --- attributes, features, targets ------------------------------------------------------------


def test_edge_attr_is_vector_and_length_and_matches_schema() -> None:
    mesh = skfem.MeshTet().refined(1)
    data = mesh_to_graph(mesh)
    j, i = data.edge_index
    expected_vec = data.pos[j] - data.pos[i]
    assert torch.allclose(data.edge_attr[:, :3], expected_vec, atol=1e-6)
    assert torch.allclose(data.edge_attr[:, :3], edge_vectors(data), atol=1e-6)
    assert torch.allclose(data.edge_attr[:, 3], expected_vec.norm(dim=1), atol=1e-6)
    assert data.edge_attr.dtype == torch.float32 and data.pos.dtype == torch.float32
    assert data.edge_index.dtype == torch.long
    assert torch.equal(data.x, torch.ones(mesh.nvertices, 1))


def test_features_and_targets_follow_the_schema() -> None:
    mesh = skfem.MeshTri().refined(2)
    n = mesh.nvertices
    point_data = {"a": np.arange(n, dtype=float), "b": np.stack([np.ones(n), 2 * np.ones(n)], 1),
                  "t": mesh.p[0] ** 2}
    data = mesh_to_graph(
        meshio.Mesh(mesh.p.T, [("triangle", mesh.t.T)], point_data=point_data),
        features=["b", "a"],
        targets={"temp": "t", "total": 3.5, "vec": [1.0, 2.0]},
        name="sample_7",
    )
    assert data.x.shape == (n, 3)
    assert torch.equal(data.x[:, 0], torch.ones(n)) and torch.equal(data.x[:, 1], 2 * torch.ones(n))
    assert torch.equal(data.x[:, 2], torch.arange(n, dtype=torch.float32))
    assert torch.allclose(data.y_temp[:, 0], torch.from_numpy(mesh.p[0] ** 2).float())
    assert data.y_total.tolist() == [[3.5]] and data.y_vec.tolist() == [[1.0, 2.0]]
    assert data.name == "sample_7"
    heads = HeadRegistry.of([HeadSpec("temp", "node", 1), HeadSpec("total", "graph", 1),
                             HeadSpec("vec", "graph", 2)])
    validate_graph(data, heads, data.name)


def test_unused_points_are_dropped_and_renumbered_or_kept() -> None:
    points = np.array([[0, 0], [9, 9], [1, 0], [0, 1], [1, 1]], dtype=float)  # point 1 is stray
    mesh = meshio.Mesh(points, [("triangle", np.array([[0, 2, 3], [2, 4, 3]]))],
                       point_data={"id": np.arange(5.0)})
    data = mesh_to_graph(mesh, features=["id"], targets={"id": "id"})
    assert data.pos[:, :2].tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]
    assert data.x[:, 0].tolist() == [0, 2, 3, 4] and data.y_id[:, 0].tolist() == [0, 2, 3, 4]
    assert undirected_edges(data) == {(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)}
    kept = mesh_to_graph(mesh, drop_unused_points=False)
    assert kept.pos.shape == (5, 3)
    assert undirected_edges(kept) == {(0, 2), (0, 3), (2, 3), (2, 4), (3, 4)}  # node 1 isolated


# --- inputs: files and scikit-fem --------------------------------------------------------------


def test_vtu_round_trip_of_a_mixed_mesh(tmp_path: Path) -> None:
    points = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [2, 0.5, 0]], dtype=float)
    mesh = meshio.Mesh(points, [("quad", np.array([[0, 1, 2, 3]])), ("triangle", np.array([[1, 4, 2]]))],
                       point_data={"a": np.arange(5.0), "v": np.arange(10.0).reshape(5, 2)})
    path = tmp_path / "mixed.vtu"
    meshio.write(path, mesh)
    from_file = mesh_to_graph(path, features=["v", "a"])
    from_object = mesh_to_graph(mesh, features=["v", "a"])
    assert from_file.name == str(path)
    for key in ("pos", "x", "edge_index", "edge_attr"):
        assert torch.equal(from_file[key], from_object[key]), key
    assert from_file.x[:, 2].tolist() == [0, 1, 2, 3, 4]


def test_binary_msh_round_trip_of_a_tet_mesh(tmp_path: Path) -> None:
    skmesh = skfem.MeshTet().refined(2)
    mesh = meshio.Mesh(skmesh.p.T, [("tetra", skmesh.t.T)], point_data={"u": skmesh.p[2]})
    path = tmp_path / "cube.msh"
    meshio.write(path, mesh, file_format="gmsh", binary=True)
    from_file = mesh_to_graph(str(path), features=["u"], targets={"u": "u"})
    from_object = mesh_to_graph(mesh, features=["u"], targets={"u": "u"})
    for key in ("pos", "x", "edge_index", "edge_attr", "y_u"):
        assert torch.equal(from_file[key], from_object[key]), key


@pytest.mark.parametrize(
    "mesh",
    [skfem.MeshTri().refined(2), skfem.MeshQuad().refined(2), skfem.MeshTet().refined(1),
     skfem.MeshHex().refined(2), skfem.MeshWedge1()],
    ids=["tri", "quad", "tet", "hex", "wedge"],
)
def test_skfem_input_equals_meshio_input_and_skfem_edges(mesh: skfem.Mesh) -> None:
    from_skfem = mesh_to_graph(mesh)
    from_meshio = mesh_to_graph(to_meshio(mesh))  # skfem's exporter reorders hexahedra to VTK
    for key in ("pos", "x", "edge_index", "edge_attr"):
        assert torch.equal(from_skfem[key], from_meshio[key]), key
    # scikit-fem's own edge list (facets in 2-D) is an independent reference
    reference = mesh.facets if mesh.dim() == 2 else mesh.edges
    assert undirected_edges(from_skfem) == {tuple(sorted(e)) for e in reference.T.tolist()}


@pytest.mark.parametrize(
    ("second", "first"),
    [(skfem.MeshTri2().refined(1), skfem.MeshTri().refined(1)), (skfem.MeshQuad2(), skfem.MeshQuad()),
     (skfem.MeshTet2(), skfem.MeshTet()), (skfem.MeshHex2(), skfem.MeshHex())],
    ids=["tri2", "quad2", "tet2", "hex2"],
)
def test_second_order_skfem_meshes_use_corner_vertices(second: skfem.Mesh, first: skfem.Mesh) -> None:
    data = mesh_to_graph(second)
    linear = mesh_to_graph(first)
    assert second.p.shape[1] > second.nvertices
    assert data.pos.shape == (second.nvertices, 3)  # edge/face/body nodes dropped
    assert torch.equal(data.pos, linear.pos)
    assert undirected_edges(data) == undirected_edges(linear)


def test_second_order_meshio_cells_use_corner_vertices() -> None:
    six = meshio.Mesh(
        np.array([[0, 0], [1, 0], [0, 1], [0.5, 0], [0.5, 0.5], [0, 0.5]], float),
        [("triangle6", np.arange(6)[None])],
    )
    assert undirected_edges(mesh_to_graph(six)) == {(0, 1), (1, 2), (0, 2)}


# --- bad input ----------------------------------------------------------------------------------

TRI_POINTS = np.array([[0, 0], [1, 0], [0, 1]], dtype=float)
TRI = [("triangle", np.array([[0, 1, 2]]))]


@pytest.mark.parametrize(
    ("mesh", "kwargs", "message"),
    [
        (meshio.Mesh(np.zeros((0, 3)), []), {}, "s1: mesh has no points"),
        (meshio.Mesh(TRI_POINTS, [("vertex", np.array([[0]]))]), {},
         "s1: mesh has no cells with edges (cell types present: ['vertex'])"),
        (meshio.Mesh(np.array([[0, 0], [1, np.nan], [0, 1]]), TRI), {},
         "s1: 1 point(s) have NaN or inf coordinates, first: [1]"),
        (meshio.Mesh(TRI_POINTS, [("triangle", np.array([[0, 1, 2], [0, 1, 3]]))]), {},
         "s1: cell block 0 (triangle) refers to point 3 but the mesh has 3 points (0..2); "
         "bad cells: [1]"),
        (meshio.Mesh(np.array([[0, 0], [1, 0], [2, 0]], float), TRI), {},
         "s1: 1 degenerate triangle cell(s) with zero area in cell block 0, first: [0]"),
        (meshio.Mesh(TRI_POINTS, [("triangle", np.array([[0, 1, 2], [0, 1, 1]]))]), {},
         "s1: 1 degenerate triangle cell(s) with zero area in cell block 0, first: [1]"),
        (meshio.Mesh(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float),
                     [("tetra", np.array([[0, 1, 2, 3]]))]), {},
         "s1: 1 degenerate tetra cell(s) with zero volume in cell block 0, first: [0]"),
        (meshio.Mesh(TRI_POINTS, [("polygon", np.array([[0, 1, 2]]))]), {},
         "s1: unknown cell type 'polygon' in cell block 0; supported: line, triangle, quad, tetra, "
         "hexahedron, wedge, pyramid, line3, triangle6, quad8, quad9, tetra10, hexahedron20, "
         "hexahedron27, wedge15, wedge18, pyramid13, pyramid14 (and 'vertex', which is ignored)"),
        (meshio.Mesh(TRI_POINTS, TRI, point_data={"k": np.ones(3), "u": np.ones(3)}),
         {"features": ["k", "temp"]},
         "s1: no point-data array 'temp' (asked for as a feature); available: ['k', 'u']"),
        (meshio.Mesh(TRI_POINTS, TRI), {"targets": {"T": "temp"}},
         "s1: no point-data array 'temp' (asked for as target 'T'); available: none"),
        (meshio.Mesh(TRI_POINTS, TRI, point_data={"k": np.array([1.0, np.inf, 1.0])}),
         {"features": ["k"]}, "s1: point data 'k' contains NaN or inf"),
        (meshio.Mesh(TRI_POINTS, TRI), {"targets": {"e": math.nan}},
         "s1: graph target 'e' must be finite and non-empty, got nan"),
        (meshio.Mesh(TRI_POINTS, TRI), {"targets": {"my-head": 1.0}},
         "s1: target head name 'my-head' must be a Python identifier"),
    ],
    ids=["no-points", "no-cells", "nan", "index-range", "collinear", "repeated-index", "flat-tet",
         "unknown-type", "unknown-feature", "unknown-target", "inf-feature", "nan-target", "bad-head"],
)
def test_bad_meshes_raise_naming_the_sample(mesh: meshio.Mesh, kwargs: dict, message: str) -> None:
    with pytest.raises(MeshError) as info:
        mesh_to_graph(mesh, name="s1", **kwargs)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_bad_files_raise_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.vtu"
    with pytest.raises(MeshError, match="^" + str(missing) + ": mesh file does not exist$"):
        mesh_to_graph(missing)
    garbage = tmp_path / "garbage.vtu"
    garbage.write_text("this is not a VTU file")
    with pytest.raises(MeshError) as info:
        mesh_to_graph(garbage)
    assert str(info.value).startswith(f"{garbage}: meshio cannot read this file (")
    nan_file = tmp_path / "nan.vtu"
    meshio.write(nan_file, meshio.Mesh(np.array([[0, 0, 0], [1, 0, 0], [np.inf, 1, 0]]), TRI))
    with pytest.raises(MeshError) as info:
        mesh_to_graph(nan_file)
    assert str(info.value) == f"{nan_file}: 1 point(s) have NaN or inf coordinates, first: [2]"
    with pytest.raises(MeshError, match="^s9: expected a meshio.Mesh, a mesh file path or a "
                                        "scikit-fem mesh, got int$"):
        mesh_to_graph(3, name="s9")
