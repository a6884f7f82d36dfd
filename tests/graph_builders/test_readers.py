"""read_structures round trips through real files; errors name the file; structure_to_atoms."""

from __future__ import annotations

import ase.db
import ase.io
import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk

from graph_builders.readers import (
    InvalidStructureError,
    StructureReadError,
    detect_format,
    read_structures,
    structure_to_atoms,
)


def _alloy(seed: int) -> Atoms:
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 1, 1))
    atoms.symbols[[1, 6]] = "Ni"
    atoms.symbols[3] = "Au"
    atoms.set_cell(atoms.cell.array + np.array([[0, 0, 0], [0.3, 0, 0], [0.2, -0.1, 0]]), scale_atoms=True)
    atoms.rattle(0.05, seed=seed)
    atoms.wrap()
    return atoms


def _assert_same(read: Atoms, original: Atoms, atol: float = 1e-6) -> None:
    assert read.get_chemical_symbols() == original.get_chemical_symbols()
    np.testing.assert_allclose(read.cell.array, original.cell.array, atol=atol)
    np.testing.assert_allclose(read.positions, original.positions, atol=atol)
    assert read.pbc.tolist() == original.pbc.tolist()


def test_extxyz_round_trip_with_several_frames(tmp_path):
    frames = [_alloy(0), _alloy(1), _alloy(2)]
    path = tmp_path / "frames.extxyz"
    ase.io.write(path, frames)
    read = read_structures(path)
    assert len(read) == 3
    for r, f in zip(read, frames):
        _assert_same(r, f)
    assert len(read_structures(path, index="1:")) == 2
    _assert_same(read_structures(path, index=-1)[0], frames[2])


def test_cif_round_trip(tmp_path):
    atoms = _alloy(3)
    path = tmp_path / "alloy.cif"
    ase.io.write(path, atoms)
    (read,) = read_structures(path)
    assert detect_format(path) == "cif"
    # CIF stores cell parameters, so compare the geometry through fractional coordinates/lengths.
    assert read.get_chemical_symbols() == atoms.get_chemical_symbols()
    np.testing.assert_allclose(read.cell.cellpar(), atoms.cell.cellpar(), atol=1e-4)
    np.testing.assert_allclose(read.get_scaled_positions(), atoms.get_scaled_positions(), atol=1e-5)


@pytest.mark.parametrize("filename", ["POSCAR", "CONTCAR", "POSCAR_relaxed", "cell.vasp"])
def test_vasp_names_without_extension(tmp_path, filename):
    atoms = _alloy(4)
    path = tmp_path / filename
    ase.io.write(path, atoms, format="vasp", direct=True)
    assert detect_format(path) == "vasp"
    (read,) = read_structures(path)
    # POSCAR groups atoms by element; compare as sorted (symbol, position) sets.
    order_a = np.lexsort((atoms.positions[:, 2], atoms.numbers))
    order_r = np.lexsort((read.positions[:, 2], read.numbers))
    assert read.numbers[order_r].tolist() == atoms.numbers[order_a].tolist()
    np.testing.assert_allclose(read.positions[order_r], atoms.positions[order_a], atol=1e-6)
    np.testing.assert_allclose(read.cell.array, atoms.cell.array, atol=1e-6)


def test_ase_db_round_trip(tmp_path):
    frames = [_alloy(5), _alloy(6)]
    path = tmp_path / "structures.db"
    with ase.db.connect(path) as db:
        for atoms in frames:
            db.write(atoms)
    read = read_structures(path)
    assert detect_format(path) == "db"
    assert len(read) == 2
    for r, f in zip(read, frames):
        _assert_same(r, f)


@pytest.mark.parametrize("filename", ["alloy.data", "alloy.lmp", "data.alloy"])
def test_lammps_data_round_trip(tmp_path, filename):
    atoms = _alloy(7)
    path = tmp_path / filename
    ase.io.write(path, atoms, format="lammps-data", masses=True, atom_style="atomic")
    assert detect_format(path) == "lammps-data"
    (read,) = read_structures(path)
    _assert_same(read, atoms)


def test_truncated_extxyz_names_the_file(tmp_path):
    path = tmp_path / "cut.extxyz"
    ase.io.write(path, [_alloy(0), _alloy(1)])
    text = path.read_text()
    path.write_text(text[: int(len(text) * 0.75)])
    with pytest.raises(StructureReadError, match=r"cut\.extxyz: cannot read as 'extxyz'") as info:
        read_structures(path)
    assert str(path) in str(info.value)


def test_truncated_poscar_names_the_file(tmp_path):
    path = tmp_path / "POSCAR"
    ase.io.write(path, _alloy(0), format="vasp")
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:9]) + "\n")  # header + 1 of 8 positions
    with pytest.raises(StructureReadError, match=rf"^{path}: cannot read as 'vasp'"):
        read_structures(path)


def test_garbage_empty_and_missing_files(tmp_path):
    garbage = tmp_path / "noise.cif"
    garbage.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(StructureReadError, match=rf"^{garbage}: "):
        read_structures(garbage)
    unknown = tmp_path / "noise.bin"
    unknown.write_bytes(bytes(range(256)))
    with pytest.raises(StructureReadError, match=rf"^{unknown}: unrecognised structure file format"):
        read_structures(unknown)
    empty = tmp_path / "empty.extxyz"
    empty.write_text("")
    with pytest.raises(StructureReadError, match=rf"^{empty}: file is empty"):
        read_structures(empty)
    missing = tmp_path / "missing.cif"
    with pytest.raises(StructureReadError, match=rf"^{missing}: no such file"):
        read_structures(missing)
    assert issubclass(StructureReadError, ValueError)


def test_structure_to_atoms_accepts_pymatgen_and_rejects_others():
    from pymatgen.core import Lattice, Molecule, Structure

    atoms = _alloy(8)
    assert structure_to_atoms(atoms) is atoms
    structure = Structure(Lattice(atoms.cell.array), atoms.get_chemical_symbols(), atoms.positions,
                          coords_are_cartesian=True)
    converted = structure_to_atoms(structure)
    _assert_same(converted, atoms)
    molecule = Molecule(["C", "O"], [[0, 0, 0], [0, 0, 1.13]])
    mol_atoms = structure_to_atoms(molecule)
    assert mol_atoms.get_chemical_symbols() == ["C", "O"]
    assert not mol_atoms.pbc.any()
    disordered = Structure(Lattice.cubic(3.6), [{"Cu": 0.5, "Ni": 0.5}], [[0, 0, 0]])
    with pytest.raises(InvalidStructureError, match=r"^Cu0.5Ni0.5: disordered structure \(partial occupancies\)"):
        structure_to_atoms(disordered)
    with pytest.raises(TypeError, match="got dict"):
        structure_to_atoms({"symbols": "Cu"})
