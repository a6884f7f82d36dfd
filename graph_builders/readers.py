"""Read atomic structures from files (anything ASE reads, and pymatgen's own JSON) as ASE Atoms.

``read_structures`` detects the format from the file name and content:

* the extension decides when it names a format (``data.extxyz`` is extxyz, ``POSCAR.cif`` a CIF);
* without one, LAMMPS data names (``*.data``, ``*.lmp``, ``data.*``) and VASP names (``POSCAR*``,
  ``CONTCAR*``) are recognised, then ASE's own detection (``OUTCAR``, ``vasprun.xml``, magic bytes);
* a JSON file holding a pymatgen ``Structure``/``Molecule`` (``Structure.to(filename=...)``), or a
  list of them (monty's ``dumpfn``), is read through pymatgen and converted with ``AseAtomsAdaptor``;
  any other JSON is an ASE database.

Every failure becomes a :class:`StructureReadError` that names the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ase.io
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io.formats import UnknownFileTypeError, extension2format, filetype, get_compression, ioformats
from ase.utils import string2index

# File-name suffixes (lower case) that mean a LAMMPS data file; ASE does not guess this format.
LAMMPS_DATA_SUFFIXES = (".data", ".lmp", ".lammps", ".lammpsdata")
# Base-name prefixes (upper case) of VASP structure files, which usually have no extension.
VASP_NAME_PREFIXES = ("POSCAR", "CONTCAR")
#: the format name :func:`detect_format` gives a JSON file of pymatgen objects
PYMATGEN_JSON = "pymatgen-json"
#: pymatgen classes read from JSON, by their "@class"
PYMATGEN_CLASSES = ("Structure", "IStructure", "Molecule", "IMolecule")
# pymatgen ``properties`` / ``site_properties`` taken as calculator results, as ASE's extxyz reader
# takes ``energy=`` and a ``forces`` column (eV, eV/Å: pymatgen's convention for these names).
PYMATGEN_RESULTS_INFO = ("energy", "free_energy")
PYMATGEN_RESULTS_ARRAYS = ("forces",)
_SNIFF_BYTES = 1 << 16


class InvalidStructureError(ValueError):
    """A structure cannot be turned into a graph; the message names the sample and the problem."""


class StructureReadError(InvalidStructureError):
    """A structure file cannot be read; the message names the file and the problem."""


def _extension(name: str) -> str | None:
    """The lower-case extension of ``name`` (compression suffixes such as .gz stripped), or None."""
    root, _ = get_compression(name)
    stem, dot, ext = root.rpartition(".")
    return ext.lower() if dot and stem else None


def _names_a_format(ext: str | None) -> bool:
    """True when ``ext`` is an extension or a format name ASE knows (it reads or guesses from it)."""
    if ext is None:
        return False
    return ext in extension2format or (ext in ioformats and ioformats[ext].can_read) or ext == "xml"


def _is_pymatgen_json(path: Path) -> bool:
    """True when the file's start holds a pymatgen (MSON) object: a dict with "@module" and "@class"."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES).lstrip()
    except OSError:
        return False
    return head[:1] in (b"{", b"[") and b'"@module"' in head and b'"@class"' in head


def detect_format(path: str | Path) -> str:
    """Format name for ``path``: an ASE format, or :data:`PYMATGEN_JSON`.

    The extension wins when it names a format; otherwise LAMMPS data and VASP names, then ASE's own
    detection. A JSON file is told apart by content (pymatgen object or ASE database). Raises
    StructureReadError when the format cannot be recognised.
    """
    path = Path(path)
    name = path.name
    ext = _extension(name)
    if name.lower().endswith(LAMMPS_DATA_SUFFIXES):
        return "lammps-data"
    if not _names_a_format(ext):
        if name.lower().startswith("data."):
            return "lammps-data"
        if name.upper().startswith(VASP_NAME_PREFIXES):
            return "vasp"
    try:
        fmt = filetype(str(path), read=True, guess=True)
    except UnknownFileTypeError as exc:
        raise StructureReadError(f"{path}: unrecognised structure file format ({exc})") from exc
    if fmt == "json" and _is_pymatgen_json(path):
        return PYMATGEN_JSON
    if fmt not in ioformats or not ioformats[fmt].can_read:
        raise StructureReadError(f"{path}: unrecognised structure file format ({fmt!r})")
    return fmt


