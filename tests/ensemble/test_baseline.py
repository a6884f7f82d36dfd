"""The baselines against independent references: the composition-linear fit against numpy's lstsq on
element counts (fractions for a per-atom head) read graph by graph, zero forces and stress against
the split's mean |component|, a total energy's MAE per atom against a hand computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ase.build import bulk
from ase.calculators.emt import EMT

from graph_builders.atomic import atoms_to_graph
from graph_builders.schema import HeadRegistry, HeadSpec
from graph_builders.store import GraphStore, write_dataset
from hydragnn_ensemble import baseline
from hydragnn_ensemble.baseline import COMPOSITION, ZERO, fit_baselines


def _split(path, split: str) -> list:
    with GraphStore(path) as store:
        return [store.get(split, i) for i in range(store.num_graphs(split))]


def _counts(graphs: list, elements: list[int]) -> np.ndarray:
    return np.array([[int((g.z == z).sum()) for z in elements] for g in graphs], dtype=np.float64)


def test_per_atom_energy_forces_and_stress_on_the_alloy_data(alloy_store):
    train, test = _split(alloy_store, "trainset"), _split(alloy_store, "testset")
    elements = sorted({int(z) for g in train for z in g.z})
    fractions = _counts(train, elements)
    fractions /= fractions.sum(1, keepdims=True)
    y = np.array([float(g.y_formation_energy) for g in train])
    coef = np.linalg.lstsq(fractions, y, rcond=None)[0]
    test_fractions = _counts(test, elements)
    test_fractions /= test_fractions.sum(1, keepdims=True)
    errors = test_fractions @ coef - np.array([float(g.y_formation_energy) for g in test])

    found = fit_baselines(alloy_store, "testset")
    energy = found.heads["formation_energy"]
    assert (found.fit_split, found.eval_split, energy.predictor, energy.unit) == ("trainset", "testset", COMPOSITION,
                                                                                 "eV/atom")
    assert energy.structures == len(test)
    np.testing.assert_allclose([energy.references[z] for z in elements], coef, rtol=1e-6, atol=1e-9)
    assert energy.mae == pytest.approx(np.mean(np.abs(errors)), rel=1e-6)
    assert energy.rmse == pytest.approx(np.sqrt(np.mean(errors ** 2)), rel=1e-6)
    assert energy.mae_per_atom == energy.mae  # a per-atom head: its MAE is per atom
    forces = np.concatenate([g.y_forces.numpy() for g in test])
    stress = np.concatenate([g.y_stress.numpy() for g in test])
    assert found.heads["forces"].predictor == found.heads["stress"].predictor == ZERO
    assert found.heads["forces"].mae == pytest.approx(np.mean(np.abs(forces)), rel=1e-6)
    assert found.heads["stress"].mae == pytest.approx(np.mean(np.abs(stress)), rel=1e-6)
    assert found.heads["forces"].mae_per_atom is None
    print(f"baselines on the alloy testset: formation_energy {1000 * energy.mae:.1f} meV/atom, "
          f"forces {found.heads['forces'].mae:.3f} eV/Å, stress {found.heads['stress'].mae:.3f} GPa")


def _emt_cell(rng: np.random.Generator, repeat: tuple[int, int, int], symbols: list[str]):
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat(repeat)
    atoms.symbols = rng.choice(symbols, size=len(atoms))
    atoms.rattle(0.05, seed=int(rng.integers(1000)))
    atoms.calc = EMT()
    graph = atoms_to_graph(atoms, cutoff=4.0)
    graph["y_energy"] = torch.tensor([[atoms.get_potential_energy()]], dtype=torch.float64)
    graph["y_forces"] = torch.tensor(atoms.get_forces(), dtype=torch.float32)
    return graph


def test_total_energies_of_cells_of_several_sizes_read_in_blocks(tmp_path, monkeypatch):
    """Counts (not fractions) for a total; the MAE per atom is mean(|error| / atoms); an element only
    the scored split has gets no reference energy; reads of at most 3 graphs and 10 atoms give the
    figures of one read."""
    rng = np.random.default_rng(4)
    repeats = [(1, 1, 1), (2, 1, 1), (2, 2, 1), (1, 1, 2)]
    graphs = [_emt_cell(rng, repeats[k % 4], ["Cu", "Ni", "Pd"]) for k in range(22)]
    graphs += [_emt_cell(rng, repeats[k % 4], ["Cu", "Ni", "Pd", "Au"]) for k in range(8)]  # Au: test only
    heads = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/Å")])
    graphs.append(_emt_cell(rng, (1, 1, 1), ["Cu"]))
    path = write_dataset(tmp_path / "cells.bp", graphs, heads,
                         splits={"trainset": range(22), "valset": range(22, 30), "testset": [30]})
    whole = fit_baselines(path, "valset")
    monkeypatch.setattr(baseline, "BLOCK", 3)
    monkeypatch.setattr(baseline, "BLOCK_NODES", 10)  # 16-atom cells are read alone
    found = fit_baselines(path, "valset")
    assert found.heads["energy"].mae == pytest.approx(whole.heads["energy"].mae, rel=1e-12)

    train = _split(path, "trainset")
    elements = [28, 29, 46]
    coef = np.linalg.lstsq(_counts(train, elements), np.array([float(g.y_energy) for g in train]), rcond=None)[0]
    val = _split(path, "valset")
    predicted = _counts(val, elements) @ coef  # Au (79) has no reference energy: it adds nothing
    errors = predicted - np.array([float(g.y_energy) for g in val])
    atoms = np.array([g.num_nodes for g in val])

    energy = found.heads["energy"]
    assert sorted(energy.references) == elements
    np.testing.assert_allclose([energy.references[z] for z in elements], coef, rtol=1e-6)
    assert energy.structures == 8
    assert energy.mae == pytest.approx(np.mean(np.abs(errors)), rel=1e-6)
    assert energy.mae_per_atom == pytest.approx(np.mean(np.abs(errors) / atoms), rel=1e-6)
    forces = np.concatenate([g.y_forces.numpy() for g in val])
    assert found.heads["forces"].mae == pytest.approx(np.mean(np.abs(forces)), rel=1e-6)


def test_a_missing_split_is_named(alloy_store):
    with pytest.raises(ValueError, match="no calset to score the baselines on"):
        fit_baselines(alloy_store, "calset")
