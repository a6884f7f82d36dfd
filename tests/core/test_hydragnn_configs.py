"""HydraGNN's configs in our loader: the keys its code reads (accepted, used or named as unused),
the forms it writes (list-form heads, ``equivariance: null``, the keys ``update_config`` adds), its
MLIP form, the features we refuse (named), every problem of a config in one error, and the round
trip ours -> as HydraGNN rewrites it -> ours."""

from __future__ import annotations

import copy
import warnings

import pytest

from ensemble.export import hydragnn_mismatch
from graph_builders.schema import HeadRegistry, HeadSpec
from hydragnn_ensemble.config import ConfigError, config_from_dict, config_to_model_spec

HEADS = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/A")])


def base() -> dict:
    return {
        "NeuralNetwork": {
            "Architecture": {
                "mpnn_type": "SchNet", "radius": 5.0, "hidden_dim": 32, "num_conv_layers": 2,
                "num_gaussians": 20, "num_filters": 32,
                "output_heads": {"graph": {"num_sharedlayers": 1, "dim_sharedlayers": 32,
                                           "num_headlayers": 2, "dim_headlayers": [32, 16]}},
                "task_weights": [1.0],
            },
            "Variables_of_interest": {"input_node_features": [0], "output_names": ["energy"],
                                      "output_index": [0], "output_dim": [1], "type": ["graph"]},
            "Training": {"num_epoch": 3, "batch_size": 8, "Optimizer": {"type": "AdamW", "learning_rate": 1e-3}},
        }
    }


def with_(path: str, value) -> dict:
    data = base()
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return data


# Keys HydraGNN's code reads that its example configs set (issue #14's list): each loads.
ACCEPTED = [
    ("NeuralNetwork.Profile", {"enable": 0}),
    ("NeuralNetwork.Training.precision", "fp32"),
    ("NeuralNetwork.Training.epoch_start", 0),
    ("NeuralNetwork.Training.global_attn_redraw_interval", 1000),
    ("NeuralNetwork.Architecture.energy_weight", 1.0),
    ("NeuralNetwork.Architecture.energy_peratom_weight", 0.5),
    ("NeuralNetwork.Architecture.force_weight", 10.0),
    ("NeuralNetwork.Architecture.use_graph_attr_conditioning", False),
    ("NeuralNetwork.Architecture.graph_attr_conditioning_mode", "concat_node"),
    ("NeuralNetwork.Architecture.equivariance", None),
]


@pytest.mark.parametrize("key,value", ACCEPTED, ids=[k.rsplit(".", 1)[1] for k, _ in ACCEPTED])
def test_keys_hydragnn_reads_are_accepted(key, value):
    cfg = config_from_dict(with_(key, value))
    assert cfg.architecture.hidden_dim == 32
    spec = config_to_model_spec(cfg, HEADS, node_feature_dim=1, edge_dim=0)
    assert spec.mpnn_type == "SchNet" and spec.hidden_dim == 32


def test_list_form_single_branch_heads_are_the_dict_form():
    data = base()
    heads = data["NeuralNetwork"]["Architecture"]["output_heads"]
    heads["graph"] = [{"type": "branch-0", "architecture": heads["graph"]}]
    listed = config_from_dict(data)
    plain = config_from_dict(base())
    assert listed.architecture.output_heads == plain.architecture.output_heads


def test_multi_branch_heads_are_refused_naming_the_feature():
    data = base()
    g = data["NeuralNetwork"]["Architecture"]["output_heads"]["graph"]
    data["NeuralNetwork"]["Architecture"]["output_heads"]["graph"] = [
        {"type": "branch-0", "architecture": g}, {"type": "branch-1", "architecture": g}]
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, "multi.json")
    assert "multi-branch" in str(info.value) and "multi.json" in str(info.value)


def test_graph_attr_conditioning_is_refused_naming_the_feature():
    with pytest.raises(ConfigError) as info:
        config_from_dict(with_("NeuralNetwork.Architecture.use_graph_attr_conditioning", True), "gac.json")
    assert "use_graph_attr_conditioning" in str(info.value)


