"""The ADIOS2 dataset store: round trips, HydraGNN layout, random access, errors, crash safety,
lazy datasets in DataLoader workers and concurrent MPI readers."""

from __future__ import annotations

import json
import os
import pickle
import multiprocessing
from pathlib import Path

import adios2
import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from graph_builders.schema import HeadRegistry, HeadSpec
from graph_builders.store import (
    AdiosGraphDataset,
    DatasetNotFoundError,
    GraphStore,
    InconsistentGraphsError,
    SampleIndexError,
    StoreError,
    describe,
    is_project_dataset,
    shard_indices,
    update_normalisation,
    write_dataset,
)
from graph_builders.store import writer as writer_module

ATOMIC_HEADS = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/A")])


# ---------------------------------------------------------------- graphs of the three kinds
def atomic_graph(i: int, rng: torch.Generator, edges: int | None = None) -> Data:
    n = 3 + i % 5
    e = 4 * n if edges is None else edges
    z = torch.randint(1, 80, (n,), generator=rng)
    return Data(
        pos=torch.rand(n, 3, generator=rng) * 4, x=z.float().unsqueeze(1), z=z,
        edge_index=torch.randint(0, n, (2, e), generator=rng), edge_attr=torch.rand(e, 1, generator=rng),
        cell=torch.rand(1, 3, 3, generator=rng), pbc=torch.tensor([[True, i % 2 == 0, False]]),
        edge_shift=torch.randint(-1, 2, (e, 3), generator=rng).float(),
        y_energy=torch.randn(1, 1, generator=rng), y_forces=torch.randn(n, 3, generator=rng),
        num_components=torch.tensor([1 + i % 3]), name=f"Cu{i}Ni{n}",
    )


def grain_graphs(count: int) -> tuple[list[Data], HeadRegistry]:
    from graph_builders.mesoscale import grains_to_graph

    rng = np.random.default_rng(3)
    graphs = []
    for i in range(count):
        g = 6 + i % 4
        graphs.append(grains_to_graph(rng.random((g, 3)) * 3.0, 3.0, phases=rng.integers(0, 2, g),
                                      targets={"taylor": rng.random(g) + 2.0, "modulus": [120.0 + i]},
                                      name=f"grains-{i}"))
    return graphs, HeadRegistry.of([HeadSpec("taylor", "node", 1), HeadSpec("modulus", "graph", 1, "GPa")])


def mesh_graphs(count: int) -> tuple[list[Data], HeadRegistry]:
    import skfem

    from graph_builders.continuum import mesh_to_graph

    graphs = []
    for i in range(count):
        mesh = skfem.MeshTri().refined(1 + i % 2)
        temp = np.sin(mesh.p[0] * (i + 1))
        graphs.append(mesh_to_graph(mesh, features="t", targets={"temperature": "t", "peak": float(i)},
                                    point_data={"t": temp}, name=f"mesh-{i}"))
    return graphs, HeadRegistry.of([HeadSpec("temperature", "node", 1, "K"), HeadSpec("peak", "graph", 1, "K")])


def assert_same_graph(read: Data, original: Data) -> None:
    assert sorted(read.keys()) == sorted(original.keys())
    for key in original.keys():
        a, b = read[key], original[key]
        if isinstance(b, torch.Tensor):
            assert a.dtype == b.dtype, key
            assert a.shape == b.shape, key
            assert torch.equal(a, b), key
        else:
            assert type(a) is type(b) and a == b, key


@pytest.fixture(scope="module")
def atomic_file(tmp_path_factory) -> tuple[Path, list[Data]]:
    rng = torch.Generator().manual_seed(0)
    graphs = [atomic_graph(i, rng) for i in range(40)]
    path = tmp_path_factory.mktemp("atomic") / "atoms.bp"
    write_dataset(path, graphs, ATOMIC_HEADS, metadata={"source": "test", "cutoff": 5.0}, seed=7)
    return path, graphs


