"""SearchSpace parsing, validation, sampling and apply_params."""

from __future__ import annotations

import numpy as np
import pytest

from hpo.space import ConfigPathError, SearchSpace, SearchSpaceError, apply_params, check_config_paths

from hpo_testdata import BASE_CONFIG, SPACE


def test_from_dict_round_trip_and_keys():
    space = SearchSpace.from_dict(SPACE)
    assert space.keys == list(SPACE)
    spec = space.to_dict()
    assert spec["NeuralNetwork.Architecture.num_conv_layers"] == {"type": "int", "low": 1, "high": 6, "log": False, "step": 1}
    assert spec["NeuralNetwork.Training.Optimizer.learning_rate"]["log"] is True
    assert SearchSpace.from_dict(spec) == space


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"type": "int", "low": 5, "high": 1}, "'a.b': low (5) must be <= high (1)"),
        ({"type": "int", "low": 1.5, "high": 3}, "'a.b': 'low' must be an integer"),
        ({"type": "int", "low": 0, "high": 10, "step": 3}, "'a.b': high - low (10) must be a multiple of step (3)"),
        ({"type": "int", "low": 0, "high": 10, "log": True}, "'a.b': log scale needs low >= 1, got 0"),
        ({"type": "float", "low": 0.0, "high": 1.0, "log": True}, "'a.b': log scale needs low > 0"),
        ({"type": "float", "low": 1.0, "high": 1.0}, "'a.b': low (1.0) must be < high (1.0)"),
        ({"type": "float", "low": 1e-4}, "'a.b': missing 'high'"),
        ({"type": "categorical", "choices": []}, "'a.b': 'choices' must be a non-empty list"),
        ({"type": "categorical", "choices": ["GIN", "GIN"]}, "'a.b': duplicated choices"),
        ({"type": "categorial", "choices": ["GIN"]}, "(did you mean 'categorical'?)"),
        ({"type": "float", "low": 0.0, "high": 1.0, "lg": True}, "unknown field 'lg' for type 'float' (did you mean 'log'?)"),
        ([1, 2], "'a.b': spec must be a mapping"),
    ],
)
def test_invalid_entries_name_the_key(spec, message):
    with pytest.raises(SearchSpaceError) as info:
        SearchSpace.from_dict({"a.b": spec})
    assert message in str(info.value)


def test_invalid_key_path():
    with pytest.raises(SearchSpaceError, match=r"key 'a..b': not a dotted config path"):
        SearchSpace.from_dict({"a..b": {"type": "int", "low": 1, "high": 2}})


def test_validate_names_the_key():
    space = SearchSpace.from_dict(SPACE)
    good = {"NeuralNetwork.Architecture.mpnn_type": "PNA", "NeuralNetwork.Architecture.hidden_dim": 48,
            "NeuralNetwork.Architecture.num_conv_layers": 2, "NeuralNetwork.Training.Optimizer.learning_rate": 1e-3}
    space.validate(good)
    with pytest.raises(SearchSpaceError, match=r"'NeuralNetwork.Architecture.hidden_dim': 50 is not in 16..128 step 16"):
        space.validate({**good, "NeuralNetwork.Architecture.hidden_dim": 50})
    with pytest.raises(SearchSpaceError, match=r"'NeuralNetwork.Architecture.mpnn_type': 'EGNN' is not one of"):
        space.validate({**good, "NeuralNetwork.Architecture.mpnn_type": "EGNN"})
    with pytest.raises(SearchSpaceError, match=r"num_conv_layers': expected an integer, got 2.0"):
        space.validate({**good, "NeuralNetwork.Architecture.num_conv_layers": 2.0})
    with pytest.raises(SearchSpaceError, match=r"learning_rate': 0.5 is not in \[0.0001, 0.01\]"):
        space.validate({**good, "NeuralNetwork.Training.Optimizer.learning_rate": 0.5})
    with pytest.raises(SearchSpaceError, match=r"missing keys \['NeuralNetwork.Architecture.mpnn_type'\]"):
        space.validate({k: v for k, v in good.items() if k != "NeuralNetwork.Architecture.mpnn_type"})


