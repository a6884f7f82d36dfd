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


# ------------------------------------------------------------- one test per format, with labels
def _labelled(seed: int) -> Atoms:
    """An alloy cell with its EMT energy and forces stored as a calculator's results."""
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator

    atoms = _alloy(seed)
    atoms.calc = EMT()
    energy, forces = atoms.get_potential_energy(), atoms.get_forces()
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
    return atoms


def _assert_labels(read: Atoms, original: Atoms) -> None:
    """The heads ``structure_labels`` finds in ``read`` are the energy and forces ``original`` carries."""
    from graph_builders.labels import structure_labels

    labels = structure_labels(read)
    assert sorted(labels.targets) == ["energy", "forces"]
    assert labels.targets["energy"][0, 0] == pytest.approx(original.calc.results["energy"], rel=1e-9)
    np.testing.assert_allclose(labels.targets["forces"], original.calc.results["forces"], atol=1e-8)
    assert labels.units == {"energy": "eV", "forces": "eV/Å"}


def _pymatgen(atoms: Atoms):
    """``atoms`` as a pymatgen Structure with its energy (properties) and forces (site properties)."""
    from pymatgen.core import Lattice, Structure

    return Structure(Lattice(atoms.cell.array), atoms.get_chemical_symbols(), atoms.positions,
                     coords_are_cartesian=True, site_properties={"forces": atoms.calc.results["forces"].tolist()},
                     properties={"energy": float(atoms.calc.results["energy"]), "REF_gap": 0.25})


def test_pymatgen_structure_json_is_read_through_pymatgen(tmp_path):
    """``Structure.to(filename=...)`` writes one MSON dict; ``energy`` (properties) and ``forces``
    (site properties) become the calculator's results, other properties stay in info."""
    from pymatgen.core import Molecule

    atoms = _labelled(10)
    path = tmp_path / "cell.json"
    _pymatgen(atoms).to(filename=str(path))
    assert detect_format(path) == "pymatgen-json"
    (read,) = read_structures(path)
    _assert_same(read, atoms)
    _assert_labels_with_info(read, atoms)
    molecule = Molecule(["C", "O"], [[0, 0, 0], [0, 0, 1.13]])
    molecule.to(filename=str(tmp_path / "co.json"))
    (co,) = read_structures(tmp_path / "co.json")
    assert co.get_chemical_symbols() == ["C", "O"] and not co.pbc.any()
    np.testing.assert_allclose(co.positions, molecule.cart_coords)


def _assert_labels_with_info(read: Atoms, original: Atoms) -> None:
    from graph_builders.labels import structure_labels

    labels = structure_labels(read)
    assert sorted(labels.targets) == ["REF_gap", "energy", "forces"]
    assert labels.targets["energy"][0, 0] == pytest.approx(original.calc.results["energy"], rel=1e-12)
    np.testing.assert_allclose(labels.targets["forces"], original.calc.results["forces"], atol=1e-12)
    assert labels.targets["REF_gap"].tolist() == [[0.25]]
    assert labels.units == {"energy": "eV", "forces": "eV/Å", "REF_gap": ""}


def test_json_list_of_pymatgen_structures_and_an_ase_json_database_told_apart(tmp_path):
    """monty's ``dumpfn`` of a list: every structure, index slices; an ASE JSON database with the
    same extension is still read by ASE."""
    from monty.serialization import dumpfn

    frames = [_labelled(11), _labelled(12), _labelled(13)]
    path = tmp_path / "cells.json"
    dumpfn([_pymatgen(a) for a in frames], str(path))
    assert detect_format(path) == "pymatgen-json"
    read = read_structures(path)
    assert len(read) == 3
    for r, f in zip(read, frames):
        _assert_same(r, f)
        _assert_labels_with_info(r, f)
    assert len(read_structures(path, index="1:")) == 2
    _assert_same(read_structures(path, index=-1)[0], frames[2])
    ase_json = tmp_path / "ase.json"
    ase.io.write(ase_json, frames)
    assert detect_format(ase_json) == "json"
    for r, f in zip(read_structures(ase_json), frames):
        _assert_same(r, f)
        _assert_labels(r, f)


