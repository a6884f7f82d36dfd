"""Random substitutional FCC alloys labelled with ASE's EMT potential.

Each structure is a supercell of the conventional 4-atom FCC cell (32, 48, 72, 108 atoms, or any
multiple of 4), with 2-5 (configurable) elements placed at random, a lattice constant from Vegard's
law over the elements' EMT equilibrium lattice constants, a random symmetric strain and a Gaussian
rattle. Labels: formation energy per atom (relative to the pure elements at their EMT equilibrium),
the stress (6 Voigt components, GPa) and the forces (eV/Å), all from ``ase.calculators.emt.EMT``.

EMT's own neighbour list (``ase.neighborlist.PrimitiveNeighborList``) takes ~60% of its run time; the
calculator used here is ASE's EMT with that list replaced by a vesin one (same pairs, so the same
energies, forces and stresses; ``tests/graph_builders/test_alloy.py`` checks against plain EMT).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import vesin
from ase import Atoms
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.emt import parameters as EMT_PARAMETERS
from ase.data import atomic_numbers, reference_states
from ase.units import GPa
from scipy.optimize import minimize_scalar
from tqdm import tqdm

from graph_builders.atomic import AtomicGraphBuilder
from graph_builders.datasets.base import LabelledGraphs
from graph_builders.schema import HeadRegistry, HeadSpec

# Elements with EMT parameters that are FCC metals (EMT's H, C, N, O are not).
EMT_FCC_METALS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")

ALLOY_HEADS = HeadRegistry.of(
    (
        HeadSpec("formation_energy", "graph", 1, "eV/atom", "EMT energy per atom minus pure elements"),
        HeadSpec("stress", "graph", 6, "GPa", "EMT stress, Voigt order xx yy zz yz xz xy"),
        HeadSpec("forces", "node", 3, "eV/Å", "EMT forces"),
    )
)


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
    _check_symbols([symbol])
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


def _check_symbols(symbols: Sequence[str]) -> None:
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


def composition_name(symbols: Sequence[str]) -> str:
    """Composition string with elements in alphabetical order, e.g. ``Cu16Ni16``."""
    unique, counts = np.unique(np.asarray(symbols), return_counts=True)
    return "".join(f"{s}{c}" for s, c in zip(unique.tolist(), counts.tolist()))


def random_alloy(
    rng: np.random.Generator,
    references: dict[str, ElementReference],
    num_components: int,
    size: int,
    strain: float,
    rattle: float,
) -> Atoms:
    """One random FCC alloy: ``num_components`` distinct elements of ``references`` (each present at
    least once, random fractions), Vegard lattice constant, symmetric strain, Gaussian rattle."""
    symbols = sorted(references)
    chosen = [symbols[k] for k in np.sort(rng.choice(len(symbols), num_components, replace=False))]
    fractions = rng.dirichlet(np.ones(num_components))
    counts = np.ones(num_components, dtype=np.int64) + rng.multinomial(size - num_components, fractions)
    species = rng.permutation(np.repeat(chosen, counts))
    lattice = float(sum(c * references[s].lattice_constant for s, c in zip(chosen, counts)) / size)
    atoms = bulk("Cu", "fcc", a=lattice, cubic=True).repeat(supercell_repeats(size))
    atoms.set_chemical_symbols(species.tolist())
    upper = rng.uniform(-strain, strain, size=6)
    deformation = np.eye(3) + np.array(
        [[upper[0], upper[5], upper[4]], [upper[5], upper[1], upper[3]], [upper[4], upper[3], upper[2]]]
    )
    atoms.set_cell(atoms.cell.array @ deformation, scale_atoms=True)
    atoms.positions += rng.normal(scale=rattle, size=atoms.positions.shape)
    return atoms


def generate_alloy_structures(
    num_structures: int,
    elements: Sequence[str] = ("Cu", "Ni", "Pd", "Pt", "Au", "Ag", "Al"),
    components: tuple[int, int] = (2, 5),
    sizes: Sequence[int] = (32, 48, 72, 108),
    strain: float = 0.03,
    rattle: float = 0.05,
    seed: int = 0,
) -> tuple[list[Atoms], dict[str, ElementReference]]:
    """Unlabelled random alloys (see :func:`make_alloy_dataset`) and the element references used."""
    elements = tuple(elements)
    _check_symbols(elements)
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
    references = {s: emt_reference(s) for s in elements}
    rng = np.random.default_rng(seed)
    structures = []
    for _ in range(num_structures):
        k = int(rng.integers(low, high + 1))
        size = sizes[int(rng.integers(len(sizes)))]
        structures.append(random_alloy(rng, references, k, size, strain, rattle))
    return structures, references


def label_alloy(atoms: Atoms, references: dict[str, ElementReference]) -> dict[str, np.ndarray]:
    """EMT labels of one alloy: formation energy per atom, stress (Voigt, GPa), forces (eV/Å)."""
    atoms = atoms.copy()
    atoms.calc = FastEMT()
    energy = float(atoms.get_potential_energy())
    forces = atoms.get_forces()
    stress = atoms.get_stress(voigt=True) / GPa
    symbols = atoms.get_chemical_symbols()
    reference = sum(references[s].energy_per_atom for s in symbols) / len(symbols)
    return {
        "formation_energy": np.array([[energy / len(atoms) - reference]]),
        "stress": stress.reshape(1, 6),
        "forces": forces,
    }


def make_alloy_dataset(
    num_structures: int = 2000,
    elements: Sequence[str] = ("Cu", "Ni", "Pd", "Pt", "Au", "Ag", "Al"),
    components: tuple[int, int] = (2, 5),
    sizes: Sequence[int] = (32, 48, 72, 108),
    strain: float = 0.03,
    rattle: float = 0.05,
    cutoff: float = 5.0,
    seed: int = 0,
    progress: bool = True,
) -> LabelledGraphs:
    """Random substitutional FCC alloys with EMT labels as radius graphs (``cutoff`` Å).

    The number of elements per structure is drawn uniformly from the inclusive range
    ``components``; sizes (atoms per cell, multiples of 4) uniformly from ``sizes``. Heads:
    formation_energy (graph, eV/atom), stress (graph, 6, GPa), forces (node, 3, eV/Å). Each graph
    has ``name`` (composition, e.g. "Cu16Ni16") and ``num_components`` ([1] int64). The same
    ``seed`` gives identical graphs.
    """
    structures, references = generate_alloy_structures(
        num_structures, elements, components, sizes, strain, rattle, seed
    )
    build_graph = AtomicGraphBuilder(cutoff=cutoff)
    graphs = []
    for atoms in tqdm(structures, desc="alloy (EMT)", disable=not progress, unit="structure"):
        name = composition_name(atoms.get_chemical_symbols())
        graph = build_graph(atoms, targets=label_alloy(atoms, references), name=name)
        graph.num_components = torch.tensor([len(set(atoms.numbers.tolist()))], dtype=torch.int64)
        graphs.append(graph)
    metadata: dict[str, str | int | float] = {
        "generator": "graph_builders.datasets.alloy.make_alloy_dataset",
        "calculator": "ase.calculators.emt.EMT",
        "elements": ",".join(elements),
        "components_min": int(components[0]),
        "components_max": int(components[1]),
        "sizes": ",".join(str(s) for s in sizes),
        "strain": float(strain),
        "rattle": float(rattle),
        "cutoff": float(cutoff),
        "seed": int(seed),
    }
    for symbol, ref in references.items():
        metadata[f"emt_lattice_constant_{symbol}"] = ref.lattice_constant
        metadata[f"emt_energy_per_atom_{symbol}"] = ref.energy_per_atom
    return LabelledGraphs(graphs=graphs, heads=ALLOY_HEADS, name="alloy", splits=None, metadata=metadata)