def test_coerce_gives_python_types_and_exact_choices():
    space = SearchSpace.from_dict({"a.n": {"type": "int", "low": 1, "high": 4},
                                   "a.w": {"type": "categorical", "choices": [64, 128, True]}})
    out = space.coerce({"a.n": np.int64(3), "a.w": np.int64(128)})
    assert out == {"a.n": 3, "a.w": 128}
    assert type(out["a.n"]) is int and type(out["a.w"]) is int
    assert space.coerce({"a.n": 1, "a.w": True})["a.w"] is True
    with pytest.raises(SearchSpaceError):
        space.coerce({"a.n": 1, "a.w": 1})  # 1 is not True: booleans only match booleans


def test_sample_random_valid_seeded_and_covering():
    space = SearchSpace.from_dict(SPACE)
    draws = [space.sample_random(np.random.default_rng(7)) for _ in range(2)]
    assert draws[0] == draws[1]
    rng = np.random.default_rng(0)
    samples = [space.sample_random(rng) for _ in range(400)]
    for s in samples:
        space.validate(s)
        assert type(s["NeuralNetwork.Architecture.hidden_dim"]) is int
    assert {s["NeuralNetwork.Architecture.hidden_dim"] for s in samples} == set(range(16, 129, 16))
    assert {s["NeuralNetwork.Architecture.mpnn_type"] for s in samples} == {"GIN", "PNA", "SchNet"}
    lrs = np.log10([s["NeuralNetwork.Training.Optimizer.learning_rate"] for s in samples])
    # log-uniform: about half of the draws below the geometric mean 1e-3
    assert 0.4 < np.mean(lrs < -3) < 0.6


def test_apply_params_sets_values_in_a_copy():
    params = {"NeuralNetwork.Architecture.hidden_dim": 96, "NeuralNetwork.Training.Optimizer.learning_rate": 0.002,
              "NeuralNetwork.Architecture.output_heads.graph.dim_headlayers.1": 32,
              "NeuralNetwork.Training.Optimizer.weight_decay": 1e-5}
    config = apply_params(BASE_CONFIG, params)
    assert config["NeuralNetwork"]["Architecture"]["hidden_dim"] == 96
    assert config["NeuralNetwork"]["Training"]["Optimizer"] == {"learning_rate": 0.002, "weight_decay": 1e-5}
    assert config["NeuralNetwork"]["Architecture"]["output_heads"]["graph"]["dim_headlayers"] == [64, 32]
    assert BASE_CONFIG["NeuralNetwork"]["Architecture"]["hidden_dim"] == 64  # base untouched
    assert BASE_CONFIG["NeuralNetwork"]["Architecture"]["output_heads"]["graph"]["dim_headlayers"] == [64, 64]


@pytest.mark.parametrize(
    "key, message",
    [
        ("NeuralNetwork.Architecure.hidden_dim",
         "config key 'NeuralNetwork.Architecure.hidden_dim': 'Architecure' not found under NeuralNetwork (did you mean 'Architecture'?)"),
        ("NeuralNetwork.Architecture.hidden_dim.size",
         "config key 'NeuralNetwork.Architecture.hidden_dim.size': NeuralNetwork.Architecture.hidden_dim is a int value, not a section"),
        ("NeuralNetwork.Architecture.output_heads.graph.dim_headlayers.5",
         "NeuralNetwork.Architecture.output_heads.graph.dim_headlayers is a list of 2 items, '5' is not an index in it"),
    ],
)
def test_unknown_paths_are_named(key, message):
    with pytest.raises(ConfigPathError) as info:
        apply_params(BASE_CONFIG, {key: 1})
    assert message in str(info.value)
    with pytest.raises(ConfigPathError):
        check_config_paths(BASE_CONFIG, [key])