def test_pymatgen_json_errors_name_the_file_and_item(tmp_path):
    import json

    from pymatgen.core import Lattice, Structure

    good = Structure(Lattice.cubic(3.6), ["Cu"], [[0, 0, 0]]).as_dict()
    cases = {
        "lattice.json": ([good, Lattice.cubic(3.6).as_dict()],
                         r"item 1 is a pymatgen Lattice, not a pymatgen Structure"),
        "foreign.json": ({**good, "properties": {"x": {"@module": "os", "@class": "x"}}},
                         r"refusing to decode an object of module 'os'"),
        "broken.json": (None, r"cannot read as pymatgen JSON: JSONDecodeError"),
        "bad_site.json": ({**good, "sites": [{"species": [{"element": "Xx", "occu": 1}], "abc": [0, 0, 0]}]},
                          r"cannot read the pymatgen Structure"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        if content is None:
            path.write_text(json.dumps([good])[:-20])
        else:
            path.write_text(json.dumps(content))
        with pytest.raises(StructureReadError, match=rf"^{path}(: item \d)?:? .*{message}"):
            read_structures(path)
    with pytest.raises(StructureReadError, match=r"no structure at index 5 of 2"):
        read_structures(tmp_path / "lattice.json", index=5, format="pymatgen-json")


@pytest.mark.parametrize("filename, fmt", [("data.extxyz", "extxyz"), ("data.xyz", "extxyz"),
                                           ("data.traj", "traj"), ("data.cif", "cif"), ("data.db", "db")])
def test_the_extension_wins_over_the_data_prefix(tmp_path, filename, fmt):
    """``data.extxyz`` is an extxyz file, not LAMMPS data (``data.alloy`` still is: see above)."""
    frames = [_labelled(14), _labelled(15)]
    path = tmp_path / filename
    if fmt == "db":
        with ase.db.connect(path) as db:
            for atoms in frames:
                db.write(atoms)
    else:
        ase.io.write(path, frames if fmt != "cif" else frames[0])
    assert detect_format(path) == fmt
    read = read_structures(path)
    assert len(read) == (1 if fmt == "cif" else 2)
    if fmt != "cif":
        for r, f in zip(read, frames):
            _assert_same(r, f)
            _assert_labels(r, f)


def test_traj_and_db_keep_the_labels(tmp_path):
    frames = [_labelled(16), _labelled(17)]
    ase.io.write(tmp_path / "md.traj", frames)
    with ase.db.connect(tmp_path / "cells.db") as db:
        for atoms in frames:
            db.write(atoms)
    for name in ("md.traj", "cells.db"):
        read = read_structures(tmp_path / name)
        assert len(read) == 2
        for r, f in zip(read, frames):
            _assert_same(r, f)
            _assert_labels(r, f)


def test_cif_spacegroup_kinds_is_not_a_label(tmp_path):
    from graph_builders.labels import structure_labels

    atoms = _alloy(18)
    ase.io.write(tmp_path / "alloy.cif", atoms)
    (read,) = read_structures(tmp_path / "alloy.cif")
    assert "spacegroup_kinds" in read.arrays  # ASE's reader adds it: the index of each atom's site
    labels = structure_labels(read)
    assert labels.targets == {}
    why = labels.left_out["arrays spacegroup_kinds"]
    assert why.startswith("the CIF's index of each atom's symmetry-distinct site")
    assert labels.available == {"spacegroup_kinds"}
    chosen = structure_labels(read, heads=["spacegroup_kinds"])  # asked for by name: a head
    assert chosen.targets["spacegroup_kinds"].tolist() == [[float(k)] for k in read.arrays["spacegroup_kinds"]]


def test_momenta_masses_tags_and_initial_values_are_heads_only_when_asked(tmp_path):
    from graph_builders.labels import structure_labels

    from ase.calculators.singlepoint import SinglePointCalculator

    atoms = _labelled(19)
    results = atoms.calc.results
    atoms.set_momenta(np.full((len(atoms), 3), 0.01))
    atoms.set_masses(np.arange(1.0, len(atoms) + 1.0))
    atoms.set_tags(np.arange(len(atoms)))
    atoms.set_initial_charges(np.full(len(atoms), 0.1))
    atoms.arrays["REF_charge"] = np.full(len(atoms), 0.5)
    atoms.calc = SinglePointCalculator(atoms, **results)  # for these inputs, as an MD step writes it
    ase.io.write(tmp_path / "md.extxyz", atoms)
    (read,) = read_structures(tmp_path / "md.extxyz")
    labels = structure_labels(read)
    assert sorted(labels.targets) == ["REF_charge", "energy", "forces"]
    for key in ("momenta", "masses", "tags", "initial_charges"):
        assert "not a label" in labels.left_out[f"arrays {key}"]
    assert labels.available == {"REF_charge", "energy", "forces", "momenta", "masses", "tags", "initial_charges"}
    chosen = structure_labels(read, heads=("energy", "momenta"))
    assert sorted(chosen.targets) == ["energy", "momenta"]
    np.testing.assert_allclose(chosen.targets["momenta"], atoms.get_momenta())
    assert chosen.left_out["forces"] == chosen.left_out["arrays REF_charge"] == "not chosen with --heads"


def _ase_testdata(name: str):
    """A real VASP output from ASE's own test data (installed with ASE), or skip."""
    from pathlib import Path

    path = Path(ase.__file__).parent / "test" / "testdata" / "vasp" / name
    if not path.is_file():
        pytest.skip(f"ASE's test data {name} is not installed")
    return path


def test_outcar_of_a_real_vasp_run(tmp_path):
    """ASE's OUTCAR example (18 Ni): positions and forces against the file's last TOTAL-FORCE table,
    energies and magnetic moment against pymatgen's OUTCAR parser."""
    import shutil

    from pymatgen.io.vasp import Outcar

    from graph_builders.labels import structure_labels

    path = tmp_path / "OUTCAR"
    shutil.copy(_ase_testdata("OUTCAR_example_1"), path)
    assert detect_format(path) == "vasp-out"
    read = read_structures(path)[-1]
    lines = path.read_text().splitlines()
    start = max(i for i, line in enumerate(lines) if "TOTAL-FORCE" in line) + 2
    table = np.array([[float(x) for x in line.split()] for line in lines[start:start + len(read)]])
    np.testing.assert_allclose(read.positions, table[:, :3], atol=1e-5)
    assert read.get_chemical_symbols() == ["Ni"] * 18
    labels = structure_labels(read)
    np.testing.assert_allclose(labels.targets["forces"], table[:, 3:], atol=1e-6)
    reference = Outcar(str(path))
    assert labels.targets["energy"][0, 0] == pytest.approx(reference.final_energy, abs=1e-6)
    assert labels.targets["free_energy"][0, 0] == pytest.approx(reference.final_fr_energy, abs=1e-6)
    assert labels.targets["magmom"][0, 0] == pytest.approx(reference.total_mag, abs=1e-6)
    assert labels.targets["stress"].shape == (1, 6)


def test_vasprun_xml_of_a_real_vasp_run(tmp_path):
    """ASE's vasprun.xml example (NaCl): structure, energies and stress against pymatgen's parser
    (stress in kbar there, in eV/Å^3 with ASE's sign here)."""
    import shutil

    from ase.units import GPa
    from pymatgen.io.vasp import Vasprun

    from graph_builders.labels import structure_labels

    path = tmp_path / "vasprun.xml"
    shutil.copy(_ase_testdata("vasprun_dfpt.xml"), path)
    assert detect_format(path) == "vasp-xml"
    read = read_structures(path)[-1]
    reference = Vasprun(str(path), parse_potcar_file=False)
    step, structure = reference.ionic_steps[-1], reference.final_structure
    assert read.get_chemical_symbols() == [site.specie.symbol for site in structure]
    np.testing.assert_allclose(read.cell.array, structure.lattice.matrix, atol=1e-6)
    np.testing.assert_allclose(read.positions, structure.cart_coords, atol=1e-6)
    labels = structure_labels(read)
    assert labels.targets["energy"][0, 0] == pytest.approx(step["e_0_energy"], abs=1e-6)
    assert labels.targets["free_energy"][0, 0] == pytest.approx(step["e_fr_energy"], abs=1e-6)
    np.testing.assert_allclose(labels.targets["forces"], step["forces"], atol=1e-8)
    kbar = np.array(step["stress"])
    voigt = kbar[[0, 1, 2, 1, 0, 0], [0, 1, 2, 2, 2, 1]]
    np.testing.assert_allclose(labels.targets["stress"][0], -voigt * 0.1 * GPa, atol=1e-8)
