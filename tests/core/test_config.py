"""HydraGNN JSON configuration: schema, errors with suggestions, round trip, dotted keys, spec."""

from __future__ import annotations

import copy
import json

import pytest

from graph_builders.schema import HeadRegistry, HeadSpec
from hydragnn_ensemble.config import (
    ConfigError,
    HydraConfig,
    config_from_dict,
    config_to_model_spec,
    get_by_dotted_key,
    load_config,
    save_config,
    set_by_dotted_key,
    validate_against_heads,
)

# A config in the shape of HydraGNN's examples/multidataset_hpo/gfm_multitasking.json (EGNN,
# DimeNet-style keys it ignores, "Variables" section of newer HydraGNN) plus the lsms.json
# "Dataset" block and the keys HydraGNN writes into the config it saves after update_config.
HYDRAGNN_CONFIG = {
    "Verbosity": {"level": 2},
    "Dataset": {
        "name": "FePt_32atoms",
        "path": {"total": "./dataset/FePt_enthalpy"},
        "format": "LSMS",
        "compositional_stratified_splitting": True,
        "rotational_invariance": False,
        "node_features": {"name": ["num_of_protons", "charge_density", "magnetic_moment"],
                          "dim": [1, 1, 1], "column_index": [0, 5, 6]},
        "graph_features": {"name": ["free_energy_scaled_num_nodes"], "dim": [1], "column_index": [0]},
    },
    "NeuralNetwork": {
        "Architecture": {
            "mpnn_type": "EGNN",
            "equivariance": True,
            "radius": 5.0,
            "max_neighbours": 100000,
            "num_gaussians": 50,
            "envelope_exponent": 5,
            "int_emb_size": 64,
            "basis_emb_size": 8,
            "out_emb_size": 128,
            "num_after_skip": 2,
            "num_before_skip": 1,
            "num_radial": 6,
            "num_spherical": 7,
            "num_filters": 126,
            "edge_features": ["length"],
            "hidden_dim": 50,
            "num_conv_layers": 3,
            "periodic_boundary_conditions": True,
            "output_heads": {
                "graph": {"num_sharedlayers": 2, "dim_sharedlayers": 50, "num_headlayers": 2,
                          "dim_headlayers": [50, 25]},
                "node": {"num_headlayers": 2, "dim_headlayers": [200, 200], "type": "mlp"},
            },
            "task_weights": [1.0, 1.0],
            "SyncBatchNorm": False,
            "pna_deg": None,
            "input_dim": 1,
            "output_dim": [1, 3],
            "output_type": ["graph", "node"],
            "num_nodes": 32,
            "edge_dim": 1,
        },
        "Variables_of_interest": {
            "input_node_features": [0],
            "output_names": ["energy", "forces"],
            "output_index": [0, 2],
            "output_dim": [1, 3],
            "type": ["graph", "node"],
            "denormalize_output": False,
        },
        "Training": {
            "num_epoch": 50,
            "EarlyStopping": True,
            "perc_train": 0.9,
            "loss_function_type": "mae",
            "batch_size": 32,
            "continue": 0,
            "startfrom": "existing_model",
            "Optimizer": {"type": "AdamW", "learning_rate": 0.001},
            "compute_grad_energy": False,
            "conv_checkpointing": False,
        },
    },
    "Visualization": {"plot_init_solution": True, "plot_hist_solution": False, "create_plots": True},
    "Variables": {"graph_type": "homogeneous",
                  "outputs": [{"name": "energy", "level": "graph", "dim": 1}]},
}

HEADS = HeadRegistry.of([
    HeadSpec("energy", "graph", 1, "eV/atom"),
    HeadSpec("forces", "node", 3, "eV/A"),
    HeadSpec("stress", "graph", 6, "eV/A^3"),
])


def small_config() -> dict:
    return {
        "NeuralNetwork": {
            "Architecture": {
                "mpnn_type": "GIN", "hidden_dim": 16, "num_conv_layers": 2,
                "output_heads": {"graph": {"num_sharedlayers": 1, "dim_sharedlayers": 16,
                                           "num_headlayers": 1, "dim_headlayers": [16]}},
            },
            "Variables_of_interest": {"output_names": ["energy"], "type": ["graph"]},
        }
    }


def errors_of(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, "cfg.json")
    return info.value.errors


