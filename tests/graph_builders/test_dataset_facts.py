"""Dataset facts that do not describe the data are named, never used: a file without stored facts
gets them by one scan, cached beside it and keyed by its content; a replaced file is scanned again;
cached facts of other data, a missing shard and a shard of another schema are errors naming the file
and the shard, before a trial trains."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from test_store import ATOMIC_HEADS, atomic_graph

from graph_builders.schema import HeadRegistry, HeadSpec
from graph_builders.store import GraphStore, StoreError, open_dataset, write_dataset
from graph_builders.store import facts_cache
from graph_builders.store.facts_cache import dataset_facts, sidecar_path
from graph_builders.store.sharded import INDEX_NAME, ShardWriter, write_index


def _graphs(count: int, seed: int) -> list:
    rng = torch.Generator().manual_seed(seed)
    return [atomic_graph(i, rng) for i in range(count)]


@pytest.fixture
def without_stored_facts(monkeypatch):
    """Files read as if written before the writer stored facts (an older file)."""
    monkeypatch.setattr(GraphStore, "facts", property(lambda self: None))


def _energy_mean(facts) -> float:
    return float(facts.splits["trainset"].heads["energy"].mean[0])


def test_facts_of_an_older_file_are_scanned_once_and_a_replaced_file_is_scanned_again(
        tmp_path, without_stored_facts, monkeypatch):
    path = tmp_path / "data.bp"
    first = _graphs(30, seed=0)
    write_dataset(path, first, ATOMIC_HEADS, seed=1)
    with GraphStore(path) as store:
        scanned = dataset_facts(store)
        train = [store.get("trainset", i) for i in range(store.num_graphs("trainset"))]
    # the scan against an independent reference: the training energies' mean read graph by graph
    assert _energy_mean(scanned) == pytest.approx(float(torch.cat([g.y_energy for g in train]).mean()), rel=1e-6)
    assert sidecar_path(path).is_file()

    def no_scan(store, progress=False):
        raise AssertionError("scanned again")

    with monkeypatch.context() as m:  # the second open uses the cache
        m.setattr(facts_cache, "scan_facts", no_scan)
        with GraphStore(path) as store:
            assert dataset_facts(store).splits["trainset"].ndata == scanned.splits["trainset"].ndata

    shutil.rmtree(path)  # replaced by other data under the same name: the cache does not match
    second = [g for g in _graphs(50, seed=5)]
    for g in second:
        g.y_energy = g.y_energy + 100.0
    write_dataset(path, second, ATOMIC_HEADS, seed=1)
    with GraphStore(path) as store:
        again = dataset_facts(store)
        assert again.splits["trainset"].ndata == store.num_graphs("trainset")
    assert _energy_mean(again) > _energy_mean(scanned) + 50.0


def test_cached_facts_of_other_data_are_named_before_use(tmp_path, without_stored_facts):
    small, large = tmp_path / "small.bp", tmp_path / "large.bp"
    write_dataset(small, _graphs(20, seed=0), ATOMIC_HEADS, seed=1)
    write_dataset(large, _graphs(40, seed=1), ATOMIC_HEADS, seed=1)
    with GraphStore(small) as store:
        dataset_facts(store)
    with GraphStore(large) as store:
        dataset_facts(store)
    # the small file's facts under the large file's key (a copied cache): caught against the file
    record = json.loads(sidecar_path(small).read_text())
    record["fingerprint"] = json.loads(sidecar_path(large).read_text())["fingerprint"]
    sidecar_path(large).write_text(json.dumps(record))
    with GraphStore(large) as store, pytest.raises(StoreError) as err:
        dataset_facts(store)
    assert str(large) in str(err.value) and "graphs in 'trainset'" in str(err.value)


def _sharded(path: Path, graphs: list, heads: HeadRegistry, shard_size: int) -> None:
    writer = ShardWriter(path, heads, shard_size=shard_size)
    for i, g in enumerate(graphs):
        writer.add(g, ("trainset", "valset", "testset")[min(2, i % 5 // 2)])
    write_index(path, heads, writer.layout, {}, writer.finish())


def test_a_missing_shard_and_a_shard_of_another_schema_are_named(tmp_path):
    data, other = tmp_path / "data", tmp_path / "other"
    _sharded(data, _graphs(30, seed=0), ATOMIC_HEADS, shard_size=10)
    energy_only = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV")])
    graphs = _graphs(10, seed=1)
    for g in graphs:
        del g.y_forces
    _sharded(other, graphs, energy_only, shard_size=10)
    index = json.loads((data / INDEX_NAME).read_text())
    with open_dataset(data) as store:
        assert sum(store.num_graphs(s) for s in store.split_names) == 30

    # a shard of another dataset, listed with its own key (an index edited by hand)
    foreign = json.loads((other / INDEX_NAME).read_text())["shards"][0]
    shutil.copytree(other / foreign["path"], data / "foreign.bp")
    edited = dict(index, shards=index["shards"] + [dict(foreign, path="foreign.bp")])
    (data / INDEX_NAME).write_text(json.dumps(edited))
    with pytest.raises(StoreError, match="shard foreign.bp has another schema than the dataset"):
        with open_dataset(data) as store:
            dataset_facts(store)

    (data / INDEX_NAME).write_text(json.dumps(index))
    missing = index["shards"][1]["path"]
    shutil.rmtree(data / missing)
    with pytest.raises(StoreError, match=f"shard {missing} is missing"):
        open_dataset(data)
