"""Built-in FEM dataset: physics checks (linear field, bounds), graph contents, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graph_builders.datasets.fem import (
    FEM_HEADS,
    FemConfig,
    HeatConductionSolver,
    make_fem_dataset,
    sample_rngs,
    simulate_sample,
)
from graph_builders.schema import validate_graph


@pytest.fixture(scope="module")
def solver() -> HeatConductionSolver:
    return HeatConductionSolver(refine=4)


def test_homogeneous_domain_gives_linear_temperature_and_k_eff_equal_k() -> None:
    dataset = make_fem_dataset(num_samples=2, inclusions=(0, 0), refine=3, matrix_conductivity=2.5,
                               progress=False)
    for graph in dataset.graphs:
        assert graph.num_inclusions.tolist() == [0]
        assert graph.y_effective_conductivity.item() == pytest.approx(2.5, rel=1e-6)
        assert torch.allclose(graph.y_temperature[:, 0], graph.pos[:, 0], atol=1e-6)
        assert torch.allclose(graph.x[:, 0], torch.full((graph.num_nodes,), 2.5))


def test_three_dimensional_homogeneous_and_bounded() -> None:
    homogeneous = make_fem_dataset(num_samples=1, inclusions=(0, 0), refine=2, dim=3,
                                   matrix_conductivity=0.5, progress=False).graphs[0]
    assert homogeneous.x.shape == (homogeneous.num_nodes, 4)  # conductivity, x, y, z
    assert torch.equal(homogeneous.x[:, 1:], homogeneous.pos)
    assert homogeneous.y_effective_conductivity.item() == pytest.approx(0.5, rel=1e-6)
    assert torch.allclose(homogeneous.y_temperature[:, 0], homogeneous.pos[:, 0], atol=1e-6)
    solver = HeatConductionSolver(refine=3, dim=3)
    assert solver.element_measures.sum() == pytest.approx(1.0)  # element volumes fill the unit cube
    config = FemConfig(inclusions=(3, 3), radius=(0.2, 0.3), refine=3, dim=3)
    sample = simulate_sample(solver, config, sample_rngs(seed=2, count=1)[0])
    k, volume = sample.element_conductivity, solver.element_measures
    voigt, reuss = float(np.sum(volume * k)), float(1.0 / np.sum(volume / k))
    assert reuss < sample.solution.effective_conductivity < voigt


def test_effective_conductivity_lies_between_reuss_and_voigt(solver: HeatConductionSolver) -> None:
    config = FemConfig(inclusions=(2, 4), contrast=(0.05, 20.0), refine=4)
    for rng in sample_rngs(seed=5, count=6):
        sample = simulate_sample(solver, config, rng)
        k, area = sample.element_conductivity, solver.element_measures
        voigt = float(np.sum(area * k) / area.sum())  # arithmetic mean: upper bound
        reuss = float(area.sum() / np.sum(area / k))  # harmonic mean: lower bound
        assert reuss < voigt  # a real two-phase mix
        assert reuss < sample.solution.effective_conductivity < voigt


def test_conductive_discs_raise_and_resistive_discs_lower_k_eff(solver: HeatConductionSolver) -> None:
    rng_a, rng_b = sample_rngs(seed=1, count=2)
    conductive = simulate_sample(solver, FemConfig(inclusions=(2, 2), contrast=(10.0, 10.0)), rng_a)
    resistive = simulate_sample(solver, FemConfig(inclusions=(2, 2), contrast=(0.1, 0.1)), rng_b)
    assert set(np.unique(conductive.element_conductivity)) == {1.0, 10.0}
    assert conductive.solution.effective_conductivity > 1.0
    assert resistive.solution.effective_conductivity < 1.0
    # temperatures respect the Dirichlet data and the maximum principle
    temperature = conductive.solution.temperature
    x = solver.mesh.p[0]
    assert np.all(temperature[np.isclose(x, 0.0)] == 0.0) and np.all(temperature[np.isclose(x, 1.0)] == 1.0)
    assert temperature.min() >= -1e-12 and temperature.max() <= 1 + 1e-12


def test_graphs_follow_the_schema_and_do_not_leak_the_target() -> None:
    dataset = make_fem_dataset(num_samples=3, refine=3, seed=4, progress=False)
    assert dataset.name == "fem" and dataset.splits is None
    assert dataset.heads == FEM_HEADS
    assert [(h.name, h.level, h.dim, h.unit) for h in dataset.heads] == [
        ("temperature", "node", 1, "K"), ("effective_conductivity", "graph", 1, "W/(m K)")
    ]
    assert [g.name for g in dataset.graphs] == ["fem_4_00000", "fem_4_00001", "fem_4_00002"]
    assert dataset.metadata["num_elements"] == 128 and dataset.metadata["num_nodes"] == 81
    for graph in dataset.graphs:
        validate_graph(graph, dataset.heads, graph.name)
        assert graph.x.shape == (81, 3) and graph.edge_attr.shape == (graph.edge_index.shape[1], 4)
        assert torch.equal(graph.x[:, 1:], graph.pos[:, :2])  # coordinates
        assert torch.equal(graph.pos[:, 2], torch.zeros(81))
        assert graph.x[:, 0].min() >= 0.1 - 1e-6 and graph.x[:, 0].max() <= 10.0 + 1e-6
        for column in range(3):
            assert not torch.allclose(graph.x[:, column], graph.y_temperature[:, 0])


def test_dataset_matches_the_per_sample_simulation() -> None:
    dataset = make_fem_dataset(num_samples=2, refine=3, seed=8, progress=False)
    solver = HeatConductionSolver(refine=3)
    rng = sample_rngs(seed=8, count=2)[1]
    sample = simulate_sample(solver, FemConfig(refine=3), rng)
    graph = dataset.graphs[1]
    assert graph.y_effective_conductivity.item() == pytest.approx(
        sample.solution.effective_conductivity, rel=1e-6
    )
    assert np.allclose(graph.y_temperature[:, 0].numpy(), sample.solution.temperature, atol=1e-6)


def test_seeded_and_reproducible() -> None:
    first = make_fem_dataset(num_samples=3, refine=3, seed=11, progress=False)
    again = make_fem_dataset(num_samples=3, refine=3, seed=11, progress=False)
    prefix = make_fem_dataset(num_samples=2, refine=3, seed=11, progress=False)
    other = make_fem_dataset(num_samples=3, refine=3, seed=12, progress=False)
    for a, b in zip(first.graphs, again.graphs):
        for key in ("x", "y_temperature", "y_effective_conductivity", "edge_index", "num_inclusions"):
            assert torch.equal(a[key], b[key])
    for a, b in zip(first.graphs, prefix.graphs):  # sample i does not depend on num_samples
        assert torch.equal(a.y_temperature, b.y_temperature)
    k_first = [g.y_effective_conductivity.item() for g in first.graphs]
    k_other = [g.y_effective_conductivity.item() for g in other.graphs]
    assert k_first != k_other


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_samples": 0}, "num_samples must be >= 1, got 0"),
        ({"inclusions": (3, 1)}, "inclusions must be (min, max) with 0 <= min <= max, got (3, 1)"),
        ({"contrast": (0.0, 2.0)}, "contrast must be (min, max) with 0 < min <= max, got (0.0, 2.0)"),
        ({"refine": 12}, "refine must be in 1..9 for dim=2, got 12"),
        ({"refine": 7, "dim": 3}, "refine must be in 1..6 for dim=3, got 7"),
        ({"dim": 1}, "dim must be 2 or 3, got 1"),
        ({"matrix_conductivity": -1.0}, "matrix_conductivity must be positive, got -1.0"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        make_fem_dataset(progress=False, **kwargs)
    assert str(info.value) == message
