"""FCC alloys labelled with ASE's EMT potential: the built-in alloy dataset.

The structures (:mod:`graph_builders.datasets.alloy_structures`) are FCC supercells of 2-5
(configurable) elements in four kinds, drawn in documented fractions (:class:`StructureMix`):
random distorted cells (random substitution, Vegard lattice constant, random strain and rattle),
ideal lattices, EMT-relaxed cells and ordered phases (pure elements, L1_2, L1_0). Labels:
formation energy per atom (relative to the pure elements at their EMT equilibrium), the stress
(6 Voigt components, GPa) and the forces (eV/Å), from :class:`~graph_builders.datasets.emt.FastEMT`
(ASE's EMT with a vesin neighbour list; identical results).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from ase import Atoms
from ase.units import GPa
from tqdm import tqdm

from graph_builders.atomic import AtomicGraphBuilder
from graph_builders.datasets.alloy_structures import (
    KINDS,
    RANDOM_ONLY,
    StructureMix,
    composition_name,
    generate_alloy_structures,
    ideal_alloy,
    ordered_phase,
    random_alloy,
    relax_emt,
    supercell_repeats,
)
from graph_builders.datasets.base import LabelledGraphs
from graph_builders.datasets.emt import (
    EMT_FCC_METALS,
    AlloyConfigError,
    ElementReference,
    FastEMT,
    emt_reference,
)
from graph_builders.schema import HeadRegistry, HeadSpec

__all__ = [
    "ALLOY_HEADS", "EMT_FCC_METALS", "KINDS", "RANDOM_ONLY", "AlloyConfigError", "ElementReference", "FastEMT",
    "StructureMix", "composition_name", "emt_reference", "generate_alloy_structures", "ideal_alloy",
    "label_alloy", "make_alloy_dataset", "ordered_phase", "random_alloy", "relax_emt", "supercell_repeats",
]

ALLOY_HEADS = HeadRegistry.of(
    (
        HeadSpec("formation_energy", "graph", 1, "eV/atom", "EMT energy per atom minus pure elements"),
        HeadSpec("stress", "graph", 6, "GPa", "EMT stress, Voigt order xx yy zz yz xz xy"),
        HeadSpec("forces", "node", 3, "eV/Å", "EMT forces"),
    )
)


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
    mix: StructureMix = StructureMix(),
) -> LabelledGraphs:
    """FCC alloys of the kinds of ``mix`` with EMT labels as radius graphs (``cutoff`` Å).

    The number of elements of a random, ideal or relaxed cell is drawn uniformly from the
    inclusive range ``components`` (ordered phases have 1 or 2); sizes (atoms per cell, multiples
    of 4) uniformly from ``sizes``. Heads: formation_energy (graph, eV/atom), stress (graph, 6,
    GPa), forces (node, 3, eV/Å). Each graph has ``name`` (composition, e.g. "Cu16Ni16"),
    ``kind`` (random, ideal, relaxed or ordered) and ``num_components`` ([1] int64). The same
    ``seed`` gives identical graphs; ``mix=RANDOM_ONLY`` gives the random cells of earlier versions.
    """
    structures, references = generate_alloy_structures(
        num_structures, elements, components, sizes, strain, rattle, seed, mix
    )
    build_graph = AtomicGraphBuilder(cutoff=cutoff)
    graphs = []
    for atoms in tqdm(structures, desc="alloy (EMT)", disable=not progress, unit="structure"):
        name = composition_name(atoms.get_chemical_symbols())
        graph = build_graph(atoms, targets=label_alloy(atoms, references), name=name)
        graph.num_components = torch.tensor([len(set(atoms.numbers.tolist()))], dtype=torch.int64)
        graph.kind = str(atoms.info.get("kind", "random"))
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
        "structure_mix": mix.describe(),
        "cutoff": float(cutoff),
        "seed": int(seed),
    }
    for symbol, ref in references.items():
        metadata[f"emt_lattice_constant_{symbol}"] = ref.lattice_constant
        metadata[f"emt_energy_per_atom_{symbol}"] = ref.energy_per_atom
    return LabelledGraphs(graphs=graphs, heads=ALLOY_HEADS, name="alloy", splits=None, metadata=metadata)