def test_hydragnn_config_loads_and_keeps_its_values(tmp_path):
    path = tmp_path / "hydragnn.json"
    path.write_text(json.dumps(HYDRAGNN_CONFIG))
    cfg = load_config(path)
    assert cfg.architecture.mpnn_type == "EGNN"
    assert cfg.architecture.output_heads.node.dim_headlayers == [200, 200]
    assert cfg.training.Optimizer.learning_rate == 0.001
    assert cfg.training.continue_ == 0
    assert cfg.Dataset["name"] == "FePt_32atoms"
    out = cfg.to_dict()
    assert out["NeuralNetwork"]["Training"]["continue"] == 0  # HydraGNN's key name, not continue_
    # every key HydraGNN wrote is still there with its value (nulls are left out, as HydraGNN
    # fills missing keys with None itself)
    def same(a, b, where=""):
        for k, v in a.items():
            if v is None:
                continue
            assert k in b, where + k
            if isinstance(v, dict):
                same(v, b[k], where + k + ".")
            else:
                assert b[k] == v, where + k
    same(HYDRAGNN_CONFIG, out)


def test_round_trip_is_exact(tmp_path):
    cfg = config_from_dict(HYDRAGNN_CONFIG)
    p1, p2 = tmp_path / "a.json", tmp_path / "b.json"
    save_config(cfg, p1)
    again = load_config(p1)
    save_config(again, p2)
    assert again == cfg
    assert p1.read_text() == p2.read_text()
    assert json.loads(p1.read_text()) == cfg.to_dict()


def test_defaults_are_filled_explicitly():
    out = config_from_dict(small_config()).to_dict()
    tr = out["NeuralNetwork"]["Training"]
    assert tr["num_epoch"] == 100 and tr["batch_size"] == 32 and tr["loss_function_type"] == "mse"
    assert tr["Optimizer"] == {"type": "AdamW", "learning_rate": 0.001, "weight_decay": 0.01,
                               "use_zero_redundancy": False}
    assert tr["lr_schedule"] == "plateau" and tr["seed"] == 0
    assert out["NeuralNetwork"]["Architecture"]["task_weights"] == [1.0]
    assert out["NeuralNetwork"]["Architecture"]["activation_function"] == "relu"


def test_unknown_key_suggests_the_closest():
    data = small_config()
    data["NeuralNetwork"]["Architecture"]["hiden_dim"] = 3
    assert errors_of(data) == ["NeuralNetwork.Architecture.hiden_dim: unknown key; did you mean 'hidden_dim'?"]
    data = small_config()
    data["NeuralNetwork"]["Trainin"] = {}
    assert errors_of(data) == ["NeuralNetwork.Trainin: unknown key; did you mean 'Training'?"]
    data = small_config()
    data["NeuralNetwork"]["Architecture"]["model_type"] = "GIN"  # older HydraGNN name
    assert errors_of(data)[0].startswith(
        "NeuralNetwork.Architecture.model_type: unknown key; did you mean 'mpnn_type'?")


def test_message_names_the_file(tmp_path):
    data = small_config()
    data["NeuralNetwork"]["Architecture"]["hidden_dim"] = 0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: NeuralNetwork.Architecture.hidden_dim: hidden_dim must be > 0 (got 0)"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(path)


def test_type_and_value_errors():
    data = small_config()
    arch = data["NeuralNetwork"]["Architecture"]
    arch["hidden_dim"] = "sixty-four"
    arch["mpnn_type"] = "PNAA"
    data["NeuralNetwork"]["Training"] = {"Optimizer": {"learning_rate": -1.0}, "batch_size": [32]}
    errs = errors_of(data)
    assert any(e.startswith("NeuralNetwork.Architecture.hidden_dim: Input should be a valid integer")
               and "'sixty-four'" in e for e in errs)
    assert ("NeuralNetwork.Architecture.mpnn_type: unknown mpnn_type 'PNAA'; did you mean 'PNA'? valid: "
            "GIN, PNA, PNAPlus, GAT, MFC, CGCNN, SAGE, SchNet, DimeNet, EGNN, PAINN, PNAEq, MACE") in errs
    assert "NeuralNetwork.Training.Optimizer.learning_rate: learning_rate must be > 0 (got -1.0)" in errs
    assert any(e.startswith("NeuralNetwork.Training.batch_size: Input should be a valid integer") for e in errs)


def test_list_lengths_must_match():
    data = small_config()
    voi = data["NeuralNetwork"]["Variables_of_interest"]
    voi["output_names"] = ["energy", "forces"]
    voi["type"] = ["graph", "node"]
    voi["output_dim"] = [1]
    assert errors_of(data) == [
        "NeuralNetwork.Variables_of_interest: output_dim has 1 entries but output_names has 2 "
        "(['energy', 'forces']); they must match one to one"]
    voi["output_dim"] = [1, 3]
    data["NeuralNetwork"]["Architecture"]["task_weights"] = [1.0]
    data["NeuralNetwork"]["Architecture"]["output_heads"]["node"] = {"num_headlayers": 1, "dim_headlayers": [8]}
    assert errors_of(data) == [
        "NeuralNetwork: Architecture.task_weights has 1 entries but Variables_of_interest.output_names "
        "has 2 (['energy', 'forces'])"]