# ---------------------------------------------------------------- round trips and layout
@pytest.mark.parametrize("kind", ["atomic", "grains", "mesh"])
def test_round_trip_is_exact_for_every_key(kind, tmp_path):
    if kind == "atomic":
        rng = torch.Generator().manual_seed(1)
        graphs, heads = [atomic_graph(i, rng) for i in range(12)], ATOMIC_HEADS
    elif kind == "grains":
        graphs, heads = grain_graphs(6)
    else:
        graphs, heads = mesh_graphs(6)
    path = write_dataset(tmp_path / f"{kind}.bp", graphs, heads, seed=3, fractions=(0.5, 0.25, 0.25))
    with GraphStore(path) as store:
        assert store.heads == heads
        seen = []
        for split in store.split_names:
            source = store.source_indices(split)
            assert len(source) == store.num_graphs(split)
            for i, original_index in enumerate(source.tolist()):
                assert_same_graph(store.get(split, i), graphs[original_index])
                seen.append(original_index)
        assert sorted(seen) == list(range(len(graphs)))


def test_special_values_round_trip(tmp_path):
    """Graphs without edges, 0-d tensors, bool tensors, Python numbers and non-ASCII names."""
    rng = torch.Generator().manual_seed(2)
    graphs = []
    for i in range(4):
        g = atomic_graph(i, rng, edges=0 if i % 2 else 5)
        g.temperature = torch.tensor(300.0 + i)  # 0-d
        g.mask = torch.tensor([i % 2 == 0, True])
        g.charge = i - 1  # python int
        g.weight = 0.5 * i  # python float
        g.name = f"Å-{i}-µ"
        graphs.append(g)
    path = write_dataset(tmp_path / "special.bp", graphs, ATOMIC_HEADS, splits={"trainset": [3, 1, 0, 2]})
    with GraphStore(path) as store:
        assert store.split_names == ["trainset", "valset", "testset"]
        assert [store.num_graphs(s) for s in store.split_names] == [4, 0, 0]
        for i, original in enumerate([3, 1, 0, 2]):
            assert_same_graph(store.get("trainset", i), graphs[original])
        assert store.get("trainset", 0).edge_index.shape == (2, 0)
        assert store.sizes("trainset", "edge_index").tolist() == [0, 0, 5, 5]


def test_no_edges_at_all(tmp_path):
    graphs = [Data(pos=torch.rand(2, 3), x=torch.ones(2, 1), edge_index=torch.zeros(2, 0, dtype=torch.long),
                   name=f"iso{i}") for i in range(3)]
    path = write_dataset(tmp_path / "iso.bp", graphs, [], splits={"trainset": [0, 1, 2]})
    with GraphStore(path) as store:
        for i in range(3):
            assert_same_graph(store.get("trainset", i), graphs[i])


def test_hydragnn_layout_read_with_raw_adios2(atomic_file):
    path, graphs = atomic_file
    reader = adios2.FileReader(str(path))
    try:
        attrs = reader.available_attributes()
        variables = reader.available_variables()
        assert int(reader.read_attribute("total_ndata")) == 40
        assert [int(reader.read_attribute(f"{s}/ndata")) for s in ("trainset", "valset", "testset")] == [32, 4, 4]
        # our z and edge_shift are HydraGNN's atomic_numbers and edge_shifts again: derived on read
        keys = sorted({*graphs[0].keys(), "y", "y_loc", "edge_shifts", "atomic_numbers"} - {"z", "edge_shift"})
        fields = json.loads(reader.read_attribute("hydragnn_ensemble/trainset/fields"))
        assert fields["z"]["from"] == "atomic_numbers" and fields["edge_shift"]["from"] == "edge_shifts"
        source = reader.read("hydragnn_ensemble/trainset/source_index")
        for split in ("trainset", "valset", "testset"):
            assert reader.read_attribute_string(f"{split}/keys") == keys
            for key in keys:
                vdim = int(reader.read_attribute(f"{split}/{key}/variable_dim"))
                assert vdim == (1 if key == "edge_index" else 0), key
                count = reader.read(f"{split}/{key}/variable_count")
                offset = reader.read(f"{split}/{key}/variable_offset")
                shape = [int(n) for n in variables[f"{split}/{key}"]["Shape"].split(",")]
                assert count.dtype == np.int64 and len(count) == int(reader.read_attribute(f"{split}/ndata"))
                assert int(count.sum()) == shape[vdim], key
                assert offset.tolist() == np.concatenate([[0], np.cumsum(count)[:-1]]).tolist(), key
        assert variables["trainset/pbc"]["Type"] == "int64_t"  # HydraGNN's reader turns uint8 into text
        assert variables["trainset/edge_index"]["Type"] == "int64_t"
        # names: UTF-8 bytes concatenated, HydraGNN's convention for strings
        names = reader.read("trainset/name").tobytes().decode()
        assert names == "".join(graphs[i].name for i in source.tolist())
        # a middle sample's edges straight from the concatenated array
        i = 16
        off = int(reader.read("trainset/edge_index/variable_offset")[i])
        cnt = int(reader.read("trainset/edge_index/variable_count")[i])
        edges = reader.read("trainset/edge_index", [0, off], [2, cnt])
        assert np.array_equal(edges, graphs[int(source[i])].edge_index.numpy())
        assert json.loads(reader.read_attribute("heads"))[1]["name"] == "forces"
        assert json.loads(reader.read_attribute("metadata")) == {"cutoff": 5.0, "source": "test"}
        assert "normalisation" not in attrs
    finally:
        reader.close()


