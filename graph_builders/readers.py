"""Read atomic structures from files (anything ASE reads) and convert pymatgen objects to ASE Atoms.

``read_structures`` detects the format from the file name and content (extxyz, CIF, POSCAR/CONTCAR,
ASE databases, LAMMPS data files, ...); every failure becomes a :class:`StructureReadError` that
names the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ase.io
from ase import Atoms
from ase.io.formats import UnknownFileTypeError, filetype, ioformats

# File-name suffixes (lower case) that mean a LAMMPS data file; ASE does not guess this format.
LAMMPS_DATA_SUFFIXES = (".data", ".lmp", ".lammps", ".lammpsdata")
# Base-name prefixes (upper case) of VASP structure files, which usually have no extension.
VASP_NAME_PREFIXES = ("POSCAR", "CONTCAR")


class InvalidStructureError(ValueError):
    """A structure cannot be turned into a graph; the message names the sample and the problem."""


class StructureReadError(InvalidStructureError):
    """A structure file cannot be read; the message names the file and the problem."""


def detect_format(path: str | Path) -> str:
    """ASE format name for ``path``: LAMMPS data and VASP names first, then ASE's own detection.

    Raises StructureReadError when the format cannot be recognised.
    """
    path = Path(path)
    name = path.name
    if name.lower().endswith(LAMMPS_DATA_SUFFIXES) or name.lower().startswith("data."):
        return "lammps-data"
    if name.upper().startswith(VASP_NAME_PREFIXES) or name.lower().endswith((".vasp", ".poscar")):
        return "vasp"
    try:
        fmt = filetype(str(path), read=True, guess=True)
    except UnknownFileTypeError as exc:
        raise StructureReadError(f"{path}: unrecognised structure file format ({exc})") from exc
    if fmt not in ioformats or not ioformats[fmt].can_read:
        raise StructureReadError(f"{path}: unrecognised structure file format ({fmt!r})")
    return fmt


def read_structures(path: str | Path, index: str | int = ":", format: str | None = None) -> list[Atoms]:
    """Read every structure selected by ``index`` (ASE slice syntax, default all) from ``path``.

    ``format`` overrides the detection (any ASE format name). Missing, empty, truncated or
    unparseable files raise :class:`StructureReadError` naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise StructureReadError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise StructureReadError(f"{path}: file is empty")
    fmt = format or detect_format(path)
    try:
        result = ase.io.read(str(path), index=index, format=fmt)
    except Exception as exc:  # ASE raises many types (ValueError, IndexError, StopIteration, ...)
        raise StructureReadError(
            f"{path}: cannot read as {fmt!r} (truncated or malformed file?): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    structures = [result] if isinstance(result, Atoms) else list(result)
    if not structures:
        raise StructureReadError(f"{path}: contains no structures (format {fmt!r}, index {index!r})")
    for k, atoms in enumerate(structures):
        if len(atoms) == 0:
            raise StructureReadError(f"{path}: structure {k} has no atoms")
    return structures


def structure_to_atoms(obj: Any) -> Atoms:
    """Return ``obj`` as ASE Atoms: Atoms are returned as they are (no copy); pymatgen ``Structure``
    and ``Molecule`` (and their immutable variants) are converted with ``AseAtomsAdaptor``.

    Raises TypeError for other objects and InvalidStructureError when pymatgen cannot convert
    (for example a disordered structure with partial occupancies).
    """
    if isinstance(obj, Atoms):
        return obj
    from pymatgen.core import IMolecule, IStructure  # Structure/Molecule are subclasses
    from pymatgen.io.ase import AseAtomsAdaptor

    if not isinstance(obj, (IStructure, IMolecule)):
        raise TypeError(
            f"expected ase.Atoms or a pymatgen Structure/Molecule, got {type(obj).__name__}"
        )
    if not obj.is_ordered:
        raise InvalidStructureError(
            f"{obj.composition.reduced_formula}: disordered structure (partial occupancies) "
            "cannot become an atomic graph; order it first"
        )
    try:
        return AseAtomsAdaptor.get_atoms(obj)
    except (ValueError, KeyError) as exc:
        raise InvalidStructureError(f"cannot convert {type(obj).__name__} to ase.Atoms: {exc}") from exc
