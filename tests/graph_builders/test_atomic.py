"""atoms_to_graph: exact edge sets against ASE, schema, max_neighbours, pymatgen inputs, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk, fcc111, molecule
from ase.neighborlist import neighbor_list
from torch_geometric.data import Batch

from graph_builders.atomic import AtomicGraphBuilder, InvalidStructureError, atoms_to_graph
from graph_builders.schema import edge_vectors, validate_graph

KINDS = ("triclinic", "tiny", "slab", "wire", "molecule", "mixed")


def _random_cell(rng: np.random.Generator, kind: str) -> Atoms:
    """A random test structure of one kind (skewed cells, cells below the cutoff, mixed pbc, ...)."""
    if kind == "tiny":  # all lattice vectors shorter than the cutoff: many periodic images
        lengths = rng.uniform(1.6, 3.0, size=3)
        n = int(rng.integers(1, 4))
        pbc = np.array([True, True, True])
    else:
        lengths = rng.uniform(3.0, 8.0, size=3)
        n = int(rng.integers(2, 11))
        pbc = {
            "triclinic": np.array([True, True, True]),
            "slab": np.array([True, True, False]),
            "wire": np.roll(np.array([True, False, False]), int(rng.integers(3))),
            "molecule": np.array([False, False, False]),
            "mixed": rng.random(3) < 0.5,
        }[kind]
    # Lower-triangular cell with strong shear (off-diagonals up to 1.2x the diagonal), rotated.
    cell = np.diag(lengths)
    cell[1, 0] = rng.uniform(-1.2, 1.2) * lengths[0]
    cell[2, :2] = rng.uniform(-1.2, 1.2, size=2) * lengths[:2]
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    cell = cell @ q.T * np.sign(np.linalg.det(q))  # keep right-handed
    if np.linalg.det(cell) < 0:
        cell = -cell
    frac = rng.uniform(-0.3, 1.3, size=(n, 3))  # includes atoms outside the cell
    positions = frac @ cell
    if kind == "molecule" and rng.random() < 0.5:
        cell = np.zeros((3, 3))
    elif kind in ("slab", "wire") and rng.random() < 0.5:
        cell[~pbc] = 0.0  # no vacuum vector at all in non-periodic directions
    numbers = rng.integers(1, 90, size=n)
    return Atoms(numbers=numbers, positions=positions, cell=cell, pbc=pbc)


def _edge_set(i, j, shifts) -> set[tuple[int, int, int, int, int]]:
    shifts = np.asarray(shifts).astype(np.int64)
    return set(zip(np.asarray(i).tolist(), np.asarray(j).tolist(), *shifts.T.tolist()))


def _graph_edge_dict(graph) -> dict[tuple[int, int, int, int, int], float]:
    j, i = graph.edge_index.numpy()
    keys = zip(i.tolist(), j.tolist(), *graph.edge_shift.numpy().astype(np.int64).T.tolist())
    return dict(zip(keys, graph.edge_attr[:, 0].tolist()))


def test_edge_sets_equal_ase_on_random_cells():
    rng = np.random.default_rng(20260121)
    checked = {kind: 0 for kind in KINDS}
    for trial in range(240):
        kind = KINDS[trial % len(KINDS)]
        atoms = _random_cell(rng, kind)
        cutoff = float(rng.uniform(2.5, 4.0))
        graph = atoms_to_graph(atoms, cutoff=cutoff, name=f"random-{trial}", allow_isolated=True,
                               min_distance=0.0)  # random positions: edge sets, not chemistry
        ai, aj, ashift, adist = neighbor_list("ijSd", atoms, cutoff)
        ours = _graph_edge_dict(graph)
        expected = _edge_set(ai, aj, ashift)
        assert set(ours) == expected, f"trial {trial} ({kind}, pbc={atoms.pbc.tolist()})"
        ase_dist = {key: d for key, d in zip(zip(ai.tolist(), aj.tolist(), *ashift.T.tolist()), adist)}
        ours_d = np.array([ours[k] for k in expected])
        ase_d = np.array([ase_dist[k] for k in expected])
        np.testing.assert_allclose(ours_d, ase_d, rtol=1e-6, atol=1e-6)
        # Non-periodic directions never get a shift.
        assert not graph.edge_shift[:, ~atoms.pbc].any()
        checked[kind] += 1 if expected else 0
    # Every kind produced non-trivial neighbour lists.
    assert all(count >= 20 for count in checked.values()), checked


def test_tiny_cell_has_many_images_of_itself():
    atoms = bulk("Cu", "fcc", a=3.6)  # 1 atom, primitive cell 2.55 Å, well below the cutoff
    graph = atoms_to_graph(atoms, cutoff=5.0)
    i, j, shift = neighbor_list("ijS", atoms, 5.0)
    assert graph.edge_index.shape[1] == len(i) == 42  # FCC shells below 5 Å: 12 + 6 + 24
    assert set(graph.edge_index.flatten().tolist()) == {0}
    assert not (graph.edge_shift == 0).all(dim=1).any()  # no self-edge without a shift


def test_schema_fields_dtypes_and_vector_identity():
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, 2))
    atoms.symbols[:5] = "Ni"
    atoms.rattle(0.05, seed=3)
    forces = np.arange(96, dtype=np.float64).reshape(32, 3)
    graph = atoms_to_graph(
        atoms, targets={"energy": -1.5, "stress": np.arange(6.0), "forces": forces}, name="CuNi"
    )
    assert graph.pos.dtype == torch.float32 and graph.pos.shape == (32, 3)
    assert graph.z.dtype == torch.int64 and graph.z.tolist() == atoms.numbers.tolist()
    assert graph.x.dtype == torch.float32 and graph.x[:, 0].tolist() == [float(z) for z in atoms.numbers]
    assert graph.edge_index.dtype == torch.int64
    assert graph.edge_attr.shape == (graph.edge_index.shape[1], 1)
    assert graph.edge_shift.dtype == torch.float32
    assert torch.equal(graph.edge_shift, graph.edge_shift.round())
    assert graph.cell.shape == (1, 3, 3) and torch.allclose(graph.cell[0].double(), torch.tensor(atoms.cell.array))
    assert graph.pbc.dtype == torch.bool and graph.pbc.tolist() == [[True, True, True]]
    assert graph.y_energy.tolist() == [[-1.5]]
    assert graph.y_stress.shape == (1, 6) and graph.y_forces.shape == (32, 3)
    assert torch.equal(graph.y_forces, torch.tensor(forces, dtype=torch.float32))
    assert graph.name == "CuNi"
    validate_graph(graph, name="CuNi")
    # vector = pos[j] + shift @ cell - pos[i] has the stored length
    lengths = edge_vectors(graph).norm(dim=1)
    torch.testing.assert_close(lengths, graph.edge_attr[:, 0], rtol=1e-5, atol=1e-5)
    assert float(graph.edge_attr.max()) < 5.0
    # Both directions of every edge are present: (i, j, S) <-> (j, i, -S).
    keys = set(_graph_edge_dict(graph))
    assert {(j, i, -a, -b, -c) for i, j, a, b, c in keys} == keys


def test_batched_graphs_keep_edge_vectors():
    cu = bulk("Cu", "fcc", a=3.6, cubic=True)
    water = molecule("H2O")
    graphs = [atoms_to_graph(cu, cutoff=4.0), atoms_to_graph(water, cutoff=2.0)]
    batch = Batch.from_data_list(graphs)
    expected = torch.cat([edge_vectors(g) for g in graphs])
    torch.testing.assert_close(edge_vectors(batch), expected)
    assert batch.cell.shape == (2, 3, 3) and not batch.cell[1].any()  # molecule cell is zeros


def test_batched_edge_vectors_per_graph_product_and_gather_agree_with_gradients():
    """Edges in graph order take one product per graph, edges out of order the per-edge gather:
    the same vectors and the same gradients in positions and cells (forces and stress by autograd)."""
    cells = [bulk("Cu", "fcc", a=3.6, cubic=True), bulk("Ni", "fcc", a=3.52).repeat((2, 1, 1))]
    cells[1].positions += 0.05
    batch = Batch.from_data_list([atoms_to_graph(a, cutoff=4.0) for a in cells])
    order = torch.randperm(batch.edge_index.shape[1], generator=torch.Generator().manual_seed(0))
    shuffled = batch.clone()
    shuffled.edge_index, shuffled.edge_shift = batch.edge_index[:, order], batch.edge_shift[order]
    grads = []
    for data in (batch, shuffled):
        data.pos.requires_grad_(True)
        data.cell.requires_grad_(True)
        vec = edge_vectors(data)
        (vec.norm(dim=1) ** 3).sum().backward()
        grads.append((vec, data.pos.grad.clone(), data.cell.grad.clone()))
        data.pos, data.cell = data.pos.detach(), data.cell.detach()
    torch.testing.assert_close(grads[0][0][order], grads[1][0])
    # sums of ~50-sized terms in another order: float32 rounding where they cancel to ~0
    torch.testing.assert_close(grads[0][1], grads[1][1], atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(grads[0][2], grads[1][2], atol=1e-4, rtol=1e-5)
    assert grads[0][2].abs().sum() > 0


def test_molecule_graph_has_zero_cell_and_shifts():
    mol = molecule("CH4")
    mol.cell = [10.0, 10.0, 10.0]  # a box does not matter when nothing is periodic
    graph = atoms_to_graph(mol, cutoff=1.2)
    assert graph.edge_index.shape[1] == 8  # four C-H bonds, both directions
    assert not graph.cell.any() and not graph.edge_shift.any()
    assert graph.pbc.tolist() == [[False, False, False]]
    single = atoms_to_graph(Atoms("Ar", positions=[[0, 0, 0]]), allow_isolated=True, name="Ar")
    assert single.edge_index.shape == (2, 0) and single.edge_attr.shape == (0, 1)


def test_max_neighbours_keeps_exactly_the_nearest():
    rng = np.random.default_rng(5)
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, 2))
    atoms.rattle(0.1, rng=rng)
    full = atoms_to_graph(atoms, cutoff=5.0)
    k = 7
    limited = atoms_to_graph(atoms, cutoff=5.0, max_neighbours=k)
    full_edges = _graph_edge_dict(full)
    kept = _graph_edge_dict(limited)
    assert set(kept) <= set(full_edges)
    for centre in range(len(atoms)):
        dists = sorted(d for (i, *_), d in full_edges.items() if i == centre)
        kept_d = sorted(d for (i, *_), d in kept.items() if i == centre)
        assert len(kept_d) == k
        assert kept_d == pytest.approx(dists[:k])


def test_max_neighbours_tie_break_is_deterministic():
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True)  # perfect lattice: 12 equidistant neighbours
    first = atoms_to_graph(atoms, cutoff=3.0, max_neighbours=4)
    second = atoms_to_graph(atoms.copy(), cutoff=3.0, max_neighbours=4)
    assert torch.equal(first.edge_index, second.edge_index)
    assert torch.equal(first.edge_shift, second.edge_shift)
    # Ties are broken by neighbour index then shift: centre 0 keeps the 4 smallest (j, shift).
    full = _graph_edge_dict(atoms_to_graph(atoms, cutoff=3.0))
    expected = sorted(key for key in full if key[0] == 0)[:4]
    got = sorted(key for key in _graph_edge_dict(first) if key[0] == 0)
    assert got == expected


def test_pymatgen_structure_and_molecule_match_atoms():
    from pymatgen.core import Lattice, Molecule, Structure

    lattice = Lattice.from_parameters(3.7, 4.1, 5.3, 75, 100, 115)
    structure = Structure(
        lattice, ["Cu", "Ni", "Au"], [[0, 0, 0], [0.5, 0.4, 0.1], [0.2, 0.7, 0.6]]
    )
    atoms = Atoms(
        symbols=["Cu", "Ni", "Au"], scaled_positions=structure.frac_coords,
        cell=lattice.matrix, pbc=True,
    )
    g_pmg = atoms_to_graph(structure, cutoff=4.5)
    g_ase = atoms_to_graph(atoms, cutoff=4.5)
    assert _graph_edge_dict(g_pmg).keys() == _graph_edge_dict(g_ase).keys()
    for key in ("pos", "z", "x", "cell", "pbc"):
        torch.testing.assert_close(g_pmg[key], g_ase[key])

    mol = Molecule(["O", "H", "H"], [[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0]])
    g_mol = atoms_to_graph(mol, cutoff=1.2)
    g_water = atoms_to_graph(Atoms("OH2", positions=mol.cart_coords), cutoff=1.2)
    assert _graph_edge_dict(g_mol) == pytest.approx(_graph_edge_dict(g_water))
    assert g_mol.z.tolist() == [8, 1, 1] and not g_mol.pbc.any()
    assert g_mol.edge_index.shape[1] == 4


def _cu_cell(cell, pbc=True) -> Atoms:
    return Atoms("Cu2", positions=[[0, 0, 0], [1.0, 1.0, 1.0]], cell=cell, pbc=pbc)


BAD_INPUTS = [
    ("nan", lambda: Atoms("Cu2", positions=[[0, 0, 0], [np.nan, 0, 0]]), "non-finite coordinates (NaN or inf) at atom indices [1]"),
    ("inf", lambda: Atoms("Cu2", positions=[[0, 0, 0], [1, np.inf, 0]]), "non-finite coordinates"),
    ("flat", lambda: _cu_cell([[3, 0, 0], [0, 3, 0], [3, 3, 0]]), "zero or negative cell volume (0 Å^3)"),
    ("lefthanded", lambda: _cu_cell([[3, 0, 0], [0, 0, 3], [0, 3, 0]]), "zero or negative cell volume (-27 Å^3)"),
    ("zerovector", lambda: _cu_cell([[3, 0, 0], [0, 3, 0], [0, 0, 0]], [True, True, True]), "zero lattice vector in periodic direction(s) [2]"),
    ("nearlyflat", lambda: _cu_cell([[3, 0, 0], [0, 3, 0], [3, 3, 1e-7]]), "degenerate cell"),
    ("slabparallel", lambda: _cu_cell([[3, 0, 0], [6, 1e-8, 0], [0, 0, 0]], [True, True, False]), "degenerate cell"),
    ("dummy", lambda: Atoms("XCu", positions=[[0, 0, 0], [1, 0, 0]]), "unknown element(s) (atomic numbers [0]"),
    ("z119", lambda: Atoms(numbers=[29, 119], positions=[[0, 0, 0], [1, 0, 0]]), "atomic numbers [119]"),
    ("isolated", lambda: Atoms("Cu3", positions=[[0, 0, 0], [2, 0, 0], [20, 0, 0]]), "1 atom(s) have no neighbour within the cutoff of 5.0 Å (indices [2])"),
    ("empty", lambda: Atoms(), "empty structure (no atoms)"),
]


@pytest.mark.parametrize("sample, make, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_raises_naming_the_sample(sample, make, message):
    with pytest.raises(InvalidStructureError) as info:
        atoms_to_graph(make(), name=f"sample-{sample}")
    assert isinstance(info.value, ValueError)
    text = str(info.value)
    assert text.startswith(f"sample-{sample}: ")
    assert message in text


def test_unnamed_sample_is_named_by_formula_and_bad_targets_fail():
    with pytest.raises(InvalidStructureError, match=r"^structure Cu2: non-finite"):
        atoms_to_graph(Atoms("Cu2", positions=[[0, 0, 0], [np.nan, 0, 0]]))
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
    with pytest.raises(InvalidStructureError, match=r"^s1: target 'forces' has shape \(3, 3\); expected \[1, d\] \(graph\) or \[4, d\] \(node\)"):
        atoms_to_graph(atoms, targets={"forces": np.zeros((3, 3))}, name="s1")
    with pytest.raises(InvalidStructureError, match=r"^s2: target 'energy' contains NaN or inf"):
        atoms_to_graph(atoms, targets={"energy": np.nan}, name="s2")
    with pytest.raises(InvalidStructureError, match=r"^s3: target name 'bad-name' must be a Python identifier"):
        atoms_to_graph(atoms, targets={"bad-name": 1.0}, name="s3")
    with pytest.raises(ValueError, match="cutoff must be a positive"):
        atoms_to_graph(atoms, cutoff=0.0)
    with pytest.raises(ValueError, match="max_neighbours must be >= 1"):
        atoms_to_graph(atoms, max_neighbours=0)
    with pytest.raises(TypeError, match="expected ase.Atoms or a pymatgen Structure/Molecule, got str"):
        atoms_to_graph("Cu")


def test_slab_and_wire_have_expected_neighbour_counts():
    slab = fcc111("Cu", size=(2, 2, 3), a=3.6, vacuum=None, periodic=False)
    slab.pbc = [True, True, False]
    graph = atoms_to_graph(slab, cutoff=2.6)  # nearest neighbours only (2.546 Å)
    counts = torch.bincount(graph.edge_index[1], minlength=len(slab)).tolist()
    layer = slab.get_tags()  # 3 = bottom, 1 = top in fcc111
    # surface atoms: 6 in-plane + 3 below/above = 9; middle layer 12
    assert sorted(set(zip(layer.tolist(), counts))) == [(1, 9), (2, 12), (3, 9)]
    wire = Atoms("Cu", positions=[[0, 0, 0]], cell=[2.5, 0, 0], pbc=[True, False, False])
    wire_graph = atoms_to_graph(wire, cutoff=5.1)
    assert sorted(wire_graph.edge_shift[:, 0].tolist()) == [-2, -1, 1, 2]


def test_builder_reuses_its_list_without_corrupting_earlier_graphs():
    rng = np.random.default_rng(11)
    structures = [_random_cell(rng, "triclinic") for _ in range(6)]
    build = AtomicGraphBuilder(cutoff=3.5, allow_isolated=True, min_distance=0.0)
    built = [build(atoms, name=str(k)) for k, atoms in enumerate(structures)]
    for k, (atoms, graph) in enumerate(zip(structures, built)):
        fresh = atoms_to_graph(atoms, cutoff=3.5, allow_isolated=True, name=str(k), min_distance=0.0)
        for key in ("edge_index", "edge_attr", "edge_shift", "pos", "z", "cell", "pbc"):
            assert torch.equal(graph[key], fresh[key]), (k, key)
    with pytest.raises(ValueError, match="cutoff must be a positive finite number, got nan"):
        AtomicGraphBuilder(cutoff=float("nan"))


def test_coincident_atoms_are_refused_with_the_pair():
    cu = bulk("Cu", "fcc", a=3.61, cubic=True)
    dup = cu + cu[:1]  # atom 4 duplicates atom 0
    with pytest.raises(InvalidStructureError) as info:
        atoms_to_graph(dup, name="dup")
    assert str(info.value) == ("dup: 1 pair(s) of atoms closer than 0.5 Å (coincident or duplicated atoms?): "
                               "0-4 at 0 Å")
    near_image = Atoms("Cu2", positions=[[0.0, 0, 0], [2.9, 0, 0]], cell=[3.0, 3.0, 3.0], pbc=True)
    with pytest.raises(InvalidStructureError, match=r"0-1 \(image \[-1, 0, 0\]\) at 0.1 Å"):
        atoms_to_graph(near_image, name="image")
    assert atoms_to_graph(near_image, min_distance=0.05).num_nodes == 2
    ok = atoms_to_graph(molecule("H2"), cutoff=2.0)  # 0.74 Å, the shortest real bond, is fine
    assert ok.edge_index.shape[1] == 2
