"""Benchmark: unique edges of a ~1M-tetrahedron mesh, ours vs PyG FaceToEdge vs scipy.sparse.

All three run in the same process on the same structured tetrahedral mesh of the unit cube
(scikit-fem ``MeshTet.init_tensor``, 6 tetrahedra per grid cube) and must give the same edge set.
Also times the whole ``mesh_to_graph`` and meshio reading a binary gmsh 4.1 .msh of the mesh.
Goal: ours at least 5x faster than FaceToEdge (anchor on the 2-core dev machine: NumPy key sort
0.18 s, scipy.sparse 0.25 s, FaceToEdge 1.63 s; meshio binary .msh read 0.085 s).

Run: ``.venv/bin/python bench/graph_builders_continuum.py [--points-per-axis 56] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

GOAL_SPEEDUP = 5.0


def median_seconds(work: Callable[[], object], repeats: int, setup: Callable[[], object] | None = None) -> float:
    """Median wall time of ``work`` over ``repeats`` runs (``setup`` runs untimed before each)."""
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ours(tets: np.ndarray, num_points: int) -> torch.Tensor:
    """Our unique-edge extraction, both directions, as the [2, E] edge_index FaceToEdge returns."""
    from graph_builders.continuum import LINEAR_ELEMENTS, both_directions, unique_element_edges

    edges = unique_element_edges([(LINEAR_ELEMENTS["tetra"], tets)], num_points)
    return torch.from_numpy(both_directions(edges))


def face_to_edge(data: object) -> torch.Tensor:
    """PyG's FaceToEdge on a Data whose ``face`` is the [4, T] tetrahedron index."""
    from torch_geometric.transforms import FaceToEdge

    return FaceToEdge()(data).edge_index


def scipy_sparse(tets: np.ndarray, num_points: int) -> torch.Tensor:
    """Adjacency matrix of all element edges (duplicates summed by CSR conversion), its non-zeros."""
    import scipy.sparse as sp

    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    rows = np.concatenate([tets[:, a] for a, b in pairs] + [tets[:, b] for a, b in pairs])
    cols = np.concatenate([tets[:, b] for a, b in pairs] + [tets[:, a] for a, b in pairs])
    ones = np.ones(rows.size, dtype=np.int8)
    adjacency = sp.csr_matrix((ones, (rows, cols)), shape=(num_points, num_points)).tocoo()
    return torch.from_numpy(np.stack([adjacency.row, adjacency.col]).astype(np.int64))


def edge_keys(edge_index: torch.Tensor, num_points: int) -> np.ndarray:
    array = edge_index.numpy().astype(np.int64)
    return np.sort(array[0] * num_points + array[1])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print medians, ratios and whether the 5x goal is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points-per-axis", type=int, default=56, help="56 -> 998,250 tetrahedra")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error("--repeats must be at least 3")
    torch.set_num_threads(1)

    import meshio
    import skfem
    from torch_geometric.data import Data

    from graph_builders.continuum import mesh_to_graph

    axis = np.linspace(0.0, 1.0, args.points_per_axis)
    mesh = skfem.MeshTet.init_tensor(axis, axis, axis)
    tets = np.ascontiguousarray(mesh.t.T.astype(np.int64))
    num_points = mesh.p.shape[1]
    print(f"mesh: {tets.shape[0]:,} tetrahedra, {num_points:,} points; {args.repeats} repeats, "
          f"torch threads {torch.get_num_threads()}")

    reference = edge_keys(ours(tets, num_points), num_points)
    holder: dict[str, Data] = {}

    def fresh_data() -> None:
        holder["data"] = Data(face=torch.from_numpy(tets.T.copy()), num_nodes=num_points)

    fresh_data()
    for label, result in (("FaceToEdge", face_to_edge(holder["data"])),
                          ("scipy.sparse", scipy_sparse(tets, num_points))):
        if not np.array_equal(edge_keys(result, num_points), reference):
            raise AssertionError(f"{label} gives a different edge set from ours")
    print(f"edge sets identical: {reference.size:,} directed edges")

    t_ours = median_seconds(lambda: ours(tets, num_points), args.repeats)
    t_scipy = median_seconds(lambda: scipy_sparse(tets, num_points), args.repeats)
    t_pyg = median_seconds(lambda: face_to_edge(holder["data"]), args.repeats, setup=fresh_data)
    t_graph = median_seconds(lambda: mesh_to_graph(mesh), args.repeats)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cube.msh"
        meshio.write(path, meshio.Mesh(mesh.p.T, [("tetra", tets)]), file_format="gmsh", binary=True)
        size_mb = path.stat().st_size / 1e6
        t_read = median_seconds(lambda: meshio.read(path), args.repeats)
        t_file_graph = median_seconds(lambda: mesh_to_graph(path), args.repeats)

    speedup = t_pyg / t_ours
    print(f"{'unique edges, ours (sorted int64 keys)':45s} {t_ours:8.3f} s")
    print(f"{'unique edges, scipy.sparse CSR':45s} {t_scipy:8.3f} s  ours is {t_scipy / t_ours:5.1f}x faster")
    print(f"{'unique edges, PyG FaceToEdge (face = tets)':45s} {t_pyg:8.3f} s  ours is {speedup:5.1f}x faster")
    print(f"{'mesh_to_graph (checks + edges + edge_attr)':45s} {t_graph:8.3f} s  "
          f"{t_pyg / t_graph:5.1f}x faster than FaceToEdge alone")
    print(f"{f'meshio.read binary .msh ({size_mb:.0f} MB)':45s} {t_read:8.3f} s")
    print(f"{'mesh_to_graph(path to that .msh)':45s} {t_file_graph:8.3f} s")
    verdict = "MET" if speedup >= GOAL_SPEEDUP else "NOT MET"
    print(f"goal: unique edges >= {GOAL_SPEEDUP:.0f}x faster than FaceToEdge: {verdict} ({speedup:.1f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
