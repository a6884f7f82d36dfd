"""The EMT alloy dataset: reproducibility, physical sanity of labels, ranges, shapes, errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.units import GPa

from graph_builders.datasets.alloy import (
    ALLOY_HEADS,
    RANDOM_ONLY,
    StructureMix,
    ordered_phase,
    AlloyConfigError,
    FastEMT,
    composition_name,
    emt_reference,
    generate_alloy_structures,
    make_alloy_dataset,
    supercell_repeats,
)
from graph_builders.datasets.base import LabelledGraphs
from graph_builders.schema import validate_graph

SMALL = dict(sizes=(32, 48), progress=False)


@pytest.fixture(scope="module")
def dataset() -> LabelledGraphs:
    return make_alloy_dataset(num_structures=20, seed=7, **SMALL)


def _components(name: str) -> dict[str, int]:
    return {sym: int(n) for sym, n in re.findall(r"([A-Z][a-z]?)(\d+)", name)}


def test_same_seed_gives_identical_graphs(dataset):
    again = make_alloy_dataset(num_structures=20, seed=7, **SMALL)
    assert [g.name for g in again.graphs] == [g.name for g in dataset.graphs]
    for a, b in zip(dataset.graphs, again.graphs):
        assert a.keys() == b.keys()
        for key in a.keys():
            if isinstance(a[key], torch.Tensor):
                assert torch.equal(a[key], b[key]), key
    other = make_alloy_dataset(num_structures=3, seed=8, **SMALL)
    assert not torch.equal(other.graphs[0].pos[:4], dataset.graphs[0].pos[:4])


def test_heads_shapes_names_and_metadata(dataset):
    assert dataset.name == "alloy"
    assert dataset.heads.names == ["formation_energy", "stress", "forces"]
    assert [(h.level, h.dim, h.unit) for h in dataset.heads] == [
        ("graph", 1, "eV/atom"), ("graph", 6, "GPa"), ("node", 3, "eV/Å")]
    assert len(dataset.graphs) == 20 and dataset.splits is None
    for index, graph in enumerate(dataset.graphs):
        validate_graph(graph, ALLOY_HEADS, name=f"alloy {index}")
        n = graph.num_nodes
        assert n in (32, 48)
        parts = _components(graph.name)
        assert sum(parts.values()) == n
        assert graph.num_components.dtype == torch.int64 and graph.num_components.shape == (1,)
        assert int(graph.num_components) == len(parts)
        assert graph.y_forces.shape == (n, 3) and graph.y_stress.shape == (1, 6)
    assert dataset.metadata["components_min"] == 2 and dataset.metadata["components_max"] == 5
    assert dataset.metadata["emt_lattice_constant_Cu"] == pytest.approx(3.59, abs=0.01)


def test_emt_forces_sum_to_zero_and_labels_are_plausible(dataset):
    for graph in dataset.graphs:
        total = graph.y_forces.double().sum(dim=0)
        assert float(total.abs().max()) < 1e-4  # Newton's third law (float32 storage)
        if graph.kind == "random":
            assert float(graph.y_forces.abs().max()) > 1e-3  # rattled: forces are not all zero
    energies = torch.cat([g.y_formation_energy for g in dataset.graphs])[:, 0]
    assert float(energies.abs().max()) < 1.0  # eV/atom: EMT mixing energies are small


def test_labels_match_plain_ase_emt(dataset):
    structures, references = generate_alloy_structures(2, seed=7, sizes=(32, 48))
    for atoms, graph in zip(structures, dataset.graphs):
        atoms.calc = EMT()
        energy = atoms.get_potential_energy()
        reference = sum(references[s].energy_per_atom for s in atoms.get_chemical_symbols())
        expected_fe = (energy - reference) / len(atoms)
        assert float(graph.y_formation_energy) == pytest.approx(expected_fe, abs=1e-6)
        np.testing.assert_allclose(graph.y_forces.numpy(), atoms.get_forces(), atol=1e-5)
        np.testing.assert_allclose(graph.y_stress.numpy()[0], atoms.get_stress() / GPa, atol=1e-4)
        torch.testing.assert_close(graph.pos, torch.tensor(atoms.positions, dtype=torch.float32))


def test_fast_emt_equals_emt_on_a_strained_cell():
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True).repeat((2, 2, 3))
    atoms.symbols[::3] = "Pt"
    atoms.symbols[1::5] = "Al"
    atoms.set_cell(atoms.cell.array @ np.array([[1.02, 0.01, 0], [0.01, 0.99, 0.02], [0, 0.02, 1.0]]),
                   scale_atoms=True)
    atoms.rattle(0.08, seed=2)
    plain, fast = atoms.copy(), atoms.copy()
    plain.calc, fast.calc = EMT(), FastEMT()
    assert fast.get_potential_energy() == pytest.approx(plain.get_potential_energy(), abs=1e-10)
    np.testing.assert_allclose(fast.get_forces(), plain.get_forces(), atol=1e-10)
    np.testing.assert_allclose(fast.get_stress(), plain.get_stress(), atol=1e-12)


def test_pure_element_at_equilibrium_has_zero_formation_energy():
    pure = make_alloy_dataset(
        num_structures=1, elements=("Ni",), components=(1, 1), sizes=(32,), strain=0.0,
        rattle=0.0, seed=1, progress=False, mix=RANDOM_ONLY,
    )
    with pytest.raises(AlloyConfigError, match="could not draw 2 distinct structures"):  # no copies
        generate_alloy_structures(2, ("Ni",), (1, 1), (32,), 0.0, 0.0, seed=1, mix=RANDOM_ONLY)
    ref = emt_reference("Ni")
    for graph in pure.graphs:
        assert graph.name == "Ni32" and int(graph.num_components) == 1
        assert abs(float(graph.y_formation_energy)) < 1e-7
        assert float(graph.y_forces.abs().max()) < 1e-5
        assert float(graph.y_stress.abs().max()) < 1e-3  # GPa: equilibrium lattice constant
        torch.testing.assert_close(graph.cell[0].double(), torch.eye(3, dtype=torch.float64) * 2 * ref.lattice_constant)


@pytest.mark.parametrize("components", [(2, 3), (4, 5)])
def test_component_range_is_respected(components):
    structures, _ = generate_alloy_structures(40, components=components, sizes=(32,), seed=3, mix=RANDOM_ONLY)
    counts = [len(set(a.get_chemical_symbols())) for a in structures]
    assert set(counts) == set(range(components[0], components[1] + 1))


def test_vegard_lattice_constant_for_an_unstrained_binary():
    structures, refs = generate_alloy_structures(
        1, elements=("Cu", "Au"), components=(2, 2), sizes=(108,), strain=0.0, rattle=0.0, seed=0,
        mix=RANDOM_ONLY,
    )
    atoms = structures[0]
    parts = _components(composition_name(atoms.get_chemical_symbols()))
    vegard = sum(refs[s].lattice_constant * n for s, n in parts.items()) / len(atoms)
    np.testing.assert_allclose(atoms.cell.array, np.eye(3) * 3 * vegard, atol=1e-12)


def test_supercells_and_names():
    assert [supercell_repeats(s) for s in (32, 48, 72, 108, 64)] == [
        (2, 2, 2), (2, 2, 3), (2, 3, 3), (3, 3, 3), (2, 2, 4)]
    assert composition_name(["Ni", "Cu", "Cu", "Ni", "Ag"]) == "Ag1Cu2Ni2"
    with pytest.raises(AlloyConfigError, match="positive multiple of 4, got 30"):
        supercell_repeats(30)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(elements=("Cu", "Fe")), "element 'Fe' has no EMT parameters; supported: Al, Cu, Ag, Au, Ni, Pd, Pt"),
        (dict(elements=("Cu", "H")), "element 'H' is not an FCC metal in EMT"),
        (dict(elements=("Cu", "Xx")), "unknown element symbol 'Xx'"),
        (dict(elements=("Cu", "Cu")), "duplicate elements ['Cu']"),
        (dict(components=(2, 8)), "components must satisfy 1 <= low <= high <= 7"),
        (dict(sizes=(33,)), "positive multiple of 4, got 33"),
    ],
)
def test_bad_configuration_raises(kwargs, message):
    with pytest.raises(AlloyConfigError) as info:
        make_alloy_dataset(num_structures=1, progress=False, **kwargs)
    assert message in str(info.value)


def test_structure_mix_gives_ideal_relaxed_and_ordered_cells():
    """The default mix (60/10/15/15) also holds ideal lattices, EMT-relaxed cells and ordered
    phases: the cells users ask about most."""
    data = make_alloy_dataset(num_structures=60, components=(2, 3), sizes=(32,), seed=5, progress=False)
    kinds = [g.kind for g in data.graphs]
    assert {k: kinds.count(k) for k in sorted(set(kinds))} == {"ideal": 8, "ordered": 8, "random": 34,
                                                              "relaxed": 10}  # seed 5 of 60/10/15/15
    assert data.metadata["structure_mix"] == "random=0.6,ideal=0.1,relaxed=0.15,ordered=0.15"
    for graph in data.graphs:
        forces = float(graph.y_forces.abs().max())
        if graph.kind == "ordered":
            assert forces < 1e-6 and int(graph.num_components) in (1, 2)  # no forces by symmetry
        elif graph.kind == "relaxed":
            assert forces < 0.08  # relaxed to fmax 0.05 eV/Å (at most 40 steps)
        elif graph.kind == "ideal":
            cell = graph.cell[0].double()
            frac = torch.linalg.solve(cell.T, graph.pos.double().T).T * 4  # quarter lattice units
            assert float((frac - frac.round()).abs().max()) < 1e-5  # on the perfect lattice
    pure = [g for g in data.graphs if g.kind == "ordered" and int(g.num_components) == 1]
    assert pure and all(abs(float(g.y_formation_energy)) < 1e-4 for g in pure)


def test_ordered_prototypes_have_their_stoichiometry():
    refs = {s: emt_reference(s) for s in ("Cu", "Au")}
    l12 = ordered_phase("L1_2", ("Cu", "Au"), refs, (2, 2, 2))
    assert composition_name(l12.get_chemical_symbols()) == "Au8Cu24"
    l10 = ordered_phase("L1_0", ("Cu", "Au"), refs, (2, 2, 2), relax=False)
    z_of = {round(float(z), 6): sym for z, sym in zip(l10.positions[:, 2], l10.get_chemical_symbols())}
    assert sorted(set(z_of.values())) == ["Au", "Cu"] and len(z_of) == 4  # alternating (001) layers
    with pytest.raises(AlloyConfigError, match="structure fractions must be >= 0 and sum to 1"):
        StructureMix(random=0.5)


@pytest.mark.parametrize("shift, low, high", [("tension", 1.04, 1.08), ("compression", 0.92, 0.96)])
def test_uniform_tension_and_compression_scale_every_length(shift, low, high):
    """The shifted cells are the generator's Vegard cell scaled by 4-8% in every length."""
    from graph_builders.datasets.alloy_shifts import make_shift

    refs = {s: emt_reference(s) for s in ("Cu", "Ni", "Au")}
    for atoms in make_shift(shift, 4, ("Cu", "Ni", "Au"), (2, 3), seed=2):
        symbols = atoms.get_chemical_symbols()
        vegard = sum(refs[s].lattice_constant for s in symbols) / len(symbols)
        per_atom = atoms.get_volume() / len(atoms)
        factor = (per_atom / (vegard ** 3 / 4)) ** (1 / 3)
        assert low - 1e-9 <= factor <= high + 1e-9 and atoms.info["shift"] == shift