def test_hydragnn_training_fields_hold_the_targets_and_periodic_shifts(atomic_file):
    """What HydraGNN's loader and trainer read, sample by sample from the raw file: ``y`` is every
    head's targets in the registry's order with ``y_loc`` the offsets; ``edge_shifts`` makes
    HydraGNN's ``pos[row 1] - pos[row 0] + edge_shifts`` the negative of our edge vector (same
    length); ``atomic_numbers`` is ``z`` as [N, 1] int64. Our reader does not return these fields."""
    from graph_builders.schema import edge_vectors

    path, graphs = atomic_file
    reader = adios2.FileReader(str(path))
    try:
        variables = reader.available_variables()
        assert variables["trainset/y_loc"]["Type"] == "int64_t"
        assert variables["trainset/atomic_numbers"]["Type"] == "int64_t"
        assert variables["trainset/y"]["Type"] == "float"
        source = reader.read("hydragnn_ensemble/trainset/source_index")

        def sample(key: str, i: int) -> np.ndarray:
            vdim = int(reader.read_attribute(f"trainset/{key}/variable_dim"))
            off = int(reader.read(f"trainset/{key}/variable_offset")[i])
            cnt = int(reader.read(f"trainset/{key}/variable_count")[i])
            shape = [int(n) for n in variables[f"trainset/{key}"]["Shape"].split(",")]
            start = [0] * len(shape)
            start[vdim], shape[vdim] = off, cnt
            return reader.read(f"trainset/{key}", start, shape)

        for i in (0, 7, 31):
            graph = graphs[int(source[i])]
            n = graph.num_nodes
            y, y_loc = sample("y", i), sample("y_loc", i)
            assert y.shape == (1 + 3 * n, 1) and y_loc.tolist() == [[0, 1, 1 + 3 * n]]
            assert np.allclose(y[:1, 0], graph.y_energy.numpy().ravel())
            assert np.allclose(y[1:, 0], graph.y_forces.numpy().ravel())
            assert np.array_equal(sample("atomic_numbers", i)[:, 0], graph.z.numpy())
            ei, pos = torch.from_numpy(sample("edge_index", i)), torch.from_numpy(sample("pos", i))
            theirs = pos[ei[1]] - pos[ei[0]] + torch.from_numpy(sample("edge_shifts", i))
            assert torch.allclose(theirs, -edge_vectors(graph), atol=1e-5)
            assert torch.any(graph.edge_shift != 0)  # the check covers periodic images
    finally:
        reader.close()
    with GraphStore(path) as store:
        assert not {"y", "y_loc", "edge_shifts", "atomic_numbers"} & set(store.get("trainset", 0).keys())


