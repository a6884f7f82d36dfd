"""The structures of the alloy data: four kinds of FCC cells, drawn in documented fractions.

Users most often ask about ideal or relaxed lattices, ordered phases and pure elements, so the
training data holds them too, not only random distorted cells (:class:`StructureMix`):

* ``random`` (60% by default): random substitution of 2-5 (``components``) elements, Vegard
  lattice constant, random symmetric strain and a Gaussian rattle; non-zero forces and stress;
* ``ideal`` (10%): random substitution on the perfect lattice at the Vegard constant, no strain,
  no rattle (the forces and the stress come from the chemical disorder and the size misfit alone);
* ``relaxed`` (15%): random substitution, the volume and then the atoms relaxed with EMT (the
  isotropic scale of the cell minimising the energy, then BFGS on the positions to ``fmax``
  0.05 eV/Å, at most 40 steps);
* ``ordered`` (15%): an ordered phase at its EMT equilibrium volume: a pure element (A1), L1_2
  (A3B, e.g. Cu3Au) or L1_0 (AB, e.g. CuAu), equally likely, on the same supercells (no forces
  by symmetry); these end members of the composition space have 1 or 2 components whatever
  ``components`` says.

Every structure is an ``ase.Atoms`` with ``info["kind"]`` set; the same seed gives the same list.
The list holds no structure twice (an ordered phase of the same elements and size is drawn once;
a repeat is drawn again), so no copy of a training cell lands in a validation or test split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from ase import Atoms
from ase.build import bulk

from graph_builders.datasets.emt import AlloyConfigError, ElementReference, FastEMT, check_symbols, emt_reference

KINDS: tuple[str, ...] = ("random", "ideal", "relaxed", "ordered")
ORDERED_PROTOTYPES: tuple[str, ...] = ("A1", "L1_2", "L1_0")
RELAX_FMAX = 0.05  # eV/Å
RELAX_STEPS = 40


@dataclass(frozen=True)
class StructureMix:
    """Fractions of the structure kinds (see the module docstring); they must sum to 1."""

    random: float = 0.6
    ideal: float = 0.1
    relaxed: float = 0.15
    ordered: float = 0.15

    def __post_init__(self) -> None:
        values = list(asdict(self).values())
        if min(values) < 0 or abs(sum(values) - 1.0) > 1e-9:
            raise AlloyConfigError(f"structure fractions must be >= 0 and sum to 1, got {asdict(self)}")

    def fractions(self) -> np.ndarray:
        return np.array([getattr(self, k) for k in KINDS], dtype=np.float64)

    def describe(self) -> str:
        return ",".join(f"{k}={getattr(self, k):g}" for k in KINDS)


#: The random distorted cells only (the data before ideal, relaxed and ordered cells existed).
RANDOM_ONLY = StructureMix(random=1.0, ideal=0.0, relaxed=0.0, ordered=0.0)


def supercell_repeats(size: int) -> tuple[int, int, int]:
    """Most cubic (a <= b <= c) repeats of the 4-atom conventional FCC cell giving ``size`` atoms."""
    if size < 4 or size % 4:
        raise AlloyConfigError(f"supercell size must be a positive multiple of 4, got {size}")
    cells = size // 4
    best: tuple[int, int, int] | None = None
    for a in range(1, cells + 1):
        for b in range(a, cells + 1):
            c, rest = divmod(cells, a * b)
            if rest or c < b:
                continue
            if best is None or c / a < best[2] / best[0]:
                best = (a, b, c)
    assert best is not None  # (1, 1, cells) always qualifies
    return best


def composition_name(symbols: Sequence[str]) -> str:
    """Composition string with elements in alphabetical order, e.g. ``Cu16Ni16``."""
    unique, counts = np.unique(np.asarray(symbols), return_counts=True)
    return "".join(f"{s}{c}" for s, c in zip(unique.tolist(), counts.tolist()))


def _substituted(rng: np.random.Generator, references: dict[str, ElementReference], num_components: int,
                 size: int) -> Atoms:
    """A random substitution of ``num_components`` elements (each at least once) on the perfect FCC
    supercell of ``size`` atoms at the Vegard lattice constant."""
    symbols = sorted(references)
    chosen = [symbols[k] for k in np.sort(rng.choice(len(symbols), num_components, replace=False))]
    fractions = rng.dirichlet(np.ones(num_components))
    counts = np.ones(num_components, dtype=np.int64) + rng.multinomial(size - num_components, fractions)
    species = rng.permutation(np.repeat(chosen, counts))
    lattice = float(sum(c * references[s].lattice_constant for s, c in zip(chosen, counts)) / size)
    atoms = bulk("Cu", "fcc", a=lattice, cubic=True).repeat(supercell_repeats(size))
    atoms.set_chemical_symbols(species.tolist())
    return atoms


def random_alloy(rng: np.random.Generator, references: dict[str, ElementReference], num_components: int,
                 size: int, strain: float, rattle: float) -> Atoms:
    """One random FCC alloy: random substitution, symmetric strain, Gaussian rattle."""
    atoms = _substituted(rng, references, num_components, size)
    upper = rng.uniform(-strain, strain, size=6)
    deformation = np.eye(3) + np.array(
        [[upper[0], upper[5], upper[4]], [upper[5], upper[1], upper[3]], [upper[4], upper[3], upper[2]]]
    )
    atoms.set_cell(atoms.cell.array @ deformation, scale_atoms=True)
    atoms.positions += rng.normal(scale=rattle, size=atoms.positions.shape)
    atoms.info["kind"] = "random"
    return atoms


def ideal_alloy(rng: np.random.Generator, references: dict[str, ElementReference], num_components: int,
                size: int) -> Atoms:
    """A random substitution on the perfect lattice (no strain, no rattle)."""
    atoms = _substituted(rng, references, num_components, size)
    atoms.info["kind"] = "ideal"
    return atoms


def relax_volume(atoms: Atoms) -> Atoms:
    """``atoms`` with its cell scaled isotropically to the EMT energy minimum (a copy)."""
    from scipy.optimize import minimize_scalar

    start = atoms.cell.array.copy()
    trial = atoms.copy()
    trial.calc = FastEMT()

    def energy(scale: float) -> float:
        trial.set_cell(start * scale, scale_atoms=True)
        return float(trial.get_potential_energy())

    best = minimize_scalar(energy, bounds=(0.94, 1.06), method="bounded", options={"xatol": 1e-4})
    out = atoms.copy()
    out.set_cell(start * float(best.x), scale_atoms=True)
    return out


def relax_emt(atoms: Atoms, fmax: float = RELAX_FMAX, steps: int = RELAX_STEPS) -> Atoms:
    """``atoms`` relaxed with EMT: the volume (:func:`relax_volume`), then the positions with BFGS
    (a copy; ``info`` kept)."""
    from ase.optimize import BFGS

    relaxed = relax_volume(atoms)
    relaxed.calc = FastEMT()
    BFGS(relaxed, logfile=None).run(fmax=fmax, steps=steps)
    relaxed.calc = None
    return relaxed


def relaxed_alloy(rng: np.random.Generator, references: dict[str, ElementReference], num_components: int,
                  size: int) -> Atoms:
    """A random substitution relaxed with EMT (positions and cell), from a slightly rattled start."""
    atoms = _substituted(rng, references, num_components, size)
    atoms.positions += rng.normal(scale=0.02, size=atoms.positions.shape)  # break the symmetry
    atoms = relax_emt(atoms)
    atoms.info["kind"] = "relaxed"
    return atoms


def ordered_phase(prototype: str, elements: Sequence[str], references: dict[str, ElementReference],
                  repeats: tuple[int, int, int] = (2, 2, 2), relax: bool = True) -> Atoms:
    """An ordered FCC phase on ``repeats`` conventional cells: ``A1`` (pure ``elements[0]``),
    ``L1_2`` (``elements[0]``3``elements[1]``: B on the cube corners) or ``L1_0``
    (``elements[0]``/``elements[1]`` layers along z) at its EMT equilibrium volume."""
    if prototype not in ORDERED_PROTOTYPES:
        raise AlloyConfigError(f"unknown ordered prototype {prototype!r}; use one of {ORDERED_PROTOTYPES}")
    a, b = elements[0], elements[-1]
    cell_symbols = {"A1": [a, a, a, a], "L1_2": [b, a, a, a], "L1_0": [a, a, b, b]}[prototype]
    lattice = float(np.mean([references[s].lattice_constant for s in cell_symbols]))
    conventional = bulk("Cu", "fcc", a=lattice, cubic=True)  # sites (0,0,0), (0,.5,.5), (.5,0,.5), (.5,.5,0)
    order = {"A1": [0, 1, 2, 3], "L1_2": [0, 1, 2, 3], "L1_0": [0, 3, 1, 2]}[prototype]
    symbols = [""] * 4
    for site, symbol in zip(order, cell_symbols):
        symbols[site] = symbol
    conventional.set_chemical_symbols(symbols)
    atoms = conventional.repeat(repeats)
    if relax:
        atoms = relax_volume(atoms)
    atoms.info["kind"] = "ordered"
    atoms.info["prototype"] = prototype
    return atoms


def _ordered(rng: np.random.Generator, references: dict[str, ElementReference], size: int) -> Atoms:
    symbols = sorted(references)
    prototypes = ORDERED_PROTOTYPES if len(symbols) > 1 else ("A1",)
    prototype = prototypes[int(rng.integers(len(prototypes)))]
    pick = rng.choice(len(symbols), 1 if prototype == "A1" else 2, replace=False)
    return ordered_phase(prototype, [symbols[k] for k in pick], references, supercell_repeats(size))


#: draws in a row that only repeat structures already drawn before the generator gives up
MAX_REPEATS = 1000


def _atoms_key(atoms: Atoms) -> bytes:
    """Species, positions and cell rounded to 1e-6: equal for copies of the same structure."""
    parts = (atoms.numbers.astype(np.int64), np.round(atoms.positions, 6), np.round(atoms.cell.array, 6))
    return b"".join(np.ascontiguousarray(p).tobytes() for p in parts)


def check_options(elements: Sequence[str], components: tuple[int, int], sizes: Sequence[int],
                  num_structures: int, strain: float, rattle: float) -> tuple[tuple[str, ...], int, int, tuple[int, ...]]:
    """Validated (elements, low, high, sizes); AlloyConfigError naming the bad option."""
    elements = tuple(elements)
    check_symbols(elements)
    low, high = (int(c) for c in components)
    if not 1 <= low <= high <= len(elements):
        raise AlloyConfigError(
            f"components must satisfy 1 <= low <= high <= {len(elements)} (number of elements), "
            f"got {components}"
        )
    sizes = tuple(int(s) for s in sizes)
    for size in sizes:
        supercell_repeats(size)
        if size < high:
            raise AlloyConfigError(f"size {size} is too small for {high} components")
    if num_structures < 1:
        raise AlloyConfigError(f"num_structures must be >= 1, got {num_structures}")
    if strain < 0 or rattle < 0:
        raise AlloyConfigError(f"strain and rattle must be >= 0, got {strain}, {rattle}")
    return elements, low, high, sizes


def generate_alloy_structures(
    num_structures: int,
    elements: Sequence[str] = ("Cu", "Ni", "Pd", "Pt", "Au", "Ag", "Al"),
    components: tuple[int, int] = (2, 5),
    sizes: Sequence[int] = (32, 48, 72, 108),
    strain: float = 0.03,
    rattle: float = 0.05,
    seed: int = 0,
    mix: StructureMix = StructureMix(),
) -> tuple[list[Atoms], dict[str, ElementReference]]:
    """Unlabelled alloys of the kinds of ``mix`` (see the module docstring) and the element
    references used; ``info["kind"]`` tells each structure's kind."""
    elements, low, high, sizes = check_options(elements, components, sizes, num_structures, strain, rattle)
    references = {s: emt_reference(s) for s in elements}
    rng = np.random.default_rng(seed)
    fractions = mix.fractions()
    structures: list[Atoms] = []
    seen: set[bytes] = set()
    repeats = 0
    while len(structures) < num_structures:
        kind = KINDS[int(rng.choice(len(KINDS), p=fractions))] if mix != RANDOM_ONLY else "random"
        k = int(rng.integers(low, high + 1))
        size = sizes[int(rng.integers(len(sizes)))]
        if kind == "random":
            atoms = random_alloy(rng, references, k, size, strain, rattle)
        elif kind == "ideal":
            atoms = ideal_alloy(rng, references, k, size)
        elif kind == "relaxed":
            atoms = relaxed_alloy(rng, references, k, size)
        else:
            atoms = _ordered(rng, references, size)
        key = _atoms_key(atoms)
        if key in seen:  # ordered phases are deterministic: a copy would sit in two splits
            repeats += 1
            if repeats > MAX_REPEATS:
                raise AlloyConfigError(f"could not draw {num_structures} distinct structures ({len(structures)} "
                                       f"after {MAX_REPEATS} repeats in a row): allow more elements or sizes")
            continue
        repeats = 0
        seen.add(key)
        structures.append(atoms)
    return structures, references