def test_every_shift_writes_to_extxyz_without_a_warning(tmp_path):
    """No shift leaves something in ``info`` an extxyz file cannot hold (ASE's slab builders' dict of
    adsorption sites made the demo print ``UserWarning: Skipping unhashable information``)."""
    import warnings

    import ase.io

    from graph_builders.datasets.alloy_shifts import SHIFTS, make_shift

    frames = [atoms for shift in SHIFTS if shift not in ("more_components", "unseen_elements")
              for atoms in make_shift(shift, 2, ("Cu", "Ni", "Au"), (2, 2), seed=4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ase.io.write(tmp_path / "shifts.extxyz", frames)
    read = ase.io.read(tmp_path / "shifts.extxyz", index=":")
    assert [a.info["shift"] for a in read] == [a.info["shift"] for a in frames]
    np.testing.assert_allclose(read[6].positions, frames[6].positions, atol=1e-6)  # a slab


def test_rattled_interstitial_and_segregated_shifts():
    """Rattled cells keep the atoms of a random cell and move them further than training's 0.05 Å;
    interstitials add 1-2 atoms of the cell's own elements; segregated cells keep the composition,
    one species after the other along one axis."""
    from graph_builders.datasets.alloy_shifts import make_shift

    elements = ("Cu", "Ni", "Au")
    for atoms in make_shift("rattled", 3, elements, (2, 3), seed=5):
        assert len(atoms) in (32, 48) and atoms.info["shift"] == "rattled"
    for atoms in make_shift("interstitials", 3, elements, (2, 3), seed=5):
        assert 33 <= len(atoms) <= 34 and set(atoms.get_chemical_symbols()) <= set(elements)
        assert atoms.get_all_distances(mic=True)[np.triu_indices(len(atoms), 1)].min() < 2.1  # squeezed in
    for atoms in make_shift("segregated", 3, elements, (2, 2), seed=5):
        symbols = atoms.get_chemical_symbols()
        per_axis = [np.array(symbols)[np.argsort(atoms.get_scaled_positions()[:, k])] for k in range(3)]
        assert any(list(s) == sorted(s) for s in per_axis)  # sorted along one axis
