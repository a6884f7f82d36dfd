"""The labels stored with an atomic structure (what ASE reads from extxyz, VASP, ... files), as heads.

Where ASE puts them and what they become:

* the calculator results (``atoms.calc.results``; extxyz ``energy=``, ``forces`` columns, ...):
  the properties of :data:`KNOWN_RESULTS`, each with its level and unit (energy in eV is the
  structure's total, stress in ASE's Voigt order and sign in eV/Å^3);
* numbers in ``atoms.info`` (a scalar or a fixed-length vector per structure): graph heads;
* numeric per-atom arrays in ``atoms.arrays`` other than ASE's own inputs (:data:`INPUT_ARRAYS`):
  node heads.

Labels from ``info`` and ``arrays`` have no unit unless the caller gives one (``build-graphs
--units NAME=UNIT``). Everything else (text, booleans, nested values, names that are not Python
identifiers, ASE's own input arrays) is left out with the reason, so nothing is dropped silently.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping

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
#: per-atom arrays that are inputs of a calculation, not labels
INPUT_ARRAYS: frozenset[str] = frozenset({
    "numbers", "positions", "momenta", "masses", "tags", "initial_magmoms", "initial_charges",
})


@dataclass
class StructureLabels:
    """One structure's labels: ``targets`` (name -> [1, d] graph or [N, d] node array, float64),
    ``units`` (name -> unit, "" when unknown) and ``left_out`` (key -> why it is not a head)."""

    targets: dict[str, np.ndarray] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # name -> "results", "info" or "arrays"
    left_out: dict[str, str] = field(default_factory=dict)


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


def structure_labels(atoms: Any, units: Mapping[str, str] | None = None) -> StructureLabels:
    """The labels of ``atoms`` (ASE Atoms) as heads (see the module docstring); ``units`` gives or
    overrides the unit of a label by name. Never computes anything: a calculator that is not a
    stored result (e.g. EMT attached by the caller) contributes only the results it holds."""
    out = StructureLabels()
    n = len(atoms)
    given = dict(units or {})
    results = getattr(getattr(atoms, "calc", None), "results", None) or {}
    for key, value in results.items():
        array = _numeric(value)
        if key not in KNOWN_RESULTS:
            _other(out, key, array, n, "results")
            continue
        level, unit = KNOWN_RESULTS[key]
        if array is None:
            out.left_out[key] = "not numeric"
            continue
        if key == "stress":
            array = _voigt(array.reshape(3, 3) if array.size == 9 else array)
        out.targets[key] = array.reshape(1, -1) if level == "graph" else array.reshape(n, -1)
        out.units[key] = unit
        out.sources[key] = "results"
    for key, value in getattr(atoms, "info", {}).items():
        if key in out.targets:
            out.left_out[f"info {key}"] = f"the calculator result {key!r} is used"
            continue
        array = _numeric(value)
        if array is None:
            out.left_out[f"info {key}"] = "not a number or a vector of numbers"
        elif array.ndim > 1:
            out.left_out[f"info {key}"] = f"a {array.ndim}-D array (graph labels are numbers or vectors)"
        else:
            _add(out, key, array.reshape(1, -1), "info", f"info {key}")
    for key, value in getattr(atoms, "arrays", {}).items():
        if key in ("numbers", "positions") or key in out.targets:
            continue
        if key in INPUT_ARRAYS:
            out.left_out[f"arrays {key}"] = "an input of a calculation (ASE's own array), not a label"
            continue
        array = _numeric(value)
        if array is None or array.shape[0] != n or array.ndim > 2:
            out.left_out[f"arrays {key}"] = "not a numeric per-atom array"
        else:
            _add(out, key, array.reshape(n, -1), "arrays", f"arrays {key}")
    for name, unit in given.items():
        if name in out.targets:
            out.units[name] = unit
    return out


def _other(out: StructureLabels, key: str, array: np.ndarray | None, n: int, source: str) -> None:
    """A calculator result this module does not know: a node head when it has one row per atom."""
    if array is None:
        out.left_out[key] = "not numeric"
        return
    shaped = array.reshape(n, -1) if array.ndim >= 1 and array.shape[0] == n and n > 1 else array.reshape(1, -1)
    _add(out, key, shaped, source, key)


def _add(out: StructureLabels, name: str, array: np.ndarray, source: str, where: str) -> None:
    if not name.isidentifier():
        out.left_out[where] = "the name is not a Python identifier (heads are y_<name>)"
        return
    out.targets[name] = array
    out.units.setdefault(name, "")
    out.sources[name] = source
