"""The export's HydraGNN layout: the configs' Variables_of_interest and the dataset copy they
describe agree column for column (HydraGNN's update_predicted_values reads graph heads from y and
node heads from columns of x); our own loader builds the same model from the exported config."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ensemble.export import (DATASET_NAME, DatasetLayout, _edge_attr_is_length, export_top_k, for_hydragnn,
                             hydragnn_mismatch)
from ensemble.hydragnn_layout import INPUT_FEATURES_NAME, exported_heads, write_hydragnn_dataset
from graph_builders.store import GraphStore


def _columns(voi: dict, kind: str, index: int) -> slice:
    """Where HydraGNN's update_predicted_values reads head ``index`` of ``kind`` (its arithmetic)."""
    dims = voi[f"{kind}_feature_dims"]
    start = sum(dims[:index])
    return slice(start, start + dims[index])


def _stored(path, split: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    """HydraGNN's field ``key`` of ``split`` as stored (our reader skips y/y_loc) and its counts."""
    from graph_builders.store.reader import open_adios_file

    handle = open_adios_file(path)
    try:
        return handle.read(f"{split}/{key}"), handle.read(f"{split}/{key}/variable_count")
    finally:
        handle.close()


def test_configs_and_dataset_agree_for_graph_and_node_heads(direct_campaign, tmp_path):
    result = export_top_k(direct_campaign.root, 3, "hydragnn", tmp_path / "out", with_dataset=True)
    configs = [json.loads(p.read_text()) for p in result.files if p.suffix == ".json"]
    assert configs and (tmp_path / "out" / DATASET_NAME) in result.files
    voi = configs[0]["NeuralNetwork"]["Variables_of_interest"]
    assert voi["output_names"] == ["formation_energy", "stress", "forces"]
    assert voi["graph_feature_names"] == ["formation_energy", "stress"] and voi["graph_feature_dims"] == [1, 6]
    assert voi["node_feature_names"] == [INPUT_FEATURES_NAME, "forces"] and voi["node_feature_dims"] == [1, 3]
    assert voi["output_index"] == [0, 1, 1] and voi["type"] == ["graph", "graph", "node"]
    with GraphStore(direct_campaign.dataset) as source, GraphStore(tmp_path / "out" / DATASET_NAME) as copy:
        assert copy.split_names == source.split_names
        for split in copy.split_names:
            assert copy.num_graphs(split) == source.num_graphs(split)
        y, y_counts = _stored(tmp_path / "out" / DATASET_NAME, "valset", "y")
        for i in range(copy.num_graphs("valset")):
            ours, theirs = source.get("valset", i), copy.get("valset", i)
            sample_y = y[int(y_counts[:i].sum()): int(y_counts[: i + 1].sum())].reshape(-1)
            for name, index in (("formation_energy", 0), ("stress", 1)):
                np.testing.assert_allclose(sample_y[_columns(voi, "graph", index)],
                                           ours[f"y_{name}"].reshape(-1).numpy(), rtol=1e-6)
            np.testing.assert_allclose(theirs.x[:, _columns(voi, "node", 1)], ours.y_forces, rtol=1e-6)
            assert torch.equal(theirs.x[:, voi["input_node_features"]], ours.x)
            assert torch.equal(theirs.edge_index, ours.edge_index)


def test_a_subset_of_heads_keeps_only_those(direct_campaign, tmp_path):
    layout = DatasetLayout.read(direct_campaign.dataset)
    config = json.loads(next(iter(direct_campaign.root.glob("trials/*/config.json"))).read_text())
    voi = config["NeuralNetwork"]["Variables_of_interest"]
    voi.update(output_names=["forces", "formation_energy"], type=["node", "graph"], output_dim=[3, 1],
               output_index=[2, 0])
    config["NeuralNetwork"]["Architecture"]["task_weights"] = [2.0, 1.0]
    out = for_hydragnn(config, layout)
    voi = out["NeuralNetwork"]["Variables_of_interest"]
    # graph heads first (HydraGNN reads graph features from the start of y), the weights follow
    assert voi["output_names"] == ["formation_energy", "forces"] and voi["output_index"] == [0, 1]
    assert out["NeuralNetwork"]["Architecture"]["task_weights"] == [1.0, 2.0]
    assert voi["graph_feature_names"] == ["formation_energy"]


def test_a_shaped_schnet_exports_only_where_the_edge_attr_is_the_length(direct_campaign):
    """A HydraGNN-shaped SchNet without edge features reads the length in its filter: HydraGNN's does
    with the edge_features [length] the export writes, on a dataset whose edge_attr is the length."""
    from dataclasses import replace

    layout = DatasetLayout.read(direct_campaign.dataset)
    config = json.loads(next(iter(direct_campaign.root.glob("trials/*/config.json"))).read_text())
    arch = config["NeuralNetwork"]["Architecture"]
    arch.update(mpnn_type="SchNet", hydragnn_shaped=True)
    arch.pop("edge_features", None)
    assert layout.edge_is_length and hydragnn_mismatch(config, layout) is None
    assert for_hydragnn(config, layout)["NeuralNetwork"]["Architecture"]["edge_features"] == ["length"]
    why = hydragnn_mismatch(config, replace(layout, edge_is_length=False))
    assert why is not None and why.startswith("HydraGNN-shaped SchNet: its filter reads the edge length")
    arch["hydragnn_shaped"] = False  # ours then ignores the length column: nothing to refuse
    assert hydragnn_mismatch(config, replace(layout, edge_is_length=False)) is None


def test_potential_mode_is_one_energy_head_with_total_energy_and_forces(potential_campaign, tmp_path):
    # the campaign's members are SchNets, which HydraGNN cannot train as potentials on our edges
    result = export_top_k(potential_campaign.root, 3, "hydragnn", tmp_path / "out", with_dataset=True)
    assert len(result.not_expressible) == 3 and "non-periodic radius graph" in result.not_expressible[0][1]
    layout = DatasetLayout.read(potential_campaign.dataset)
    egnn = json.loads(next(iter(potential_campaign.root.glob("trials/*/config.json"))).read_text())
    egnn["NeuralNetwork"]["Architecture"]["mpnn_type"] = "EGNN"
    assert hydragnn_mismatch(egnn) is None
    config = for_hydragnn(egnn, layout)
    arch, voi = config["NeuralNetwork"]["Architecture"], config["NeuralNetwork"]["Variables_of_interest"]
    assert voi["output_names"] == ["formation_energy"] and voi["type"] == ["graph"]
    assert arch["enable_interatomic_potential"] and arch["graph_pooling"] == "add"
    assert arch["energy_peratom_weight"] > 0 and arch["force_weight"] > 0 and arch["energy_weight"] == 0
    assert config["NeuralNetwork"]["Training"]["compute_grad_energy"] and "edge_features" not in arch
    heads = exported_heads(egnn, layout.heads, layout.input_width)
    write_hydragnn_dataset(layout.path, heads, tmp_path / "copy.bp")
    with GraphStore(potential_campaign.dataset) as source, GraphStore(tmp_path / "copy.bp") as copy:
        ours, theirs = source.get("trainset", 0), copy.get("trainset", 0)
        assert float(theirs.energy) == pytest.approx(float(ours.y_formation_energy) * ours.num_nodes, rel=1e-6)
        assert torch.allclose(theirs.forces, ours.y_forces.float())


def test_exported_configs_build_the_trained_model_here(direct_campaign, tmp_path):
    from hydragnn_ensemble.config import config_from_dict
    from hydragnn_ensemble.model import build_model
    from hydragnn_ensemble.train.data import open_source
    from hydragnn_ensemble.train.trainer import prepare_trial

    result = export_top_k(direct_campaign.root, 5, "hydragnn", tmp_path / "out", with_dataset=True)
    exported = {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in result.files if p.suffix == ".json"}
    assert any(c["NeuralNetwork"]["Architecture"]["mpnn_type"] == "SchNet" for c in exported.values())

    def parameters(config: dict, data) -> int:
        source = open_source(data)
        try:
            spec = prepare_trial(config_from_dict(config), source, str(data)).spec
        finally:
            source.close()
        return sum(p.numel() for p in build_model(spec).parameters())

    for trial_id, config in exported.items():
        trained = json.loads((direct_campaign.root / "trials" / str(trial_id) / "config.json").read_text())
        assert parameters(config, tmp_path / "out" / DATASET_NAME) == parameters(trained, direct_campaign.dataset)


def test_edge_features_only_where_edge_attr_is_the_length(alloy_store):
    from ensemble_testkit import small_base_config

    with GraphStore(alloy_store) as store:
        sample = store.get("trainset", 0)
    assert _edge_attr_is_length(sample)
    sample.edge_attr = sample.edge_attr * 2.0
    assert not _edge_attr_is_length(sample)
    layout = DatasetLayout.read(alloy_store)
    schnet = small_base_config()
    schnet["NeuralNetwork"]["Architecture"]["mpnn_type"] = "SchNet"
    assert for_hydragnn(schnet, layout)["NeuralNetwork"]["Architecture"]["edge_features"] == ["length"]
    other = DatasetLayout(layout.path, layout.heads, layout.input_width, edge_is_length=False)
    assert "edge_features" not in for_hydragnn(schnet, other)["NeuralNetwork"]["Architecture"]


def test_exported_heads_follow_the_config(alloy_store):
    layout = DatasetLayout.read(alloy_store)
    from ensemble_testkit import small_base_config

    heads = exported_heads(small_base_config(), layout.heads, layout.input_width)
    assert [h.name for h in heads.graph] == ["formation_energy", "stress"]
    assert [h.name for h in heads.node] == ["forces"] and heads.energy is None
