"""What a head's unit says about energies: its factor to eV, and whether it is a total or per atom.

Plain Python (no torch), so a campaign's rank 0 and the report read units without importing the
graph schema's tensors; :mod:`graph_builders.schema` re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Energy units a head's ``unit`` may name, in eV; ``<unit>/atom`` is the same unit per atom.
ENERGY_UNITS_IN_EV: dict[str, float] = {
    "eV": 1.0,
    "meV": 1e-3,
    "Ha": 27.211386245988,
    "Hartree": 27.211386245988,
    "Ry": 13.605693122994,
    "kcal/mol": 0.0433641043,
    "kJ/mol": 0.0103642688,
}
PER_ATOM_SUFFIX = "/atom"


@dataclass(frozen=True)
class EnergyUnit:
    """What an energy head's unit says: the factor to eV and whether it is per atom or a total."""

    to_ev: float
    per_atom: bool


def energy_unit(unit: str) -> EnergyUnit | None:
    """``"eV"`` -> total in eV, ``"eV/atom"`` -> per atom, ``"meV/atom"``, ``"Ha"``, ``"kcal/mol"`` ...
    (:data:`ENERGY_UNITS_IN_EV`); None when ``unit`` is not an energy unit (``""`` included).

    The unit decides everywhere whether an energy is a total or per atom: in potential-mode
    training (the model's energy head outputs what the labels are), the ASE calculator and
    ``predict``."""
    text = unit.strip()
    per_atom = text.endswith(PER_ATOM_SUFFIX)
    base = text.removesuffix(PER_ATOM_SUFFIX).strip() if per_atom else text
    factor = ENERGY_UNITS_IN_EV.get(base)
    return None if factor is None else EnergyUnit(factor, per_atom)


#: The unit energies per atom are shown in wherever they are compared (the MLIP literature's).
MEV_PER_ATOM = "meV/atom"


def energy_is_total(unit: str) -> bool:
    """Whether ``unit`` is an energy unit of a structure's total (``eV``, ``Ha``, ...; not per atom)."""
    parsed = energy_unit(unit)
    return parsed is not None and not parsed.per_atom


def in_mev_per_atom(value: float, unit: str) -> float | None:
    """``value``, an energy per atom in the energy unit ``unit`` (``eV``, or ``eV/atom``: the same
    per atom), in :data:`MEV_PER_ATOM`; None when ``unit`` is not an energy unit."""
    parsed = energy_unit(unit)
    return None if parsed is None else float(value) * parsed.to_ev * 1000.0