def test_missing_node_head_architecture():
    data = small_config()
    voi = data["NeuralNetwork"]["Variables_of_interest"]
    voi["output_names"], voi["type"] = ["energy", "forces"], ["graph", "node"]
    assert errors_of(data) == ["NeuralNetwork: Variables_of_interest.type has a 'node' head but "
                               "Architecture.output_heads.node is missing"]


def test_painn_spelling_is_canonicalised():
    data = small_config()
    data["NeuralNetwork"]["Architecture"]["mpnn_type"] = "PaiNN"
    cfg = config_from_dict(data)
    assert cfg.architecture.mpnn_type == "PAINN"  # HydraGNN's spelling on export
    spec = config_to_model_spec(cfg, HEADS, node_feature_dim=1, edge_dim=1)
    assert spec.mpnn_type == "PaiNN"  # the builder's registry name


def test_validate_against_heads():
    data = small_config()
    voi = data["NeuralNetwork"]["Variables_of_interest"]
    voi["output_names"], voi["type"], voi["output_dim"] = ["energy", "forces", "charge"], ["graph", "graph", "node"], [1, 1, 1]
    data["NeuralNetwork"]["Architecture"]["output_heads"]["node"] = {"num_headlayers": 1, "dim_headlayers": [8]}
    cfg = config_from_dict(data)
    with pytest.raises(ConfigError) as info:
        validate_against_heads(cfg, HEADS, source="alloy.bp")
    table = "energy (graph, dim 1), forces (node, dim 3), stress (graph, dim 6)"
    assert info.value.errors == [
        "NeuralNetwork.Variables_of_interest.output_names[1]: head 'forces' is a node head in the "
        f"dataset but type[1] is 'graph'; dataset heads: {table}",
        "NeuralNetwork.Variables_of_interest.output_names[1]: head 'forces' has dim 3 in the dataset "
        f"but output_dim[1] is 1; dataset heads: {table}",
        "NeuralNetwork.Variables_of_interest.output_names[2]: head 'charge' is not in the dataset; "
        f"dataset heads: {table}",
    ]
    assert str(info.value).startswith("alloy.bp: 3 problems:")


def test_dotted_keys():
    data = small_config()
    set_by_dotted_key(data, "NeuralNetwork.Architecture.hidden_dim", 128)
    set_by_dotted_key(data, "NeuralNetwork.Training.Optimizer.learning_rate", 3e-4)
    assert get_by_dotted_key(data, "NeuralNetwork.Architecture.hidden_dim") == 128
    assert get_by_dotted_key(data, "NeuralNetwork.Training.Optimizer.learning_rate") == 3e-4
    assert get_by_dotted_key(data, "NeuralNetwork.Training.batch_size") == 32  # schema default
    assert get_by_dotted_key(data, "NeuralNetwork.Architecture.radius") is None
    cfg = config_from_dict(data)
    assert cfg.architecture.hidden_dim == 128 and cfg.training.Optimizer.learning_rate == 3e-4
    assert get_by_dotted_key(cfg, "NeuralNetwork.Architecture.hidden_dim") == 128
    with pytest.raises(ConfigError, match=r"NeuralNetwork.Architecture.hiddn_dim: unknown key; did you mean 'hidden_dim'\?"):
        set_by_dotted_key(data, "NeuralNetwork.Architecture.hiddn_dim", 1)
    with pytest.raises(ConfigError, match="NeuralNetwork.Architecture.hidden_dim: is a value, has no key 'x'"):
        get_by_dotted_key(data, "NeuralNetwork.Architecture.hidden_dim.x")
    before = copy.deepcopy(data)
    with pytest.raises(ConfigError):
        set_by_dotted_key(data, "Neural.Architecture.hidden_dim", 1)
    assert data == before  # nothing written for an unknown path
    set_by_dotted_key(data, "Dataset.name", "alloy")  # open section: any key
    assert data["Dataset"] == {"name": "alloy"}