def test_reads_a_file_written_by_hydragnns_conventions(tmp_path):
    """A file with only HydraGNN's keys (no heads, no field kinds) reads back as plain tensors."""
    path = tmp_path / "hydragnn.bp"
    xs = [np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((2, 2), np.float32) * 7]
    eis = [np.array([[0, 1], [1, 0]]), np.array([[0, 1, 1], [1, 0, 1]])]
    with adios2.Stream(str(path), "w") as out:
        out.write_attribute("trainset/ndata", np.array(2))
        out.write_attribute("trainset/keys", ["x", "edge_index"])
        for key, arrays, vdim in (("x", xs, 0), ("edge_index", eis, 1)):
            counts = np.array([a.shape[vdim] for a in arrays])
            out.write(f"trainset/{key}", np.ascontiguousarray(np.concatenate(arrays, axis=vdim)))
            out.write(f"trainset/{key}/variable_count", counts)
            out.write(f"trainset/{key}/variable_offset", np.concatenate([[0], np.cumsum(counts)[:-1]]))
            out.write_attribute(f"trainset/{key}/variable_dim", np.array(vdim))
    with GraphStore(path) as store:
        assert store.split_names == ["trainset"] and len(store.heads) == 0 and store.metadata == {}
        g = store.get("trainset", 1)
        assert g.x.tolist() == [[7.0, 7.0], [7.0, 7.0]] and g.edge_index.tolist() == [[0, 1, 1], [1, 0, 1]]
        assert g.edge_index.dtype == torch.int64


# ---------------------------------------------------------------- random access
class _RecordingEngine:
    """Wraps the ADIOS2 engine and records how many elements each get asks for."""

    def __init__(self, engine):
        self._engine = engine
        self.elements: list[int] = []

    def get(self, variable, out, mode):
        self.elements.append(int(out.size))
        return self._engine.get(variable, out, mode)

    def __getattr__(self, name):
        return getattr(self._engine, name)


def test_random_access_reads_only_the_sample(tmp_path):
    rng = torch.Generator().manual_seed(5)
    graphs = [atomic_graph(i, rng, edges=50 + i % 7) for i in range(1500)]
    path = write_dataset(tmp_path / "big.bp", graphs, ATOMIC_HEADS, splits={"trainset": range(1500)})
    with GraphStore(path) as store:
        store.get("trainset", 0)  # loads the split's counts/offsets
        recorder = _RecordingEngine(store._file._engine)
        store._file._engine = recorder
        for index in (749, 750, 1499, -1):
            recorder.elements.clear()
            read = store.get("trainset", index)
            original = graphs[index]
            assert_same_graph(read, original)
            expected = sum(
                len(v.encode()) if isinstance(v, str) else v.numel() for v in (original[k] for k in original.keys())
            )
            assert sum(recorder.elements) == expected


# ---------------------------------------------------------------- splits
def test_random_splits_sizes_and_seed(atomic_file, tmp_path):
    path, graphs = atomic_file
    with GraphStore(path) as store:
        assert [store.num_graphs(s) for s in store.split_names] == [32, 4, 4]
        parts = [set(store.source_indices(s).tolist()) for s in store.split_names]
        assert set().union(*parts) == set(range(40)) and sum(map(len, parts)) == 40
        assert store.metadata == {"source": "test", "cutoff": 5.0}
    again = write_dataset(tmp_path / "again.bp", graphs, ATOMIC_HEADS, seed=7)
    other = write_dataset(tmp_path / "other.bp", graphs, ATOMIC_HEADS, seed=8)
    with GraphStore(again) as a, GraphStore(other) as b, GraphStore(path) as c:
        assert a.source_indices("valset").tolist() == c.source_indices("valset").tolist()
        assert b.source_indices("valset").tolist() != c.source_indices("valset").tolist()


def test_given_splits_are_kept_in_order(tmp_path):
    rng = torch.Generator().manual_seed(6)
    graphs = [atomic_graph(i, rng) for i in range(6)]
    path = write_dataset(tmp_path / "s.bp", graphs, ATOMIC_HEADS, splits={"trainset": [5, 0, 2], "testset": [1]})
    with GraphStore(path) as store:
        assert [store.num_graphs(s) for s in store.split_names] == [3, 0, 1]
    reader = adios2.FileReader(str(path))
    assert int(reader.read_attribute("total_ndata")) == 4
    reader.close()
    with GraphStore(path) as store:
        assert store.source_indices("trainset").tolist() == [5, 0, 2]
        assert store.get("testset", 0).name == graphs[1].name


