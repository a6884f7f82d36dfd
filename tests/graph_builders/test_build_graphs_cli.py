"""``build-graphs`` and ``demo-data`` through ``hydragnn_ensemble.cli.main``: good files stored, bad
files listed with their reason, exit codes as documented."""

from __future__ import annotations

from pathlib import Path

import ase.io
import numpy as np
import pytest
import torch
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator

from graph_builders.store import GraphStore
from hydragnn_ensemble.cli import main


def read_errors(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "file\treason"
    return dict(line.split("\t") for line in lines[1:])


def all_graphs(path: Path) -> dict[str, object]:
    with GraphStore(path) as store:
        return {g.name: g for s in store.split_names for g in (store.get(s, i) for i in range(store.num_graphs(s)))}


# ---------------------------------------------------------------- atomic
@pytest.fixture(scope="module")
def atomic_inputs(tmp_path_factory) -> Path:
    from ase.build import bulk
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.io import write

    folder = tmp_path_factory.mktemp("atomic_inputs")
    rng = np.random.default_rng(0)
    frames = []
    for i in range(3):
        atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 1, 1))
        atoms.symbols[i] = "Ni"
        atoms.rattle(0.05, seed=i)
        atoms.calc = EMT()
        energy, forces = atoms.get_potential_energy(), atoms.get_forces()
        atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
        frames.append(atoms)
    write(folder / "good_three.extxyz", frames)
    write(folder / "good_one.extxyz", frames[0])
    text = (folder / "good_three.extxyz").read_text().splitlines()
    (folder / "truncated.extxyz").write_text("\n".join(text[: len(text) // 2 - 3]) + "\n")
    (folder / "garbage.xyz").write_bytes(rng.bytes(300))
    nan_atoms = frames[1].copy()
    nan_atoms.positions[2] = np.nan
    nan_atoms.calc = SinglePointCalculator(nan_atoms, energy=frames[1].calc.results["energy"],
                                           forces=frames[1].calc.results["forces"])
    write(folder / "nan_coordinates.extxyz", nan_atoms)
    return folder


@pytest.mark.parametrize("workers", [1, 2])
def test_build_graphs_atomic_keeps_good_files_and_lists_bad_ones(atomic_inputs, tmp_path, workers, capsys):
    out = tmp_path / "atoms.bp"
    code = main(["build-graphs", "--scale", "atomic", "--cutoff", "4.0", "--workers", str(workers),
                 "--no-progress", str(atomic_inputs), "-o", str(out)])
    assert code == 1
    errors = read_errors(tmp_path / "atoms.bp.errors.tsv")
    assert sorted(Path(f).name for f in errors) == ["garbage.xyz", "nan_coordinates.extxyz", "truncated.extxyz"]
    nan_reason = next(r for f, r in errors.items() if f.endswith("nan_coordinates.extxyz"))
    assert "NaN" in nan_reason or "nan" in nan_reason
    assert all(reason for reason in errors.values())
    graphs = all_graphs(out)
    good_three, good_one = atomic_inputs / "good_three.extxyz", atomic_inputs / "good_one.extxyz"
    assert sorted(graphs) == sorted([f"{good_one}:0"] + [f"{good_three}:{i}" for i in range(3)])
    with GraphStore(out) as store:
        assert [(h.name, h.level, h.dim, h.unit) for h in store.heads] == [("energy", "graph", 1, "eV"),
                                                                          ("forces", "node", 3, "eV/Å")]
        assert store.metadata["failures"] == 3 and store.metadata["input_files"] == 2
        assert store.metadata["cutoff"] == 4.0
    from ase.io import read

    frames = read(good_three, index=":")
    for i, atoms in enumerate(frames):
        graph = graphs[f"{good_three}:{i}"]
        assert graph.y_energy.item() == pytest.approx(atoms.get_potential_energy(), rel=1e-6)
        assert torch.allclose(graph.y_forces, torch.tensor(atoms.get_forces(), dtype=torch.float32))
        assert torch.equal(graph.z, torch.tensor(atoms.numbers))
    printed = capsys.readouterr().out
    assert f"built 4 graphs from 2 of 5 files -> {out}" in printed
    assert "3 files or structures failed; reasons in" in printed


def test_build_graphs_nothing_built_exits_2(atomic_inputs, tmp_path, capsys):
    out = tmp_path / "none.bp"
    code = main(["build-graphs", "--scale", "atomic", "--no-progress", str(atomic_inputs / "garbage.xyz"),
                 str(atomic_inputs / "missing.xyz"), "-o", str(out)])
    assert code == 2
    assert not out.exists()
    errors = read_errors(tmp_path / "none.bp.errors.tsv")
    assert errors[str(atomic_inputs / "missing.xyz")] == "no such file"
    assert set(errors) == {str(atomic_inputs / "garbage.xyz"), str(atomic_inputs / "missing.xyz")}
    assert "error: no graph could be built from 2 files" in capsys.readouterr().err


# ---------------------------------------------------------------- mesoscale
def test_build_graphs_mesoscale(tmp_path, capsys):
    rng = np.random.default_rng(1)
    inputs = tmp_path / "grains"
    inputs.mkdir()
    for i in range(3):
        seeds = rng.random((8 + i, 3)) * 2.0
        np.savez(inputs / f"good{i}.npz", seeds=seeds, box=np.array([2.0, 2.0, 2.0]),
                 y_taylor=rng.random(8 + i) + 2.5, y_modulus=np.array(120.0 + i))
    np.savez(inputs / "nan_seed.npz", seeds=np.full((8, 3), np.nan), box=np.array(2.0))
    np.savez(inputs / "typo.npz", seed=rng.random((8, 3)), box=np.array(2.0))
    np.savez(inputs / "voxels.npz", labels=np.repeat(np.arange(8), 8).reshape(4, 4, 4))
    (inputs / "broken.npz").write_bytes(b"PK\x03\x04 not really a zip")
    out = tmp_path / "grains.bp"
    code = main(["build-graphs", "--scale", "mesoscale", "--no-progress", "--fractions", "1,0,0",
                 str(inputs), "-o", str(out)])
    assert code == 1
    errors = {Path(f).name: r for f, r in read_errors(tmp_path / "grains.bp.errors.tsv").items()}
    assert sorted(errors) == ["broken.npz", "nan_seed.npz", "typo.npz", "voxels.npz"]
    assert errors["typo.npz"].endswith("unknown arrays ['seed']; expected ['seeds', 'box', 'orientations', "
                                       "'phases', 'periodic', 'labels', 'voxel_size'] or y_<head>")
    assert "not a readable .npz file" in errors["broken.npz"]
    assert "grain_label" in errors["voxels.npz"]  # a voxel graph among Voronoi graphs differs in attributes
    assert "nan" in errors["nan_seed.npz"].lower()
    graphs = all_graphs(out)
    assert sorted(Path(name).name for name in graphs) == ["good0.npz", "good1.npz", "good2.npz"]
    with GraphStore(out) as store:
        assert [(h.name, h.level, h.dim) for h in store.heads] == [("modulus", "graph", 1), ("taylor", "node", 1)]
        assert store.num_graphs("trainset") == 3
    for i in range(3):
        graph = graphs[str(inputs / f"good{i}.npz")]
        assert graph.num_nodes == 8 + i and graph.y_modulus.tolist() == [[120.0 + i]]


# ---------------------------------------------------------------- continuum
def test_build_graphs_continuum(tmp_path, capsys):
    import meshio
    import skfem

    inputs = tmp_path / "meshes"
    inputs.mkdir()
    for i in range(2):
        mesh = skfem.MeshTri().refined(2 + i)
        meshio.write(inputs / f"plate{i}.vtu", meshio.Mesh(mesh.p.T, [("triangle", mesh.t.T)],
                                                             point_data={"temp": mesh.p[0] * (i + 1)}))
    bad = skfem.MeshTri().refined(1)
    points = bad.p.T.copy()
    points[3] = np.nan
    meshio.write(inputs / "nan.vtu", meshio.Mesh(points, [("triangle", bad.t.T)], point_data={"temp": bad.p[0]}))
    text = (inputs / "plate0.vtu").read_text()
    (inputs / "cut.vtu").write_text(text[: len(text) // 2])
    out = tmp_path / "meshes.bp"
    code = main(["build-graphs", "--scale", "continuum", "--targets", "temp", "--no-progress", str(inputs),
                 "-o", str(out)])
    assert code == 1
    errors = {Path(f).name: r for f, r in read_errors(tmp_path / "meshes.bp.errors.tsv").items()}
    assert sorted(errors) == ["cut.vtu", "nan.vtu"]
    graphs = all_graphs(out)
    assert sorted(Path(n).name for n in graphs) == ["plate0.vtu", "plate1.vtu"]
    assert graphs[str(inputs / "plate1.vtu")].num_nodes == 81
    plate1 = graphs[str(inputs / "plate1.vtu")]
    assert torch.allclose(plate1.y_temp[:, 0], 2 * plate1.pos[:, 0])
    # everything good now; without --targets there is nothing to train on: refused, nothing written
    (inputs / "cut.vtu").unlink()
    (inputs / "nan.vtu").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert main(["build-graphs", "--scale", "continuum", "--no-progress", str(inputs), "-o", str(out)]) == 2
    assert "no --targets named, so there is nothing to train on; pass --predict-only" in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before
    # for prediction only: exit 0 and the stale errors file is gone
    assert main(["build-graphs", "--scale", "continuum", "--no-progress", "--predict-only", str(inputs),
                 "-o", str(out)]) == 0
    assert not (tmp_path / "meshes.bp.errors.tsv").exists()
    with GraphStore(out) as store:
        assert len(store.heads) == 0 and sum(store.num_graphs(s) for s in store.split_names) == 2


def test_build_graphs_usage_errors(tmp_path, capsys):
    inputs = tmp_path / "in"
    inputs.mkdir()
    assert main(["build-graphs", "--scale", "continuum", "--fractions", "0.5,0.5", str(inputs),
                 "-o", str(tmp_path / "x.bp")]) == 2
    assert "error: --fractions must be three (train,val,test) or four (and calibration) non-negative numbers summing to 1, got '0.5,0.5'" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["build-graphs", "--scale", "continuum", str(empty), "-o", str(tmp_path / "x.bp")]) == 2
    assert f"error: no input files found in {empty}" in capsys.readouterr().err


# ---------------------------------------------------------------- demo-data
@pytest.mark.parametrize(
    "kind, extra, heads",
    [
        ("alloy", ["--num", "4", "--elements", "Cu,Ni", "--components", "2"], ["formation_energy", "stress", "forces"]),
        ("polycrystal", ["--num", "3"], ["taylor_factor", "mean_taylor_factor", "youngs_modulus"]),
        ("fem", ["--num", "3"], ["temperature", "effective_conductivity"]),
    ],
)
def test_demo_data(kind, extra, heads, tmp_path, capsys):
    out = tmp_path / f"{kind}.bp"
    assert main(["demo-data", kind, "-o", str(out), "--no-progress", *extra]) == 0
    printed = capsys.readouterr().out
    num = int(extra[1])
    with GraphStore(out) as store:
        assert sum(store.num_graphs(s) for s in store.split_names) == num
        assert store.heads.names == heads
        assert store.metadata["dataset"] == kind and store.metadata["created_by"] == "demo-data"
    assert printed.startswith(f"{out}: {num} graphs\n")
    for head in heads:
        assert f"    {head} " in printed


def test_demo_data_rejects_alloy_options_for_other_kinds(tmp_path, capsys):
    assert main(["demo-data", "fem", "-o", str(tmp_path / "f.bp"), "--elements", "Cu"]) == 2
    assert "error: --elements and --components apply to the alloy dataset only" in capsys.readouterr().err
    assert main(["demo-data", "alloy", "-o", str(tmp_path / "a.bp"), "--components", "3-2"]) == 2
    assert "error: --components must look like 2-3 or 2 (1 <= low <= high), got '3-2'" in capsys.readouterr().err


def test_build_graphs_keeps_every_label_with_its_unit_and_names_what_it_leaves_out(tmp_path, capsys):
    """Energy (the total), free energy, stress (Voigt), forces from the calculator results; numbers
    from info and per-atom arrays as heads (units given on the command line); text and ASE's own
    input arrays named as left out."""
    frames = []
    for k in range(6):
        atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
        atoms.rattle(0.05, seed=k)
        atoms.info.update(config_type="bulk", REF_gap=0.1 * k)
        atoms.arrays["REF_charge"] = np.full(len(atoms), 0.5 * k)
        atoms.set_initial_magnetic_moments(np.ones(len(atoms)))
        atoms.calc = EMT()
        e, f, s = atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()
        atoms.calc = SinglePointCalculator(atoms, energy=e, free_energy=e + 0.01, forces=f, stress=s)
        frames.append(atoms)
    path = tmp_path / "labelled.extxyz"
    ase.io.write(path, frames)
    out = tmp_path / "labelled.bp"
    assert main(["build-graphs", "--scale", "atomic", str(path), "-o", str(out), "--no-progress",
                 "--units", "REF_gap=eV"]) == 0
    printed = capsys.readouterr().out
    with GraphStore(out) as store:
        heads = {h.name: (h.level, h.dim, h.unit) for h in store.heads}
        assert heads == {"energy": ("graph", 1, "eV"), "free_energy": ("graph", 1, "eV"),
                         "forces": ("node", 3, "eV/Å"), "stress": ("graph", 6, "eV/Å^3"),
                         "REF_charge": ("node", 1, ""), "REF_gap": ("graph", 1, "eV")}
        index = {int(i): k for k, i in enumerate(store.source_indices("trainset"))}
        k = next(iter(index))
        graph = store.get("trainset", index[k])
        assert graph.y_stress[0].tolist() == pytest.approx(frames[k].get_stress().tolist(), rel=1e-5, abs=1e-7)
        assert graph.y_REF_gap.item() == pytest.approx(0.1 * k)
        assert graph.y_free_energy.item() == pytest.approx(frames[k].get_potential_energy() + 0.01, rel=1e-6)
    assert "label info config_type left out (6 structure(s)): not a number" in printed
    assert "label arrays initial_magmoms left out (6 structure(s)): an input of a calculation" in printed
    assert "head 'REF_charge' (from atoms.arrays) has no unit; give one with --units REF_charge=UNIT" in printed


def test_a_fourth_fraction_makes_a_calibration_split_and_copies_across_splits_are_named(tmp_path, capsys):
    """``--fractions 0.6,0.2,0.1,0.1`` stores a ``calset``; the same structure written twice lands
    (with this seed) in two splits and build-graphs says so on stderr, naming both graphs."""
    frames = []
    for k in range(19):
        atoms = bulk("Cu", "fcc", a=3.6 + 0.01 * k, cubic=True)
        atoms.calc = SinglePointCalculator(atoms, energy=-float(k))
        frames.append(atoms)
    frames.append(frames[0].copy())
    frames[-1].calc = SinglePointCalculator(frames[-1], energy=0.0)
    ase.io.write(tmp_path / "cells.extxyz", frames)
    out = tmp_path / "cells.bp"
    assert main(["build-graphs", "--scale", "atomic", "--cutoff", "4.0", str(tmp_path / "cells.extxyz"), "-o", str(out),
                 "--fractions", "0.6,0.2,0.1,0.1", "--seed", "1", "--no-progress"]) == 0
    with GraphStore(out) as store:
        sizes = {s: store.num_graphs(s) for s in store.split_names}
    assert sizes == {"trainset": 12, "valset": 4, "testset": 2, "calset": 2}
    err = capsys.readouterr().err
    assert "warning: exact duplicate structures across splits: 1 of" in err and "repeat a structure" in err


def test_duplicates_across_splits_are_found_exactly():
    from graph_builders.atomic import atoms_to_graph
    from graph_builders.store.duplicates import duplicates_across_splits

    cells = [bulk("Cu", "fcc", a=3.6 + 0.01 * k, cubic=True) for k in range(4)]
    graphs = [atoms_to_graph(a, cutoff=4.0) for a in cells] + [atoms_to_graph(cells[1], cutoff=4.0)]
    moved = cells[2].copy()
    moved.positions[0, 0] += 1e-3  # not the same structure
    graphs.append(atoms_to_graph(moved, cutoff=4.0))
    found = duplicates_across_splits(graphs, {"trainset": [0, 1, 2], "valset": [3, 5], "testset": [4]})
    assert [(d.split, d.index, d.first_split, d.first_index) for d in found] == [("testset", 4, "trainset", 1)]
    assert duplicates_across_splits(graphs, {"trainset": [1, 4], "valset": [0]}) == []  # within a split: not reported


# ---------------------------------------------------------------- formats, labels, heads, progress
def _emt_frames(count: int, seed: int = 0) -> list:
    """Rattled Cu/Ni cells with their EMT energy and forces stored as a calculator's results."""
    frames = []
    for k in range(count):
        atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
        atoms.symbols[k % 4] = "Ni"
        atoms.rattle(0.05, seed=seed + k)
        atoms.calc = EMT()
        energy, forces = atoms.get_potential_energy(), atoms.get_forces()
        atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
        frames.append(atoms)
    return frames


def _write_format(path: Path, frames: list) -> None:
    """``frames`` into ``path`` with ASE's writers, or pymatgen's for a ``.json`` list."""
    if path.suffix == ".json":
        from monty.serialization import dumpfn
        from pymatgen.core import Lattice, Structure

        dumpfn([Structure(Lattice(a.cell.array), a.get_chemical_symbols(), a.positions, coords_are_cartesian=True,
                          site_properties={"forces": a.get_forces().tolist()},
                          properties={"energy": a.get_potential_energy()}) for a in frames], str(path))
    elif path.suffix == ".db":
        from ase.db import connect

        with connect(path) as db:
            for atoms in frames:
                db.write(atoms)
    else:
        ase.io.write(path, frames)


@pytest.mark.parametrize("filename", ["cells.extxyz", "data.extxyz", "cells.traj", "cells.db", "cells.json"])
def test_build_graphs_reads_each_format_with_its_labels(tmp_path, filename, capsys):
    """Energy and forces of every structure, as written, in the dataset, whatever the format (a
    pymatgen JSON list included, and an extxyz file whose name starts with ``data.``)."""
    frames = _emt_frames(5)
    path = tmp_path / filename
    _write_format(path, frames)
    out = tmp_path / "cells.bp"
    assert main(["build-graphs", "--scale", "atomic", "--cutoff", "4.0", str(path), "-o", str(out),
                 "--no-progress", "--fractions", "1,0,0"]) == 0
    graphs = all_graphs(out)
    with GraphStore(out) as store:
        assert [(h.name, h.level, h.dim, h.unit) for h in store.heads] == [("energy", "graph", 1, "eV"),
                                                                          ("forces", "node", 3, "eV/Å")]
    assert sorted(graphs) == [f"{path}:{k}" for k in range(5)]
    for k, atoms in enumerate(frames):
        graph = graphs[f"{path}:{k}"]
        assert graph.z.tolist() == atoms.numbers.tolist()
        assert torch.allclose(graph.pos, torch.tensor(atoms.positions, dtype=graph.pos.dtype), atol=1e-5)
        assert graph.y_energy.item() == pytest.approx(atoms.get_potential_energy(), rel=1e-6)
        assert torch.allclose(graph.y_forces, torch.tensor(atoms.get_forces(), dtype=torch.float32), atol=1e-6)


def test_structures_without_labels_are_refused_unless_for_prediction_only(tmp_path, capsys):
    """A POSCAR holds a structure only: refused with the reason and the way out, nothing written;
    with --predict-only a dataset without heads, the structure as written."""
    atoms = _emt_frames(1)[0]
    path = tmp_path / "POSCAR"
    ase.io.write(path, atoms, format="vasp", direct=True)
    out = tmp_path / "cell.bp"
    assert main(["build-graphs", "--scale", "atomic", str(path), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: no labels in the 1 structures of {path}: no energy, forces or other label")
    assert "nothing to train on; pass --predict-only to build a dataset for prediction only" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["POSCAR"]
    assert main(["build-graphs", "--scale", "atomic", str(path), "-o", str(out), "--no-progress",
                 "--predict-only", "--fractions", "1,0,0"]) == 0
    (graph,) = all_graphs(out).values()
    with GraphStore(out) as store:
        assert len(store.heads) == 0
    order = np.argsort(atoms.numbers, kind="stable")  # POSCAR groups the atoms by element
    assert sorted(graph.z.tolist()) == sorted(atoms.numbers.tolist())
    assert torch.allclose(graph.pos, torch.tensor(atoms.positions[order], dtype=graph.pos.dtype), atol=1e-5)


def test_a_cif_gives_no_spacegroup_kinds_head(tmp_path, capsys):
    """The array ASE's CIF reader adds (each atom's symmetry-distinct site) is no label: a CIF alone
    has none, and the note says why spacegroup_kinds is left out."""
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
    atoms.symbols[0] = "Ni"
    path = tmp_path / "cell.cif"
    ase.io.write(path, atoms)
    out = tmp_path / "cell.bp"
    assert main(["build-graphs", "--scale", "atomic", str(path), "-o", str(out), "--no-progress"]) == 2
    printed = capsys.readouterr()
    assert "label arrays spacegroup_kinds left out (1 structure(s)): the CIF's index" in printed.out
    assert printed.err.startswith(f"error: no labels in the 1 structures of {path}: no energy, forces")
    assert not out.exists()
    assert main(["build-graphs", "--scale", "atomic", str(path), "-o", str(out), "--no-progress",
                 "--predict-only", "--fractions", "1,0,0"]) == 0
    (graph,) = all_graphs(out).values()
    assert not any(key.startswith("y_") for key in graph.keys())
    assert sorted(graph.z.tolist()) == sorted(atoms.numbers.tolist())
    with GraphStore(out) as store:
        assert len(store.heads) == 0


def test_heads_chooses_the_labels_and_an_unknown_name_lists_them(tmp_path, capsys):
    frames = _emt_frames(4)
    for atoms in frames:
        results = atoms.calc.results
        atoms.set_momenta(np.full((len(atoms), 3), 0.02))
        atoms.calc = SinglePointCalculator(atoms, **results)
    path = tmp_path / "md.extxyz"
    ase.io.write(path, frames)
    out = tmp_path / "md.bp"
    base = ["build-graphs", "--scale", "atomic", str(path), "-o", str(out), "--no-progress", "--fractions", "1,0,0"]
    assert main(base) == 0
    printed = capsys.readouterr().out
    assert "label arrays momenta left out (4 structure(s)): an input of a calculation" in printed
    with GraphStore(out) as store:
        assert store.heads.names == ["energy", "forces"]
    assert main(base + ["--heads", "energy,momenta"]) == 0
    with GraphStore(out) as store:
        assert store.heads.names == ["energy", "momenta"]
    for k, graph in ((int(name.rpartition(":")[2]), g) for name, g in all_graphs(out).items()):
        assert graph.y_energy.item() == pytest.approx(frames[k].get_potential_energy(), rel=1e-6)
        assert torch.allclose(graph.y_momenta, torch.full((4, 3), 0.02))
        assert "y_forces" not in graph.keys()
    capsys.readouterr()
    before = out.stat().st_mtime_ns
    assert main(base + ["--heads", "energy,stress"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: --heads: no label 'stress' in the structures; their labels: energy, forces, momenta"
    assert out.stat().st_mtime_ns == before
    assert main(["build-graphs", "--scale", "mesoscale", str(path), "-o", str(out), "--heads", "energy"]) == 2
    assert "--heads applies to --scale atomic" in capsys.readouterr().err


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_inside_a_file_of_many_structures(tmp_path, workers, capsys):
    """Without --no-progress a bar counts the structures of a file, not only the files."""
    frames = _emt_frames(3) * 40
    path = tmp_path / "many.extxyz"
    ase.io.write(path, frames)
    out = tmp_path / "many.bp"
    assert main(["build-graphs", "--scale", "atomic", str(path), str(path.with_name("few.extxyz")), "-o", str(out),
                 "--workers", str(workers)]) == 1  # few.extxyz does not exist
    err = capsys.readouterr().err
    assert "structures: 100%" in err and "120/120" in err
    assert "building atomic graphs: 100%" in err and "2/2" in err


def test_structure_reports_come_per_batch(tmp_path):
    from graph_builders.batch_build import PROGRESS_BATCH, BatchBuildOptions, build_file

    ase.io.write(tmp_path / "many.extxyz", _emt_frames(3) * 40)
    reports: list[tuple[str, int]] = []
    outcome = build_file(tmp_path / "many.extxyz", BatchBuildOptions("atomic"),
                         report=lambda kind, count: reports.append((kind, count)))
    assert len(outcome.graphs) == 120 and PROGRESS_BATCH == 50
    assert reports == [("read", 120), ("built", 50), ("built", 50), ("built", 20)]


def test_labels_not_shared_by_every_structure_are_refused_with_the_notes(tmp_path, capsys):
    """A labelled file and a POSCAR together: energy is in 3 of 4 structures, so no head; the notes
    say which label was dropped and the error points at them."""
    ase.io.write(tmp_path / "cells.extxyz", _emt_frames(3))
    ase.io.write(tmp_path / "POSCAR", _emt_frames(1, seed=9)[0], format="vasp")
    out = tmp_path / "mixed.bp"
    assert main(["build-graphs", "--scale", "atomic", str(tmp_path / "cells.extxyz"), str(tmp_path / "POSCAR"),
                 "-o", str(out), "--no-progress"]) == 2
    printed = capsys.readouterr()
    assert "note: target 'energy' dropped: present in 3 of 4 graphs" in printed.out
    assert "error: no label is stored alike with every one of the 4 structures" in printed.err
    assert not out.exists()


def test_worker_processes_return_many_graphs_within_few_file_descriptors(tmp_path):
    """Graphs come back from the workers pickled, not as shared memory (one descriptor per tensor):
    150 structures under a limit of 256 open files (5,000 ran out of the usual limits)."""
    import resource

    from graph_builders.batch_build import BatchBuildOptions, build_graphs

    ase.io.write(tmp_path / "many.extxyz", _emt_frames(3) * 50)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    try:
        result = build_graphs([tmp_path / "many.extxyz"], BatchBuildOptions("atomic"), workers=2, progress=False)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(result.graphs) == 150 and not result.failures
    assert [g.name for g in result.graphs] == [f"{tmp_path / 'many.extxyz'}:{k}" for k in range(150)]
