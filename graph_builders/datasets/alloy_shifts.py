"""Alloys unlike the training cells: the distribution shifts a materials scientist meets.

Each shift makes EMT-labellable structures of the given elements that the alloy generator never
produces, to test whether an ensemble's uncertainty notices them (``bench/uncertainty.py``,
``examples/alloy/new_alloys.py``). Nothing here is ever used to fit anything.

* ``bcc`` / ``hcp``: random substitution on another lattice, at the FCC volume per atom, rattled;
* ``vacancies``: FCC random alloys with 1-3 atoms removed;
* ``surfaces``: (111) and (100) slabs, 4-6 layers, 10 Å of vacuum (periodic in x and y only);
* ``compressed``: FCC random alloys compressed isotropically to 88-94% of their volume, rattled;
* ``tension`` / ``compression``: FCC random alloys at the Vegard lattice constant stretched or
  compressed uniformly by 4-8% (each length), rattled: a thermal expansion or a pressure the
  training cells (random strains up to 3% per component) did not reach;
* ``sheared``: FCC random alloys under a random symmetric strain of 8-12% per component;
* ``more_components``: FCC random alloys with more elements than the training alloys;
* ``unseen_elements``: FCC random alloys with at least one element the training alloys lack;
* ``rattled``: FCC random alloys at small strain with a thermal rattle of 0.10-0.16 Å per
  component (the training cells: up to 0.05 Å), snapshots of a hot crystal;
* ``interstitials``: FCC random alloys with 1-2 extra atoms of the alloy's elements at octahedral
  sites (a self-interstitial: compressed bonds around one atom, the rest of the cell untouched);
* ``segregated``: FCC random alloys whose species are sorted along one axis (two or three layers
  of nearly pure metal): every atom on its lattice, only the chemical order is new.

:func:`make_shift` returns the structures of one shift; ``info["shift"]`` names it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from ase import Atoms
from ase.build import bulk, fcc100, fcc111

from graph_builders.datasets.alloy_structures import random_alloy
from graph_builders.datasets.emt import AlloyConfigError, ElementReference, emt_reference

SHIFTS: tuple[str, ...] = ("bcc", "hcp", "vacancies", "surfaces", "compressed", "tension", "compression", "sheared",
                           "more_components", "unseen_elements", "rattled", "interstitials", "segregated")


def _choose(rng: np.random.Generator, elements: Sequence[str], k: int) -> list[str]:
    return [elements[i] for i in np.sort(rng.choice(len(elements), k, replace=False))]


def _substitute(rng: np.random.Generator, atoms: Atoms, chosen: Sequence[str]) -> Atoms:
    """Random species of ``chosen`` (each at least once) on the sites of ``atoms``."""
    n = len(atoms)
    counts = np.ones(len(chosen), dtype=np.int64) + rng.multinomial(n - len(chosen), rng.dirichlet(np.ones(len(chosen))))
    atoms.set_chemical_symbols(rng.permutation(np.repeat(chosen, counts)).tolist())
    return atoms


def _fcc_constant(refs: dict[str, ElementReference], chosen: Sequence[str]) -> float:
    return float(np.mean([refs[s].lattice_constant for s in chosen]))


def _other_lattice(rng: np.random.Generator, refs: dict[str, ElementReference], elements: Sequence[str],
                   components: tuple[int, int], lattice: str) -> Atoms:
    chosen = _choose(rng, elements, int(rng.integers(components[0], components[1] + 1)))
    volume = _fcc_constant(refs, chosen) ** 3 / 4.0  # per atom
    if lattice == "bcc":
        atoms = bulk("Fe", "bcc", a=(2.0 * volume) ** (1 / 3), cubic=True).repeat((3, 3, 3))
    else:
        a = (volume * 2 / (np.sqrt(3) / 2 * 1.633)) ** (1 / 3)
        atoms = bulk("Mg", "hcp", a=a, c=1.633 * a).repeat((3, 3, 3))
    atoms = _substitute(rng, atoms, chosen)
    atoms.positions += rng.normal(scale=0.03, size=atoms.positions.shape)
    return atoms


def _vacancies(rng: np.random.Generator, refs: dict[str, ElementReference], elements: Sequence[str],
               components: tuple[int, int]) -> Atoms:
    k = int(rng.integers(components[0], components[1] + 1))
    atoms = random_alloy(rng, {s: refs[s] for s in elements}, k, int(rng.choice([32, 48])), 0.01, 0.02)
    del atoms[rng.choice(len(atoms), int(rng.integers(1, 4)), replace=False).tolist()]
    return atoms


def _surface(rng: np.random.Generator, refs: dict[str, ElementReference], elements: Sequence[str],
             components: tuple[int, int]) -> Atoms:
    chosen = _choose(rng, elements, int(rng.integers(components[0], components[1] + 1)))
    a = _fcc_constant(refs, chosen)
    build = fcc111 if rng.random() < 0.5 else fcc100
    atoms = build("Cu", size=(3, 4, int(rng.integers(4, 7))), a=a, vacuum=10.0, orthogonal=True)
    # ASE's slab builders leave the adsorption sites (numpy arrays in a dict) in info, which no
    # extxyz writer can store ("UserWarning: Skipping unhashable information adsorbate_info")
    atoms.info.pop("adsorbate_info", None)
    atoms = _substitute(rng, atoms, chosen)
    atoms.positions += rng.normal(scale=0.02, size=atoms.positions.shape)
    return atoms


def _strained(rng: np.random.Generator, refs: dict[str, ElementReference], elements: Sequence[str],
              components: tuple[int, int], kind: str) -> Atoms:
    k = int(rng.integers(components[0], components[1] + 1))
    atoms = random_alloy(rng, {s: refs[s] for s in elements}, k, 32, 0.0, 0.03)
    if kind == "compressed":
        deformation = np.eye(3) * rng.uniform(0.96, 0.98)  # 6-12% less volume
    elif kind == "tension":
        deformation = np.eye(3) * rng.uniform(1.04, 1.08)
    elif kind == "compression":
        deformation = np.eye(3) * rng.uniform(0.92, 0.96)
    else:
        u = rng.uniform(0.08, 0.12, size=6) * rng.choice([-1.0, 1.0], size=6)
        deformation = np.eye(3) + np.array([[u[0], u[5], u[4]], [u[5], u[1], u[3]], [u[4], u[3], u[2]]])
    atoms.set_cell(atoms.cell.array @ deformation, scale_atoms=True)
    return atoms


def _rattled(rng: np.random.Generator, refs: dict[str, ElementReference], elements: Sequence[str],
             components: tuple[int, int]) -> Atoms:
    k = int(rng.integers(components[0], components[1] + 1))
    return random_alloy(rng, {s: refs[s] for s in elements}, k, int(rng.choice([32, 48])), 0.01,
                        float(rng.uniform(0.10, 0.16)))


def _interstitials(rng: np.random.Generator, refs: dict[str, ElementReference], elements: Sequence[str],
                   components: tuple[int, int]) -> Atoms:
    k = int(rng.integers(components[0], components[1] + 1))
    atoms = random_alloy(rng, {s: refs[s] for s in elements}, k, 32, 0.01, 0.02)
    symbols = sorted(set(atoms.get_chemical_symbols()))
    a = _fcc_constant(refs, symbols)
    for i in rng.choice(len(atoms), int(rng.integers(1, 3)), replace=False):
        # an octahedral site: half a lattice constant from a lattice site along a cube axis
        offset = np.zeros(3)
        offset[int(rng.integers(3))] = 0.5 * a
        atoms += Atoms(symbols[int(rng.integers(len(symbols)))], positions=[atoms.positions[i] + offset])
    atoms.wrap()
    return atoms


def _segregated(rng: np.random.Generator, refs: dict[str, ElementReference], elements: Sequence[str],
                components: tuple[int, int]) -> Atoms:
    k = int(rng.integers(components[0], components[1] + 1))
    atoms = random_alloy(rng, {s: refs[s] for s in elements}, k, int(rng.choice([32, 48])), 0.01, 0.03)
    axis = int(rng.integers(3))
    order = np.argsort(atoms.get_scaled_positions()[:, axis] + 1e-3 * rng.random(len(atoms)))
    symbols = np.array(atoms.get_chemical_symbols())
    layered = np.empty_like(symbols)
    layered[order] = np.sort(symbols)  # the same composition, one species after the other along the axis
    atoms.set_chemical_symbols(layered.tolist())
    return atoms


def _with_components(rng: np.random.Generator, refs: dict[str, ElementReference], elements: Sequence[str],
                     components: tuple[int, int], must_have: Sequence[str] = ()) -> Atoms:
    k = int(rng.integers(components[0], components[1] + 1))
    rest = [e for e in elements if e not in must_have]
    chosen = list(must_have[:k]) + _choose(rng, rest, max(0, k - len(must_have)))
    atoms = random_alloy(rng, {s: refs[s] for s in chosen}, len(chosen), int(rng.choice([32, 48])), 0.03, 0.05)
    return atoms


def make_shift(shift: str, num: int, train_elements: Sequence[str], train_components: tuple[int, int] = (2, 3),
               other_elements: Sequence[str] = (), seed: int = 0) -> list[Atoms]:
    """``num`` structures of ``shift`` (one of :data:`SHIFTS`) for an ensemble trained on alloys of
    ``train_elements`` with ``train_components`` elements each; ``other_elements`` are the elements
    ``unseen_elements`` draws its newcomers from (EMT FCC metals the training never saw)."""
    if shift not in SHIFTS:
        raise AlloyConfigError(f"unknown shift {shift!r}; use one of {', '.join(SHIFTS)}")
    if shift == "unseen_elements" and not other_elements:
        raise AlloyConfigError("unseen_elements needs other_elements: elements the training never saw")
    if shift == "more_components" and train_components[1] >= len(train_elements):
        raise AlloyConfigError(f"the training alloys already have up to all {len(train_elements)} elements")
    elements = tuple(train_elements)
    refs = {s: emt_reference(s) for s in (*elements, *other_elements)}
    rng = np.random.default_rng(seed)
    low, high = train_components
    makers: dict[str, Callable[[], Atoms]] = {
        "bcc": lambda: _other_lattice(rng, refs, elements, (low, high), "bcc"),
        "hcp": lambda: _other_lattice(rng, refs, elements, (low, high), "hcp"),
        "vacancies": lambda: _vacancies(rng, refs, elements, (low, high)),
        "surfaces": lambda: _surface(rng, refs, elements, (low, high)),
        "compressed": lambda: _strained(rng, refs, elements, (low, high), "compressed"),
        "tension": lambda: _strained(rng, refs, elements, (low, high), "tension"),
        "compression": lambda: _strained(rng, refs, elements, (low, high), "compression"),
        "sheared": lambda: _strained(rng, refs, elements, (low, high), "sheared"),
        "more_components": lambda: _with_components(rng, refs, elements, (high + 1, min(high + 2, len(elements)))),
        "unseen_elements": lambda: _with_components(
            rng, refs, (*elements, *other_elements), (max(low, 2), high),
            must_have=[other_elements[int(rng.integers(len(other_elements)))]]),
        "rattled": lambda: _rattled(rng, refs, elements, (low, high)),
        "interstitials": lambda: _interstitials(rng, refs, elements, (low, high)),
        "segregated": lambda: _segregated(rng, refs, elements, (low, high)),
    }
    out = []
    for _ in range(num):
        atoms = makers[shift]()
        atoms.info["shift"] = shift
        out.append(atoms)
    return out