def _readable_format(path: Path, format: str | None) -> str:
    """``format``, else the detected one, of an existing non-empty file (StructureReadError otherwise)."""
    if not path.is_file():
        raise StructureReadError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise StructureReadError(f"{path}: file is empty")
    return format or detect_format(path)


def read_structures(path: str | Path, index: str | int = ":", format: str | None = None) -> list[Atoms]:
    """Read every structure selected by ``index`` (ASE slice syntax, default all) from ``path``.

    ``format`` overrides the detection (any ASE format name, or :data:`PYMATGEN_JSON`). Missing,
    empty, truncated or unparseable files raise :class:`StructureReadError` naming the file.
    """
    path = Path(path)
    fmt = _readable_format(path, format)
    if fmt == PYMATGEN_JSON:
        structures = read_pymatgen_json(path, index)
    else:
        structures = _read_with_ase(path, index, fmt)
    if not structures:
        raise StructureReadError(f"{path}: contains no structures (format {fmt!r}, index {index!r})")
    for k, atoms in enumerate(structures):
        if len(atoms) == 0:
            raise StructureReadError(f"{path}: structure {k} has no atoms")
    return structures


def _read_with_ase(path: Path, index: str | int, fmt: str) -> list[Atoms]:
    """``ase.io.read`` of ``path`` as ``fmt``, every failure a StructureReadError naming the file."""
    try:
        # parallel=False: under MPI every rank reads for itself (ASE's default reads on rank 0 and
        # broadcasts, a collective call that hangs when the ranks read different files)
        result = ase.io.read(str(path), index=index, format=fmt, parallel=False)
    except Exception as exc:  # ASE raises many types (ValueError, IndexError, StopIteration, ...)
        raise StructureReadError(
            f"{path}: cannot read as {fmt!r} (truncated or malformed file?): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return [result] if isinstance(result, Atoms) else list(result)


def iter_structures(path: str | Path, start: int = 0, step: int = 1, format: str | None = None) -> Iterator[Atoms]:
    """Structures ``start``, ``start + step``, ... of ``path``, one at a time (memory holds one
    structure, plus the frame table of formats such as extxyz, which ASE scans once).

    A generator over ``ase.io.iread`` (one pass over the file; ASE parses only the frames selected),
    unlike reading slices ``"a:b"`` one after the other, which rescans the file from its start for
    every slice. A file of a single-structure format (POSCAR, LAMMPS data) holds structure 0 only.
    Errors as :func:`read_structures`, raised when reached: structures before a truncation are
    yielded first. A file without any structure gives nothing (no error).
    """
    path = Path(path)
    if start < 0 or step < 1:
        raise ValueError(f"start must be >= 0 and step >= 1, got {start}, {step}")
    fmt = _readable_format(path, format)
    if fmt == PYMATGEN_JSON:
        yield from read_pymatgen_json(path, f"{start}::{step}")
        return
    if ioformats[fmt].single:
        if start == 0:
            yield from read_structures(path, 0, fmt)
        return
    frames = ase.io.iread(str(path), index=slice(start, None, step), format=fmt, parallel=False)
    position = start
    while True:
        try:
            atoms = next(frames)
        except StopIteration:
            return
        except Exception as exc:  # as _read_with_ase: ASE raises many types
            raise StructureReadError(f"{path}: cannot read structure {position} as {fmt!r} (truncated or "
                                     f"malformed file?): {type(exc).__name__}: {exc}") from exc
        if len(atoms) == 0:
            raise StructureReadError(f"{path}: structure {position} has no atoms")
        yield atoms
        position += step


def read_pymatgen_json(path: str | Path, index: str | int = ":") -> list[Atoms]:
    """The pymatgen ``Structure``/``Molecule`` objects of a JSON file (one object, or a list of them)
    as ASE Atoms, selected by ``index`` (ASE slice syntax).

    The objects are built with pymatgen's ``from_dict`` and converted with ``AseAtomsAdaptor``
    (``properties`` -> ``atoms.info``, site properties -> per-atom arrays); ``energy`` and
    ``free_energy`` in ``properties`` and ``forces`` in the site properties become calculator
    results (eV, eV/Å), as ASE's extxyz reader does with these names. Only pymatgen and numpy
    objects are decoded (nothing else named by "@module" is imported).
    """
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StructureReadError(f"{path}: cannot read as pymatgen JSON: {type(exc).__name__}: {exc}") from exc
    items = data if isinstance(data, list) else [data]
    numbered = list(enumerate(items))
    try:
        chosen = numbered[index] if isinstance(index, int) else numbered[string2index(index)]
    except (IndexError, ValueError, TypeError) as exc:
        raise StructureReadError(f"{path}: no structure at index {index!r} of {len(items)}") from exc
    chosen = [chosen] if isinstance(chosen, tuple) else chosen
    return [_pymatgen_atoms(path, k, item, isinstance(data, list)) for k, item in chosen]


def _pymatgen_atoms(path: Path, k: int, item: Any, in_list: bool) -> Atoms:
    """One JSON object of a pymatgen file as ASE Atoms; StructureReadError naming file and item."""
    from pymatgen.core import IMolecule, IStructure, Molecule, Structure

    where = f"{path}: item {k}" if in_list else f"{path}"
    cls_name = item.get("@class") if isinstance(item, dict) else None
    if cls_name not in PYMATGEN_CLASSES or not str(item.get("@module", "")).startswith("pymatgen"):
        found = f"a pymatgen {cls_name}" if cls_name else f"a JSON {type(item).__name__}"
        raise StructureReadError(f"{where} is {found}, not a pymatgen Structure or Molecule")
    foreign = _foreign_module(item)
    if foreign is not None:
        raise StructureReadError(f"{where}: refusing to decode an object of module {foreign!r} "
                                 "(only pymatgen and numpy objects are read)")
    classes = {"Structure": Structure, "IStructure": IStructure, "Molecule": Molecule, "IMolecule": IMolecule}
    try:
        obj = classes[cls_name].from_dict(item)
        atoms = structure_to_atoms(obj)
    except Exception as exc:  # from_dict of a malformed dict raises many types (KeyError, TypeError, ...)
        raise StructureReadError(f"{where}: cannot read the pymatgen {cls_name}: {type(exc).__name__}: {exc}") \
            from exc
    return _results_from_properties(atoms)


def _foreign_module(value: Any) -> str | None:
    """The first "@module" in ``value`` (nested dicts and lists) that is neither pymatgen's nor numpy's."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            module = item.get("@module")
            if isinstance(module, str) and not (module.startswith("pymatgen") or module == "numpy"):
                return module
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _results_from_properties(atoms: Atoms) -> Atoms:
    """Move ``energy``/``free_energy`` (info) and ``forces`` (arrays) into a calculator's results."""
    results: dict[str, Any] = {}
    if atoms.calc is not None:
        results.update(getattr(atoms.calc, "results", {}) or {})
    for key in PYMATGEN_RESULTS_INFO:
        if key in atoms.info:
            results[key] = atoms.info.pop(key)
    for key in PYMATGEN_RESULTS_ARRAYS:
        if key in atoms.arrays:
            results[key] = atoms.arrays.pop(key)
    if results:
        atoms.calc = SinglePointCalculator(atoms, **results)
    return atoms


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