def test_egnn_moves_coordinates_only_with_equivariance_as_in_hydragnn():
    """HydraGNN's EGNN updates coordinates only with ``equivariance: true`` (its default is false),
    and then has a coordinate network in every layer but the last."""
    from hydragnn_ensemble.model import build_model

    data = copy.deepcopy(HYDRAGNN_CONFIG)
    data["NeuralNetwork"]["Architecture"].pop("equivariance", None)
    counts = {}
    for flag in (None, False, True):
        if flag is not None:
            data["NeuralNetwork"]["Architecture"]["equivariance"] = flag
        spec = config_to_model_spec(config_from_dict(data), HEADS, node_feature_dim=1, edge_dim=1)
        assert spec.equivariance is bool(flag)
        model = build_model(spec)
        counts[flag] = model.num_parameters()
        coord_nets = [layer.coord_mlp is not None for layer in model.layers]
        assert coord_nets == ([True] * (len(coord_nets) - 1) + [False] if flag else [False] * len(coord_nets))
    hidden = spec.hidden_dim
    assert counts[True] - counts[False] == (spec.num_conv_layers - 1) * (hidden * hidden + hidden + hidden)
    assert counts[None] == counts[False]


def test_config_to_model_spec():
    data = copy.deepcopy(HYDRAGNN_CONFIG)
    data["NeuralNetwork"]["Architecture"]["mpnn_type"] = "PNA"
    data["NeuralNetwork"]["Architecture"]["equivariance"] = False
    data["NeuralNetwork"]["Training"]["loss_function_type"] = "GaussianNLLLoss"
    cfg = config_from_dict(data)
    with pytest.raises(ConfigError, match="pna_deg: PNA needs a degree histogram"):
        config_to_model_spec(cfg, HEADS, node_feature_dim=1, edge_dim=1)
    spec = config_to_model_spec(cfg, HEADS, node_feature_dim=1, edge_dim=1, degree_histogram=[0, 2, 5])
    assert spec.mpnn_type == "PNA" and spec.hidden_dim == 50 and spec.num_conv_layers == 3
    assert spec.heads.names == ["energy", "forces"]
    assert spec.edge_dim == 1 and spec.radius == 5.0 and spec.num_gaussians == 50
    assert spec.graph_head.dim_headlayers == (50, 25) and spec.node_head.dim_headlayers == (200, 200)
    assert spec.predict_variance is True
    assert spec.pna_degree_histogram == (0, 2, 5)
    assert spec.energy_head is None
    # potential mode: energy/forces/stress found by level and dim
    data["NeuralNetwork"]["Training"]["compute_grad_energy"] = True
    data["NeuralNetwork"]["Architecture"]["mpnn_type"] = "SchNet"
    spec = config_to_model_spec(config_from_dict(data), HEADS, node_feature_dim=1, edge_dim=1)
    assert (spec.energy_head, spec.forces_head, spec.stress_head) == ("energy", "forces", None)
    # columns of x that do not exist
    data["NeuralNetwork"]["Variables_of_interest"]["input_node_features"] = [0, 3]
    with pytest.raises(ConfigError, match=r"input_node_features: columns \[3\] do not exist; the dataset's x has 1 column"):
        config_to_model_spec(config_from_dict(data), HEADS, node_feature_dim=1, edge_dim=1)


def test_hydragnn_layer_we_do_not_build_is_refused_with_the_list():
    data = small_config()
    data["NeuralNetwork"]["Architecture"]["mpnn_type"] = "DimeNet"
    cfg = config_from_dict(data)  # a valid HydraGNN config ...
    with pytest.raises(ConfigError, match="'DimeNet' is a HydraGNN layer this package does not build; available: GIN"):
        config_to_model_spec(cfg, HEADS, node_feature_dim=1, edge_dim=1)  # ... we cannot build


def test_assignment_is_validated():
    cfg = config_from_dict(small_config())
    with pytest.raises(ValueError, match="hidden_dim must be > 0"):
        cfg.architecture.hidden_dim = -1
    assert isinstance(cfg, HydraConfig)


@pytest.mark.parametrize("example", ["alloy/config.json", "alloy/potential.json", "alloy/formation_energy.json",
                                     "polycrystal/config.json", "fem/config.json"])
def test_examples_match_their_datasets(example):
    from pathlib import Path

    from graph_builders.datasets.alloy import ALLOY_HEADS
    from graph_builders.datasets.fem import FEM_HEADS
    from graph_builders.datasets.polycrystal import HEADS as POLYCRYSTAL_HEADS

    registry = {"alloy": ALLOY_HEADS, "polycrystal": POLYCRYSTAL_HEADS, "fem": FEM_HEADS}[example.split("/")[0]]
    cfg = load_config(Path(__file__).resolve().parents[2] / "examples" / example)
    validate_against_heads(cfg, registry)
    expected = ["formation_energy"] if example.endswith("formation_energy.json") else registry.names
    assert cfg.variables.output_names == expected