def test_equivariance_on_an_invariant_layer_is_a_warning_as_in_hydragnn():
    data = with_("NeuralNetwork.Architecture.equivariance", True)
    data["NeuralNetwork"]["Architecture"]["mpnn_type"] = "PNA"
    data["NeuralNetwork"]["Architecture"]["pna_deg"] = [0, 2, 5]
    with pytest.warns(UserWarning, match="equivariance"):
        cfg = config_from_dict(data)
    assert cfg.architecture.equivariance is False


def test_hydragnn_mlip_form_is_potential_mode():
    """HydraGNN's MLIP configs: one node-level energy and ``enable_interatomic_potential``."""
    data = base()
    arch, voi = data["NeuralNetwork"]["Architecture"], data["NeuralNetwork"]["Variables_of_interest"]
    arch["enable_interatomic_potential"] = True
    arch["output_heads"] = {"node": {"num_headlayers": 2, "dim_headlayers": [32, 32], "type": "mlp"}}
    voi.update(output_names=["energy"], type=["node"], output_dim=[1])
    with pytest.warns(UserWarning, match="potential mode"):
        cfg = config_from_dict(data)
    assert cfg.potential_mode and cfg.variables.type == ["graph"]
    spec = config_to_model_spec(cfg, HEADS, node_feature_dim=1, edge_dim=0)
    assert spec.energy_head == "energy" and spec.graph_head.dim_headlayers == (32, 32)


def test_heads_named_by_output_index_alone_as_hydragnn_allows(tmp_path):
    """HydraGNN needs no output_names (csce, ogb, dftb examples): the heads are then the dataset
    registry's entries at output_index; the trainer writes the names down."""
    data = base()
    del data["NeuralNetwork"]["Variables_of_interest"]["output_names"]
    cfg = config_from_dict(data)
    assert cfg.variables.output_names is None and cfg.variables.num_heads == 1
    spec = config_to_model_spec(cfg, HEADS, node_feature_dim=1, edge_dim=0)
    assert [h.name for h in spec.heads] == ["energy"]
    data["NeuralNetwork"]["Variables_of_interest"]["output_index"] = [2]
    with pytest.raises(ConfigError, match=r"output_index\[0\]: 2 is not a head of the dataset \(it has 2\)"):
        config_to_model_spec(config_from_dict(data), HEADS, node_feature_dim=1, edge_dim=0)
    del data["NeuralNetwork"]["Variables_of_interest"]["output_index"]
    with pytest.raises(ConfigError, match="output_names .or, as in HydraGNN, output_index. must name the heads"):
        config_from_dict(data)


def test_every_problem_of_a_config_in_one_error():
    data = with_("NeuralNetwork.Architecture.hiden_dim", 3)
    data["NeuralNetwork"]["Training"]["num_epochs"] = 3
    data["NeuralNetwork"]["Architecture"]["num_conv_layers"] = "three"
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, "bad.json")
    text = str(info.value)
    assert "hiden_dim" in text and "did you mean 'hidden_dim'" in text
    assert "num_epochs" in text and "num_epoch" in text
    assert "num_conv_layers" in text
    assert len(info.value.errors) == 3