@pytest.mark.parametrize(
    "splits, message",
    [
        ({"train": [0]}, "unknown split names ['train']; splits are named ['trainset', 'valset', 'testset', 'calset']"),
        ({"trainset": [0, 9]}, "split 'trainset': index 9 is outside 0..5"),
        ({"trainset": [0, 1], "valset": [1]}, "graph 1 is in both 'trainset' and 'valset'"),
    ],
)
def test_bad_splits(tmp_path, splits, message):
    rng = torch.Generator().manual_seed(6)
    graphs = [atomic_graph(i, rng) for i in range(6)]
    with pytest.raises(StoreError) as info:
        write_dataset(tmp_path / "s.bp", graphs, ATOMIC_HEADS, splits=splits)
    assert str(info.value) == message


# ---------------------------------------------------------------- errors
def test_reader_errors(atomic_file, tmp_path):
    path, _ = atomic_file
    with pytest.raises(DatasetNotFoundError, match="no such dataset"):
        GraphStore(tmp_path / "missing.bp")
    (tmp_path / "plain").mkdir()
    with pytest.raises(StoreError, match=r"plain: not an ADIOS2 .bp dataset \(no md.idx inside\)"):
        GraphStore(tmp_path / "plain")
    (tmp_path / "garbage.bp").write_bytes(b"not adios")
    with pytest.raises(StoreError, match="not an ADIOS2 .bp dataset"):
        GraphStore(tmp_path / "garbage.bp")
    with GraphStore(path) as store:
        with pytest.raises(StoreError) as info:
            store.num_graphs("training")
        assert str(info.value) == f"{path}: unknown split 'training'; this file has ['trainset', 'valset', 'testset']"
        with pytest.raises(SampleIndexError) as info:
            store.get("valset", 4)
        assert str(info.value) == f"{path}: index 4 is out of range for 'valset' with 4 graphs"
        with pytest.raises(IndexError):
            store.get("valset", -5)
        with pytest.raises(StoreError, match="unknown split 'train'"):
            AdiosGraphDataset(path, "train")
    with pytest.raises(StoreError, match="the store is closed"):
        store.get("trainset", 0)


def test_inconsistent_keys_name_the_graph(tmp_path):
    rng = torch.Generator().manual_seed(7)
    graphs = [atomic_graph(i, rng) for i in range(5)]
    del graphs[3].num_components
    graphs[3].extra = torch.zeros(1)
    with pytest.raises(InconsistentGraphsError) as info:
        write_dataset(tmp_path / "bad.bp", graphs, ATOMIC_HEADS)
    assert str(info.value) == (
        f"graph 3 ('{graphs[3].name}') has different attributes from graph 0: "
        "missing ['num_components'], extra ['extra']"
    )
    graphs = [atomic_graph(i, rng) for i in range(5)]
    graphs[2].edge_attr = graphs[2].edge_attr.double()
    with pytest.raises(InconsistentGraphsError, match=r"graph 2 .*'edge_attr' is dtype torch.float64, not torch.float32"):
        write_dataset(tmp_path / "bad.bp", graphs, ATOMIC_HEADS)
    graphs = [atomic_graph(i, rng) for i in range(5)]
    graphs[4].y_forces[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"graph 4 .*: target 'y_forces' contains NaN or inf"):
        write_dataset(tmp_path / "bad.bp", graphs, ATOMIC_HEADS)
    assert not (tmp_path / "bad.bp").exists()
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- crash safety
def test_failure_mid_write_keeps_the_old_file(atomic_file, tmp_path, monkeypatch):
    _, graphs = atomic_file
    path = write_dataset(tmp_path / "d.bp", graphs[:10], ATOMIC_HEADS, splits={"trainset": range(10)})
    real = writer_module._write_concatenated
    calls = []

    def failing(stream, name, arrays, counts, axis):
        calls.append(name)
        if len(calls) == 5:
            raise OSError("disk full (simulated)")
        return real(stream, name, arrays, counts, axis)

    monkeypatch.setattr(writer_module, "_write_concatenated", failing)
    with pytest.raises(OSError, match="simulated"):
        write_dataset(path, graphs, ATOMIC_HEADS)
    assert len(calls) == 5
    assert sorted(os.listdir(tmp_path)) == ["d.bp"]  # no temporary left behind
    with GraphStore(path) as store:
        assert store.split_names == ["trainset", "valset", "testset"] and store.num_graphs("trainset") == 10
        for i in range(10):
            assert_same_graph(store.get("trainset", i), graphs[i])
    monkeypatch.setattr(writer_module, "_write_concatenated", real)
    write_dataset(path, graphs, ATOMIC_HEADS)  # a successful rewrite replaces it
    with GraphStore(path) as store:
        assert store.num_graphs("trainset") == 32
    assert sorted(os.listdir(tmp_path)) == ["d.bp"]


