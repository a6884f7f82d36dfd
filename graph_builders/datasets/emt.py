"""ASE's EMT potential for the alloy data: a faster neighbour list, element references.

EMT's own neighbour list (``ase.neighborlist.PrimitiveNeighborList``) takes ~60% of its run time;
:class:`FastEMT` is ASE's EMT with that list replaced by a vesin one (same pairs, so the same
energies, forces and stresses; ``tests/graph_builders/test_alloy.py`` checks against plain EMT).
:func:`emt_reference` gives a pure element's EMT equilibrium FCC lattice constant and energy, the
references of formation energies and of Vegard's law.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import vesin
from ase import Atoms
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.emt import parameters as EMT_PARAMETERS
from ase.data import atomic_numbers, reference_states
from scipy.optimize import minimize_scalar

# Elements with EMT parameters that are FCC metals (EMT's H, C, N, O are not).
EMT_FCC_METALS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")


class AlloyConfigError(ValueError):
    """An alloy dataset parameter is invalid (unknown element, bad size or component range)."""


@dataclass(frozen=True)
class ElementReference:
    """An element's EMT equilibrium FCC lattice constant (Å) and energy per atom there (eV)."""

    symbol: str
    lattice_constant: float
    energy_per_atom: float


class _VesinNeighbourList:
    """The two methods of ``ase.neighborlist.NeighborList`` that EMT uses, backed by vesin."""

    def __init__(self, cutoff: float) -> None:
        self._calculator = vesin.NeighborList(cutoff=cutoff, full_list=True, sorted=True, n_threads=1)
        self.nupdates = 0

    def update(self, atoms: Atoms) -> bool:
        pairs, shifts = self._calculator.compute(
            atoms.positions, atoms.cell.array, atoms.pbc, quantities="PS"
        )
        pairs = pairs.astype(np.intp)
        self._neighbours = pairs[:, 1]
        self._shifts = shifts.astype(np.float64)
        self._starts = np.searchsorted(pairs[:, 0], np.arange(len(atoms) + 1))
        self.nupdates += 1
        return True

    def get_neighbors(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        start, stop = self._starts[index], self._starts[index + 1]
        return self._neighbours[start:stop], self._shifts[start:stop]


class FastEMT(EMT):
    """ASE's EMT calculator with its neighbour list computed by vesin (identical results)."""

    def initialize(self, atoms: Atoms) -> None:
        super().initialize(atoms)
        # EMT keeps pairs with r < rc_list; the small margin only adds pairs it discards itself.
        self.nl = _VesinNeighbourList(self.rc_list + 0.01)


def emt_reference(symbol: str) -> ElementReference:
    """Minimise the EMT energy of the pure FCC element over the lattice constant."""
    check_symbols([symbol])
    guess = float(reference_states[atomic_numbers[symbol]]["a"])

    def energy_per_atom(a: float) -> float:
        atoms = bulk(symbol, "fcc", a=a)
        atoms.calc = EMT()
        return float(atoms.get_potential_energy()) / len(atoms)

    result = minimize_scalar(
        energy_per_atom, bounds=(0.9 * guess, 1.1 * guess), method="bounded",
        options={"xatol": 1e-7},
    )
    return ElementReference(symbol, float(result.x), float(result.fun))


def check_symbols(symbols: Sequence[str]) -> None:
    for symbol in symbols:
        if symbol not in atomic_numbers or symbol == "X":
            raise AlloyConfigError(f"unknown element symbol {symbol!r}")
        if symbol not in EMT_FCC_METALS:
            reason = "has no EMT parameters" if symbol not in EMT_PARAMETERS else "is not an FCC metal in EMT"
            raise AlloyConfigError(
                f"element {symbol!r} {reason}; supported: {', '.join(EMT_FCC_METALS)}"
            )
    duplicates = sorted({s for s in symbols if list(symbols).count(s) > 1})
    if duplicates:
        raise AlloyConfigError(f"duplicate elements {duplicates}")