def hydragnn_rewrite(config: dict) -> dict:
    """The config as HydraGNN's ``update_config`` saves it for a SchNet on a dataset like ours
    (hydragnn/utils/input_config_parsing/config_utils.py at the HydraGNN commit in
    /work/.mirror: the keys it sets when absent, the list-form heads of
    ``update_multibranch_heads``, ``input_dim``/``output_dim``/``output_type``/``num_nodes``)."""
    out = copy.deepcopy(config)
    nn = out["NeuralNetwork"]
    arch, tr = nn["Architecture"], nn["Training"]
    for key, value in {
        "global_attn_engine": None, "global_attn_type": None, "global_attn_heads": 0, "pe_dim": 0,
        "input_dim": len(nn["Variables_of_interest"]["input_node_features"]), "pna_deg": None,
        "avg_num_neighbors": None, "radial_type": None, "distance_transform": None,
        "envelope_exponent": None, "num_after_skip": None, "num_before_skip": None,
        "basis_emb_size": None, "int_emb_size": None, "out_emb_size": None, "num_radial": None,
        "num_spherical": None, "correlation": None, "max_ell": None, "node_max_ell": None,
        "enable_interatomic_potential": False, "edge_dim": None, "equivariance": None,
        "freeze_conv_layers": False, "initial_bias": None, "activation_function": "relu",
        "SyncBatchNorm": False, "output_dim": [1], "output_type": ["graph"], "num_nodes": 64,
    }.items():
        arch.setdefault(key, value)
    arch["output_heads"] = {k: [{"type": "branch-0", "architecture": v}] for k, v in arch["output_heads"].items()}
    tr.setdefault("global_attn_redraw_interval", 1000)
    tr.setdefault("conv_checkpointing", False)
    tr.setdefault("loss_function_type", "mse")
    tr.setdefault("precision", "fp32")
    return out


@pytest.mark.parametrize("mpnn_type", ["SchNet", "GIN", "PNA", "EGNN", "PAINN", "CGCNN"])
def test_round_trip_through_hydragnns_rewrite_builds_the_same_model(mpnn_type):
    data = base()
    data["NeuralNetwork"]["Architecture"]["mpnn_type"] = mpnn_type
    if mpnn_type == "PNA":
        data["NeuralNetwork"]["Architecture"]["pna_deg"] = [0, 3, 9, 4]
    ours = config_from_dict(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing in HydraGNN's rewrite needs a warning
        theirs = config_from_dict(hydragnn_rewrite(ours.to_dict()))
    a = config_to_model_spec(ours, HEADS, node_feature_dim=1, edge_dim=0)
    b = config_to_model_spec(theirs, HEADS, node_feature_dim=1, edge_dim=0)
    assert a == b


def test_cgcnn_member_hydragnn_would_shrink_is_named_not_exported():
    data = base()
    data["NeuralNetwork"]["Architecture"]["mpnn_type"] = "CGCNN"
    why = hydragnn_mismatch(data)
    assert why is not None and "hidden_dim 32" in why and "len(input_node_features) = 1" in why
    data["NeuralNetwork"]["Architecture"]["hidden_dim"] = 1
    assert hydragnn_mismatch(data) is None
    data["NeuralNetwork"]["Architecture"].update(mpnn_type="SchNet", hidden_dim=32)
    assert hydragnn_mismatch(data) is None


def test_export_writes_the_layer_sizes_hydragnn_requires():
    """HydraGNN asserts on SchNet's num_gaussians/num_filters and builds PaiNN from num_radial; our
    loader defaults them. The exported config spells out the widths we trained, and loads back to
    the same model here."""
    from ensemble.export import for_hydragnn

    for layer, expected in (("SchNet", {"num_gaussians": 20, "num_filters": 32}), ("PAINN", {"num_radial": 20}),
                            ("GIN", {})):
        data = base()
        data["NeuralNetwork"]["Architecture"]["mpnn_type"] = layer
        del data["NeuralNetwork"]["Architecture"]["num_filters"]
        out = for_hydragnn(data)
        arch = out["NeuralNetwork"]["Architecture"]
        for key, value in expected.items():
            assert arch[key] == value, (layer, key)
        a = config_to_model_spec(config_from_dict(data), HEADS, node_feature_dim=1, edge_dim=0)
        b = config_to_model_spec(config_from_dict(out), HEADS, node_feature_dim=1, edge_dim=0)
        assert a == b
    data = base()
    data["NeuralNetwork"]["Architecture"]["num_filters"] = 64  # hidden_dim is 32
    assert "num_filters 64 != hidden_dim 32" in hydragnn_mismatch(data)