def test_refuses_to_overwrite_something_else(tmp_path, atomic_file):
    _, graphs = atomic_file
    target = tmp_path / "results"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(StoreError, match="refusing to overwrite .*results: it exists and is not a dataset"):
        write_dataset(target, graphs, ATOMIC_HEADS)
    assert (target / "notes.txt").read_text() == "keep me"


def test_never_replaces_an_adios2_file_it_did_not_write(tmp_path, atomic_file):
    """A foreign ADIOS2 file (e.g. HydraGNN's) is not ours to replace, even though it is a .bp."""
    _, graphs = atomic_file
    target = tmp_path / "theirs.bp"
    with adios2.Stream(str(target), "w") as out:
        out.write("trainset/x", np.arange(4.0))
    before = sorted(os.listdir(target))
    with pytest.raises(StoreError, match="it exists and is an ADIOS2 file not written by this project"):
        write_dataset(target, graphs, ATOMIC_HEADS)
    assert sorted(os.listdir(target)) == before
    assert not is_project_dataset(target)
    assert is_project_dataset(write_dataset(tmp_path / "ours.bp", graphs, ATOMIC_HEADS))


def test_no_profiling_files_anywhere(tmp_path, atomic_file, monkeypatch):
    """ADIOS2 leaves no profiling.json in a dataset, in the working directory or in /tmp (BP5's
    reader writes /tmp/<name>_<pid>_profiling.json on close: the store removes it)."""
    from graph_builders.store._engine import bp5_profile_path

    _, graphs = atomic_file
    monkeypatch.chdir(tmp_path)
    path = write_dataset(tmp_path / "clean.bp", graphs, ATOMIC_HEADS)
    update_normalisation(path, {"energy": {"mean": 1.0}})
    with GraphStore(path) as store:
        store.get("trainset", 0)
    bp5 = tmp_path / "foreign_bp5.bp"
    with adios2.Stream(str(bp5), "w") as out:  # ADIOS2's default engine: BP5
        out.write("v", np.arange(3.0))
    assert (bp5 / "mmd.0").is_file()
    stray = bp5_profile_path(bp5)
    assert not is_project_dataset(bp5)  # opened and closed by the store's reader
    assert not stray.exists()
    found = [p for p in tmp_path.rglob("*profiling*.json") if not p.is_relative_to(bp5)]
    assert found == []


def test_update_normalisation_and_describe(atomic_file, tmp_path):
    _, graphs = atomic_file
    path = write_dataset(tmp_path / "n.bp", graphs, ATOMIC_HEADS, normalisation={"energy": {"mean": 1.0}}, seed=7)
    with GraphStore(path) as store:
        assert store.normalisation == {"energy": {"mean": 1.0}}
        before = [store.get("valset", i) for i in range(4)]
    update_normalisation(path, {"energy": {"mean": -2.5, "std": 0.5}})
    with GraphStore(path) as store:
        assert store.normalisation == {"energy": {"mean": -2.5, "std": 0.5}}
        assert store.metadata == {} and store.heads == ATOMIC_HEADS
        for i in range(4):
            assert_same_graph(store.get("valset", i), before[i])
    update_normalisation(path, None)
    with GraphStore(path) as store:
        assert store.normalisation is None
        assert store.num_graphs("trainset") == 32
    with pytest.raises(StoreError, match="normalisation must be JSON-serialisable"):
        update_normalisation(path, {"bad": float("nan")})

    text = describe(path)
    nodes = np.array([g.num_nodes for g in graphs])
    energies = torch.cat([g.y_energy for g in graphs])
    assert f"{path}: 40 graphs" in text
    assert "  splits: trainset 32, valset 4, testset 4" in text
    assert f"  nodes/graph: mean {nodes.mean():.1f}, min {nodes.min()}, max {nodes.max()}" in text
    assert f"  edges/graph: mean {4 * nodes.mean():.1f}, min {4 * nodes.min()}, max {4 * nodes.max()}" in text
    assert (f"    energy           graph dim 1   unit eV       range [{energies.min():.4g}, {energies.max():.4g}]"
            in text)
    assert "    forces           node  dim 3   unit eV/A" in text
    assert text.endswith("  normalisation: none")


