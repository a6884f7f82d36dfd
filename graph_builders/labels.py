"""The labels stored with an atomic structure (what ASE reads from extxyz, VASP, ... files), as heads.

Where ASE puts them and what they become:

* the calculator results (``atoms.calc.results``; extxyz ``energy=``, ``forces`` columns, ...):
  the properties of :data:`KNOWN_RESULTS`, each with its level and unit (energy in eV is the
  structure's total, stress in ASE's Voigt order and sign in eV/Å^3);
* numbers in ``atoms.info`` (a scalar or a fixed-length vector per structure): graph heads;
* numeric per-atom arrays in ``atoms.arrays``: node heads, except the inputs and bookkeeping of
  :data:`NOT_LABEL_ARRAYS` (momenta, masses, tags, initial_*, a CIF's spacegroup_kinds, ...), which
  become heads only when asked for by name (``heads``); ``numbers`` and ``positions`` never do.

``heads`` (``build-graphs --heads``) chooses which of the labels become heads. Labels from ``info``
and ``arrays`` have no unit unless the caller gives one (``build-graphs --units NAME=UNIT``).
Everything else (text, booleans, nested values, names that are not Python identifiers, inputs,
labels not chosen) is left out with the reason, so nothing is dropped silently.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

import numpy as np

#: calculator properties kept as heads: name -> (level, unit)
KNOWN_RESULTS: dict[str, tuple[str, str]] = {
    "energy": ("graph", "eV"),
    "free_energy": ("graph", "eV"),
    "forces": ("node", "eV/Å"),
    "stress": ("graph", "eV/Å^3"),
    "energies": ("node", "eV"),
    "magmom": ("graph", "μB"),
    "magmoms": ("node", "μB"),
    "charges": ("node", "e"),
    "dipole": ("graph", "e Å"),
}
_INPUT = "an input of a calculation (ASE's own array), not a label"
_LAMMPS = "LAMMPS data bookkeeping (atom ids, types, image flags, force-field charges), not a label"
#: per-atom arrays that are inputs or bookkeeping, not labels: name -> why (``heads`` can ask for one)
NOT_LABEL_ARRAYS: dict[str, str] = {
    "momenta": _INPUT, "masses": _INPUT, "tags": _INPUT, "initial_magmoms": _INPUT, "initial_charges": _INPUT,
    "spacegroup_kinds": "the CIF's index of each atom's symmetry-distinct site, not a label",
    "oxi_states": "oxidation states pymatgen assigned, an input, not a label",
    "velocities": "an input of a dynamics run, not a label",
    "id": _LAMMPS, "type": _LAMMPS, "travel": _LAMMPS, "mmcharges": _LAMMPS,
}
#: per-atom arrays that are the graph itself (z, pos): never heads
GRAPH_ARRAYS: frozenset[str] = frozenset({"numbers", "positions"})


@dataclass
class StructureLabels:
    """One structure's labels: ``targets`` (name -> [1, d] graph or [N, d] node array, float64),
    ``units`` (name -> unit, "" when unknown), ``left_out`` (key -> why it is not a head) and
    ``available`` (every label that a ``heads`` choice could name)."""

    targets: dict[str, np.ndarray] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # name -> "results", "info" or "arrays"
    left_out: dict[str, str] = field(default_factory=dict)
    available: set[str] = field(default_factory=set)


@dataclass
class _Candidate:
    """A numeric label that can become a head; ``not_label`` says why it is not one by default."""

    array: np.ndarray
    source: str
    where: str  # the key of ``left_out`` ("info NAME", "arrays NAME" or NAME for results)
    unit: str = ""
    not_label: str = ""


def _voigt(stress: np.ndarray) -> np.ndarray:
    """ASE stress as 6 Voigt components (xx yy zz yz xz xy) from a 6-vector or a 3x3 matrix."""
    if stress.shape == (3, 3):
        return stress[[0, 1, 2, 1, 0, 0], [0, 1, 2, 2, 2, 1]]
    return stress.reshape(-1)


def _numeric(value: Any) -> np.ndarray | None:
    """``value`` as a float64 array when it is a real number or an array of them, else None."""
    if isinstance(value, (bool, np.bool_)) or isinstance(value, (str, bytes)):
        return None
    if isinstance(value, numbers.Real):
        return np.asarray([float(value)], dtype=np.float64)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):
        return None
    if array.dtype.kind not in "iuf" or array.size == 0:
        return None
    return array.astype(np.float64)


def not_a_label(name: str) -> str:
    """Why the per-atom array ``name`` is not a label by default ("" when it is one)."""
    if name in NOT_LABEL_ARRAYS:
        return NOT_LABEL_ARRAYS[name]
    if name.startswith("initial_"):
        return "an initial value, an input of a calculation, not a label"
    return ""


def structure_labels(atoms: Any, units: Mapping[str, str] | None = None,
                     heads: Collection[str] | None = None) -> StructureLabels:
    """The labels of ``atoms`` (ASE Atoms) as heads (see the module docstring); ``units`` gives or
    overrides the unit of a label by name; ``heads`` (names) keeps only those labels, and may name
    an input array such as ``momenta``. Never computes anything: a calculator that is not a stored
    result (e.g. EMT attached by the caller) contributes only the results it holds."""
    out = StructureLabels()
    candidates = _candidates(atoms, out.left_out)
    out.available = set(candidates)
    chosen = None if heads is None else set(heads)
    for name, candidate in candidates.items():
        if chosen is not None and name not in chosen:
            out.left_out[candidate.where] = "not chosen with --heads"
        elif chosen is None and candidate.not_label:
            out.left_out[candidate.where] = candidate.not_label
        else:
            out.targets[name] = candidate.array
            out.units[name] = candidate.unit
            out.sources[name] = candidate.source
    for name, unit in dict(units or {}).items():
        if name in out.targets:
            out.units[name] = unit
    return out


def _candidates(atoms: Any, left_out: dict[str, str]) -> dict[str, _Candidate]:
    """Every numeric label of ``atoms`` by name (results, then info, then arrays); what cannot be a
    head at all goes to ``left_out`` with the reason."""
    found: dict[str, _Candidate] = {}
    n = len(atoms)
    results = getattr(getattr(atoms, "calc", None), "results", None) or {}
    for key, value in results.items():
        array = _numeric(value)
        if key not in KNOWN_RESULTS:
            _other(found, left_out, key, array, n)
            continue
        level, unit = KNOWN_RESULTS[key]
        if array is None:
            left_out[key] = "not numeric"
            continue
        if key == "stress":
            array = _voigt(array.reshape(3, 3) if array.size == 9 else array)
        shaped = array.reshape(1, -1) if level == "graph" else array.reshape(n, -1)
        found[key] = _Candidate(shaped, "results", key, unit)
    for key, value in getattr(atoms, "info", {}).items():
        where = f"info {key}"
        if key in found:
            left_out[where] = f"the calculator result {key!r} is used"
            continue
        array = _numeric(value)
        if array is None:
            left_out[where] = "not a number or a vector of numbers"
        elif array.ndim > 1:
            left_out[where] = f"a {array.ndim}-D array (graph labels are numbers or vectors)"
        else:
            _add(found, left_out, key, _Candidate(array.reshape(1, -1), "info", where))
    for key, value in getattr(atoms, "arrays", {}).items():
        where = f"arrays {key}"
        if key in GRAPH_ARRAYS or key in found:
            continue
        array = _numeric(value)
        if array is None or array.shape[0] != n or array.ndim > 2:
            left_out[where] = not_a_label(key) or "not a numeric per-atom array"
        else:
            _add(found, left_out, key, _Candidate(array.reshape(n, -1), "arrays", where, not_label=not_a_label(key)))
    return found


def _other(found: dict[str, _Candidate], left_out: dict[str, str], key: str, array: np.ndarray | None,
           n: int) -> None:
    """A calculator result this module does not know: a node head when it has one row per atom."""
    if array is None:
        left_out[key] = "not numeric"
        return
    shaped = array.reshape(n, -1) if array.ndim >= 1 and array.shape[0] == n and n > 1 else array.reshape(1, -1)
    _add(found, left_out, key, _Candidate(shaped, "results", key))


def _add(found: dict[str, _Candidate], left_out: dict[str, str], name: str, candidate: _Candidate) -> None:
    """Keep ``candidate`` under ``name`` unless the name cannot be a head's (heads are y_<name>)."""
    if not name.isidentifier():
        left_out[candidate.where] = "the name is not a Python identifier (heads are y_<name>)"
        return
    found[name] = candidate
