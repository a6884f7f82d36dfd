"""Before trial 1: the base config and every search-space value against the dataset (hpo.preflight),
and the units that decide whether an energy is a total or per atom."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry, HeadSpec, energy_unit
from graph_builders.store import write_dataset
from hpo.preflight import check_against_dataset, probe_values
from hpo.space import SearchSpace

HEADS = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/Å"),
                         HeadSpec("gap", "graph", 1, "")])


def _graph(k: int) -> Data:
    n = 4
    d = Data(x=torch.full((n, 1), 29.0), pos=torch.rand(n, 3) * 3, z=torch.full((n,), 29),
             edge_index=torch.tensor([[0, 1, 2, 3, 1, 2, 3, 0], [1, 2, 3, 0, 0, 1, 2, 3]]))
    d.edge_attr = torch.ones(8, 1)
    d.y_energy, d.y_forces, d.y_gap = torch.tensor([[float(k)]]), torch.zeros(n, 3), torch.tensor([[0.5]])
    return d


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("preflight") / "d.bp"
    write_dataset(path, [_graph(k) for k in range(10)], HEADS, metadata={"cutoff": 5.0})
    return path


def base(names=("energy",), potential: bool = False, **arch) -> dict:
    types = ["node" if n == "forces" else "graph" for n in names]
    config = {"NeuralNetwork": {
        "Architecture": {"mpnn_type": "SchNet", "hidden_dim": 16, "num_conv_layers": 2, "radius": 5.0,
                         "output_heads": {"graph": {"num_sharedlayers": 1, "dim_sharedlayers": 8,
                                                    "num_headlayers": 1, "dim_headlayers": [8]},
                                          "node": {"num_headlayers": 1, "dim_headlayers": [8]}}, **arch},
        "Variables_of_interest": {"input_node_features": [0], "output_names": list(names), "type": types},
        "Training": {"num_epoch": 2, "compute_grad_energy": potential}}}
    return config


def test_a_clean_campaign_passes_and_a_radius_mismatch_is_a_warning(dataset) -> None:
    space = SearchSpace.from_dict({"NeuralNetwork.Architecture.mpnn_type": {"type": "categorical",
                                                                            "choices": ["SchNet", "GIN"]},
                                   "NeuralNetwork.Architecture.radius": {"type": "float", "low": 4.0, "high": 5.0}})
    report = check_against_dataset(base(), space, dataset)
    assert report.errors == [] and report.configs_checked == 5
    assert len(report.warnings) == 1 and "radius = 4.0: NeuralNetwork.Architecture.radius 4.0 differs" in report.warnings[0]


def test_every_problem_is_named_with_the_key_and_value_that_causes_it(dataset) -> None:
    space = SearchSpace.from_dict({
        "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["SchNet", "DimeNet"]},
        "NeuralNetwork.Variables_of_interest.input_node_features": {"type": "categorical", "choices": [0, 3]}})
    report = check_against_dataset(base(names=("formation_energy",)), space, dataset)
    assert report.errors[0].startswith("base_config: NeuralNetwork.Variables_of_interest.output_names[0]: head "
                                       "'formation_energy' is not in the dataset; dataset heads: energy (graph, dim 1)")
    # the base config's own problem is not repeated for every value; the values' own problems are named
    assert sum("formation_energy" in e for e in report.errors) == 1
    assert any(e.startswith("search_space NeuralNetwork.Architecture.mpnn_type = 'DimeNet': ") and
               "not built by this package" in e for e in report.errors)
    assert any(e.startswith("search_space NeuralNetwork.Variables_of_interest.input_node_features = 3: ")
               for e in report.errors)


def test_potential_mode_needs_an_energy_head_whose_unit_says_total_or_per_atom(dataset) -> None:
    space = SearchSpace.from_dict({"NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 8, "high": 16}})
    ok = check_against_dataset(base(("energy", "forces"), potential=True), space, dataset)
    assert ok.errors == []
    report = check_against_dataset(base(("gap", "forces"), potential=True), space, dataset)
    assert len(report.errors) == 1
    assert "the energy head 'gap' has unit ''" in report.errors[0] and "--units gap=eV" in report.errors[0]


def test_probe_values_are_every_choice_or_both_ends() -> None:
    space = SearchSpace.from_dict({"a": {"type": "categorical", "choices": ["x", "y", "z"]},
                                   "b": {"type": "int", "low": 2, "high": 9, "step": 1},
                                   "c": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}})
    assert [probe_values(space[k]) for k in space.keys] == [["x", "y", "z"], [2, 9], [1e-4, 1e-2]]


@pytest.mark.parametrize("unit, to_ev, per_atom", [
    ("eV", 1.0, False), ("eV/atom", 1.0, True), ("meV/atom", 1e-3, True), ("Ha", 27.211386245988, False),
    ("kcal/mol", 0.0433641043, False)])
def test_energy_units(unit, to_ev, per_atom) -> None:
    parsed = energy_unit(unit)
    assert parsed is not None and parsed.per_atom is per_atom and parsed.to_ev == pytest.approx(to_ev)


@pytest.mark.parametrize("unit", ["", "GPa", "eV/Å", "K"])
def test_units_that_are_no_energy(unit) -> None:
    assert energy_unit(unit) is None


def test_a_label_is_compared_in_the_heads_unit() -> None:
    from ensemble.inputs import in_head_unit

    per_atom = HeadSpec("energy", "graph", 1, "eV/atom")
    total = np.array([[-64.0]])
    assert in_head_unit(per_atom, total, "eV", 32).item() == pytest.approx(-2.0)
    assert in_head_unit(HeadSpec("energy", "graph", 1, "meV"), total, "eV", 32).item() == pytest.approx(-64000.0)
    assert in_head_unit(HeadSpec("energy", "graph", 1, "eV"), np.array([[-2.0]]), "eV/atom", 32).item() == pytest.approx(-64.0)
    assert in_head_unit(HeadSpec("gap", "graph", 1, "K"), total, "eV", 32) is None  # not convertible
    assert in_head_unit(per_atom, np.zeros((1, 3)), "eV", 32) is None  # another shape


def test_hydragnn_shaped_campaign_refuses_the_layer_types_it_is_not_built_for(dataset) -> None:
    space = SearchSpace.from_dict({"NeuralNetwork.Architecture.mpnn_type": {"type": "categorical",
                                                                            "choices": ["SchNet", "GIN", "GAT"]}})
    report = check_against_dataset(base(hydragnn_shaped=True), space, dataset)
    assert len(report.errors) == 1
    assert report.errors[0].startswith("search_space NeuralNetwork.Architecture.mpnn_type = 'GAT': "
                                       "NeuralNetwork.Architecture.hydragnn_shaped: not built for GAT")
    assert report.errors[0].endswith("available for GIN, PNA, SchNet, EGNN, PaiNN")


def test_a_layer_that_cannot_be_a_potential_is_refused_before_trial_1_with_its_reason(dataset) -> None:
    """Potential mode: GIN, PNA and GAT do not see positions (their forces would be zero), and
    HydraGNN's EGNN (hydragnn_shaped) has no radial filter on its messages (its forces train to
    zero); each is named with the key and value that gives it and why. SchNet, EGNN, PaiNN, CGCNN
    and the shaped PaiNN and SchNet pass."""
    mt = "NeuralNetwork.Architecture.mpnn_type"
    space = SearchSpace.from_dict({mt: {"type": "categorical",
                                        "choices": ["SchNet", "EGNN", "PAINN", "CGCNN", "GIN", "PNA", "GAT"]}})
    report = check_against_dataset(base(("energy", "forces"), potential=True), space, dataset)
    assert len(report.errors) == 3
    for layer, error in zip(("GIN", "PNA", "GAT"), report.errors):
        assert error == (f"search_space {mt} = {layer!r}: {mt}: {layer} does not see the atoms' positions, so in "
                         "potential mode (compute_grad_energy) its forces and stress would be zero; use one of "
                         "CGCNN, SchNet, EGNN, PaiNN")
    shaped = SearchSpace.from_dict({mt: {"type": "categorical", "choices": ["SchNet", "PAINN", "EGNN"]}})
    report = check_against_dataset(base(("energy", "forces"), potential=True, hydragnn_shaped=True), shaped, dataset)
    assert len(report.errors) == 1
    assert report.errors[0].startswith(f"search_space {mt} = 'EGNN': NeuralNetwork.Architecture.hydragnn_shaped: "
                                       "HydraGNN's EGNN reads the edge length only as one more input of its edge MLP")
    assert "forces train to zero" in report.errors[0]
    # the same base without potential mode has no such problem
    assert check_against_dataset(base(hydragnn_shaped=True), shaped, dataset).errors == []