# ---------------------------------------------------------------- lazy dataset, workers, shards
@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_batches_the_lazy_dataset(atomic_file, workers):
    path, graphs = atomic_file
    with GraphStore(path) as store:
        source = store.source_indices("trainset")
    dataset = AdiosGraphDataset(path, "trainset")
    dataset[0]  # opens a handle in this process; workers must open their own
    loader = DataLoader(dataset, batch_size=8, shuffle=False, num_workers=workers)
    batches = list(loader)
    assert [b.num_graphs for b in batches] == [8, 8, 8, 8]
    expected = Batch.from_data_list([graphs[i] for i in source[8:16].tolist()])
    got = batches[1]
    for key in ("pos", "z", "edge_index", "edge_shift", "cell", "pbc", "y_energy", "y_forces", "batch"):
        assert torch.equal(got[key], expected[key]), key
    assert got.name == [graphs[i].name for i in source[8:16].tolist()]
    restored = pickle.loads(pickle.dumps(dataset))
    assert restored._store is None and len(restored) == 32
    assert_same_graph(restored[-1], graphs[int(source[-1])])
    dataset.close()


def test_shard_indices_cover_everything_once():
    shards = [shard_indices(10, r, 3) for r in range(3)]
    assert [list(s) for s in shards] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [len(shard_indices(2, r, 4)) for r in range(4)] == [1, 1, 0, 0]
    with pytest.raises(StoreError, match=r"rank 3 is not in 0..2"):
        shard_indices(10, 3, 3)


def test_dataset_subset_and_bad_indices(atomic_file):
    path, graphs = atomic_file
    with GraphStore(path) as store:
        source = store.source_indices("testset")
    subset = AdiosGraphDataset(path, "testset", [3, 1])
    assert len(subset) == 2
    assert_same_graph(subset[0], graphs[int(source[3])])
    assert_same_graph(subset.shard(1, 2)[0], graphs[int(source[1])])
    with pytest.raises(SampleIndexError, match="index 4 is out of range for 'testset' with 4 graphs"):
        AdiosGraphDataset(path, "testset", [0, 4])
    with pytest.raises(SampleIndexError, match="position 2 is out of range for a dataset of 2 graphs"):
        subset[2]
    subset.close()


def _read_shard(path: str, rank: int, world_size: int, barrier, out_dir: str) -> None:
    """One reader process: open the file, wait for the others, read its shard, save what it read."""
    torch.set_num_threads(1)
    shard = AdiosGraphDataset(path, "trainset").shard(rank, world_size)
    barrier.wait(timeout=60)  # all processes read the same file at the same time
    graphs = [shard[i].to_dict() for i in range(len(shard))]
    torch.save({"indices": torch.from_numpy(shard.indices), "graphs": graphs}, f"{out_dir}/rank{rank}.pt")


def test_concurrent_shard_readers(atomic_file, tmp_path):
    """Three processes (forked: no re-import of torch, so the test stays fast) read their shards of one
    file concurrently, as MPI ranks do with the serial adios2 build; the union equals one reader's view."""
    path, _ = atomic_file
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_read_shard, args=(str(path), r, 3, barrier, str(tmp_path))) for r in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0]
    parts = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(3)]
    assert [p["indices"].tolist() for p in parts] == [list(range(0, 11)), list(range(11, 22)), list(range(22, 32))]
    with GraphStore(path) as store:
        for part in parts:
            for index, graph in zip(part["indices"].tolist(), part["graphs"]):
                assert_same_graph(Data(**graph), store.get("trainset", index))
