"""``build-graphs --shard-size``: streamed into a sharded dataset, the same graphs and splits whatever
the shard size and the number of MPI ranks, heads decided from the first graphs, a structure that
does not fit them listed, appends, layouts, and a failed build that leaves OUTPUT alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import ase.io
import numpy as np
import pytest
import torch
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator

from graph_builders.readers import iter_structures, read_structures
from graph_builders.store import GraphStore, StoreError, open_dataset
from graph_builders.stream_build import hashed_split
from hydragnn_ensemble.cli import main

REPO = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
SIZES = {"a.extxyz": 180, "b.extxyz": 120, "one.extxyz": 1}
NO_FORCES = ("a.extxyz", 120)  # after the first 50 graphs the heads are decided from: does not fit them


def _cells(count: int, seed: int, label: bool = True) -> list:
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(count):
        atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 1, 1))
        atoms.numbers = rng.choice([28, 29], size=len(atoms))
        atoms.positions += rng.normal(scale=0.05, size=atoms.positions.shape)
        if label:
            atoms.calc = EMT()
            energy, forces = atoms.get_potential_energy(), atoms.get_forces()
            atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
        frames.append(atoms)
    return frames


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("scale_inputs")
    for k, (name, count) in enumerate(SIZES.items()):
        frames = _cells(count, k)
        if name == NO_FORCES[0]:
            atoms = frames[NO_FORCES[1]]
            atoms.calc = SinglePointCalculator(atoms, energy=atoms.calc.results["energy"])
        ase.io.write(folder / name, frames)
    (folder / "garbage.xyz").write_bytes(np.random.default_rng(9).bytes(300))
    return folder


def build(inputs: Path, out: Path, *extra: str) -> int:
    return main(["build-graphs", "--scale", "atomic", "--cutoff", "4.0", "--no-progress", "--heads-from", "50",
                 str(inputs), "-o", str(out), *extra])


def mpi_build(inputs: Path, out: Path, ranks: int, *extra: str) -> subprocess.CompletedProcess:
    argv = [str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "hydragnn_ensemble", "build-graphs", "--scale",
            "atomic", "--cutoff", "4.0", "--no-progress", "--heads-from", "50", str(inputs), "-o", str(out), *extra]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=240)


def contents(path: Path) -> dict[str, tuple]:
    """name -> (split, positions, energy, forces) of every graph of the dataset at ``path``."""
    out = {}
    with open_dataset(path) as store:
        for split in store.split_names:
            for g in store.read_range(split, 0, store.num_graphs(split)):
                assert g.name not in out
                out[g.name] = (split, g.pos.numpy(), float(g.y_energy), g.y_forces.numpy())
    return out


def errors_of(out: Path) -> dict[str, str]:
    lines = out.with_name(out.name + ".errors.tsv").read_text().splitlines()
    assert lines[0] == "file\treason"
    return dict(line.split("\t") for line in lines[1:])


def expected(inputs: Path) -> dict[str, tuple]:
    """What ASE reads from the inputs (the independent reference): name -> (positions, energy, forces)."""
    out = {}
    for name in SIZES:
        for i, atoms in enumerate(ase.io.read(inputs / name, index=":")):
            if (name, i) != NO_FORCES:
                out[f"{inputs / name}:{i}"] = (atoms.positions, atoms.get_potential_energy(), atoms.get_forces())
    return out


# ---------------------------------------------------------------- one process, two shard sizes, two ranks
@pytest.mark.mpi
def test_same_graphs_and_splits_whatever_the_shard_size_and_the_ranks(inputs, tmp_path, capsys):
    small, large, ranks = tmp_path / "s64", tmp_path / "s100", tmp_path / "mpi2"
    assert build(inputs, small, "--shard-size", "64") == 1
    assert "built 300 graphs from 3 of 4 files" in capsys.readouterr().out
    assert build(inputs, large, "--shard-size", "100") == 1
    proc = mpi_build(inputs, ranks, 2, "--shard-size", "64")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stdout.count("built 300 graphs from 3 of 4 files") == 1  # printed once, by rank 0

    reference = expected(inputs)
    got = {path: contents(path) for path in (small, large, ranks)}
    for path, graphs in got.items():
        assert sorted(graphs) == sorted(reference), path
        for name, (split, pos, energy, forces) in graphs.items():
            pos0, energy0, forces0 = reference[name]
            np.testing.assert_allclose(pos, pos0, atol=1e-5)
            assert energy == pytest.approx(energy0, rel=1e-6)
            np.testing.assert_allclose(forces, forces0, atol=1e-5)
            assert split == got[small][name][0], (path, name)  # the split is the structure's
    splits = [v[0] for v in got[small].values()]
    assert 0.7 < splits.count("trainset") / 300 < 0.9 and splits.count("valset") and splits.count("testset")

    index = {p: json.loads((p / "shards.json").read_text()) for p in (small, large, ranks)}
    assert [s["path"] for s in index[small]["shards"]] == [f"part-r00000-{k:05d}.bp" for k in range(5)]
    assert [sum(s["ndata"].values()) for s in index[large]["shards"]] == [100, 100, 100]
    paths = [s["path"] for s in index[ranks]["shards"]]
    assert paths == sorted(paths) and {p[:11] for p in paths} == {"part-r00000", "part-r00001"}
    with open_dataset(small) as store:
        assert [(h.name, h.level, h.dim, h.unit) for h in store.heads] == [("energy", "graph", 1, "eV"),
                                                                          ("forces", "node", 3, "eV/Å")]
    for path in (small, large, ranks):
        errors = errors_of(path)
        assert set(errors) == {f"{inputs / 'a.extxyz'}[120]", str(inputs / "garbage.xyz")}
        assert "no target 'forces'" in errors[f"{inputs / 'a.extxyz'}[120]"]
        assert "first 50 graphs" in errors[f"{inputs / 'a.extxyz'}[120]"]
    assert not list(tmp_path.glob("*.tmp-*"))


def test_hashed_split_draws_the_fractions_independently_of_everything_else():
    names = [hashed_split(3, "data/x.extxyz", i, (0.7, 0.1, 0.1, 0.1)) for i in range(20_000)]
    for split, fraction in (("trainset", 0.7), ("valset", 0.1), ("testset", 0.1), ("calset", 0.1)):
        share = names.count(split) / len(names)
        assert abs(share - fraction) < 4 * (fraction * (1 - fraction) / len(names)) ** 0.5
    assert names == [hashed_split(3, "data/x.extxyz", i, (0.7, 0.1, 0.1, 0.1)) for i in range(20_000)]
    assert names != [hashed_split(4, "data/x.extxyz", i, (0.7, 0.1, 0.1, 0.1)) for i in range(20_000)]
    assert {hashed_split(0, "f", i, (1.0, 0.0, 0.0)) for i in range(100)} == {"trainset"}


def test_iter_structures_reads_a_stride_of_the_file(inputs):
    every = read_structures(inputs / "b.extxyz")
    for start, step in ((0, 1), (1, 2), (2, 3)):
        part = list(iter_structures(inputs / "b.extxyz", start, step))
        assert len(part) == len(every[start::step])
        for a, b in zip(part, every[start::step]):
            np.testing.assert_array_equal(a.positions, b.positions)
    assert len(list(iter_structures(inputs / "one.extxyz", 1, 2))) == 0


# ---------------------------------------------------------------- append, changed shard, failed build
def test_append_adds_shards_that_open_dataset_sees(inputs, tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    shutil.copy(inputs / "b.extxyz", first)
    shutil.copy(inputs / "one.extxyz", second)
    out = tmp_path / "data"
    assert build(first, out, "--shard-size", "50") == 0
    before = json.loads((out / "shards.json").read_text())["shards"]
    assert build(second, out, "--shard-size", "50", "--append") == 0
    assert "appended 1 graphs" in capsys.readouterr().out
    index = json.loads((out / "shards.json").read_text())
    assert index["shards"][:3] == before and index["shards"][3]["path"] == "part-a001-r00000-00000.bp"
    assert index["metadata"]["appends"] == 1 and index["metadata"]["input_files"] == 2
    names = set(contents(out))
    assert names == {f"{first / 'b.extxyz'}:{i}" for i in range(120)} | {f"{second / 'one.extxyz'}:0"}

    # another cutoff, or no forces: refused, naming the dataset and what differs; the dataset unchanged
    assert main(["build-graphs", "--scale", "atomic", "--cutoff", "3.0", "--no-progress", str(second), "-o",
                 str(out), "--shard-size", "50", "--append"]) == 2
    assert f"{out} was built with cutoff 4.0, these graphs with 3.0" in capsys.readouterr().err
    energy_only = tmp_path / "energy_only.extxyz"
    atoms = _cells(1, 5)[0]
    atoms.calc = SinglePointCalculator(atoms, energy=atoms.calc.results["energy"])
    ase.io.write(energy_only, atoms)
    assert build(energy_only, out, "--shard-size", "50", "--append") == 2
    assert f"{out} has the head 'forces'; the new structures do not" in capsys.readouterr().err
    assert json.loads((out / "shards.json").read_text()) == index
    assert sorted(p.name for p in out.glob("part-a*")) == ["part-a001-r00000-00000.bp"]  # nothing left behind


def test_a_changed_shard_is_named(inputs, tmp_path, capsys):
    source = tmp_path / "in"
    source.mkdir()
    shutil.copy(inputs / "b.extxyz", source)
    out, other = tmp_path / "data", tmp_path / "other"
    assert build(source, out, "--shard-size", "50") == 0
    assert build(source, other, "--shard-size", "40") == 0
    shutil.rmtree(out / "part-r00000-00001.bp")
    shutil.copytree(other / "part-r00000-00001.bp", out / "part-r00000-00001.bp")  # a foreign shard
    capsys.readouterr()
    assert build(source, out, "--shard-size", "50", "--append") == 2
    assert "shard part-r00000-00001.bp is not the one indexed" in capsys.readouterr().err
    with pytest.raises(StoreError, match="shard part-r00000-00001.bp is not the one indexed"):
        open_dataset(out)


def test_a_failed_build_leaves_the_output_alone(inputs, tmp_path, capsys):
    source = tmp_path / "in"
    source.mkdir()
    shutil.copy(inputs / "one.extxyz", source)
    out = tmp_path / "data"
    assert build(source, out, "--shard-size", "50") == 0
    index = (out / "shards.json").read_text()
    assert build(inputs / "garbage.xyz", out, "--shard-size", "50") == 2
    assert "no graph could be built from 1 files" in capsys.readouterr().err
    assert (out / "shards.json").read_text() == index and len(contents(out)) == 1
    assert not list(tmp_path.glob("*.tmp-*"))


# ---------------------------------------------------------------- layouts
def test_layout_option_and_the_compact_layout_is_smaller(inputs, tmp_path, capsys):
    source = tmp_path / "in"
    source.mkdir()
    shutil.copy(inputs / "b.extxyz", source)
    on_disk, stored = {}, {}
    for layout in ("hydragnn", "compact"):
        out = tmp_path / layout
        assert build(source, out, "--shard-size", "60", "--layout", layout) == 0
        with open_dataset(out) as store:
            assert store.layout == layout
            graphs = sum(store.num_graphs(s) for s in store.split_names)
            edges = sum(f.edges for f in store.facts.splits.values())
            stored[layout] = sum(f.nbytes for f in store.facts.splits.values())
        on_disk[layout] = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / graphs
    assert on_disk["compact"] < on_disk["hydragnn"]
    # per edge: int32 instead of int64 indices, no stored float32 length: 12 bytes fewer
    assert stored["hydragnn"] - stored["compact"] == 12 * edges
    a, b = contents(tmp_path / "hydragnn"), contents(tmp_path / "compact")
    assert a.keys() == b.keys() and all(np.array_equal(a[k][1], b[k][1]) for k in a)

    single = tmp_path / "single.bp"  # the in-memory build takes --layout too
    assert build(source, single, "--layout", "compact") == 0
    with GraphStore(single) as store:
        assert store.layout == "compact"
        g = store.get("trainset", 0)
        ref = g.edge_attr.clone()
        vec = g.pos[g.edge_index[0]] + g.edge_shift @ g.cell[0] - g.pos[g.edge_index[1]]
        assert torch.allclose(ref[:, 0], vec.norm(dim=1), rtol=1e-5)
    capsys.readouterr()
    assert build(source, tmp_path / "x", "--shard-size", "60", "--layout", "tiny") == 2
    assert "unknown layout 'tiny'; layouts: hydragnn, compact" in capsys.readouterr().err


# ---------------------------------------------------------------- other scales, options that do not go together
def test_streaming_at_the_mesoscale_one_graph_per_file(tmp_path, capsys):
    rng = np.random.default_rng(1)
    inputs = tmp_path / "grains"
    inputs.mkdir()
    for i in range(3):
        np.savez(inputs / f"good{i}.npz", seeds=rng.random((8 + i, 3)) * 2.0, box=np.array([2.0, 2.0, 2.0]),
                 y_modulus=np.array(120.0 + i))
    np.savez(inputs / "typo.npz", seed=rng.random((8, 3)), box=np.array(2.0))
    code = main(["build-graphs", "--scale", "mesoscale", "--no-progress", "--shard-size", "2", str(inputs),
                 "-o", str(tmp_path / "grains_ds")])
    assert code == 1
    errors = errors_of(tmp_path / "grains_ds")
    assert list(errors) == [str(inputs / "typo.npz")] and "unknown arrays ['seed']" in errors[str(inputs / "typo.npz")]
    with open_dataset(tmp_path / "grains_ds") as store:
        graphs = {g.name: g for s in store.split_names for g in store.read_range(s, 0, store.num_graphs(s))}
        assert store.heads.names == ["modulus"] and len(store.index.shards) == 2
    assert sorted(graphs) == [str(inputs / f"good{i}.npz") for i in range(3)]
    assert [graphs[str(inputs / f"good{i}.npz")].num_nodes for i in range(3)] == [8, 9, 10]


@pytest.mark.parametrize("extra, message", [
    (["--shard-size", "10", "--workers", "2"], "--workers applies to the in-memory build"),
    (["--append"], "--append adds shards to a sharded dataset: give --shard-size N too"),
    (["--shard-size", "0"], "--shard-size must be >= 1"),
])
def test_options_that_do_not_go_together(inputs, tmp_path, capsys, extra, message):
    assert build(inputs / "one.extxyz", tmp_path / "out", *extra) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_append_needs_a_sharded_dataset(inputs, tmp_path, capsys):
    single = tmp_path / "single.bp"
    assert build(inputs / "one.extxyz", single) == 0
    assert build(inputs / "one.extxyz", single, "--shard-size", "5", "--append") == 2
    assert f"--append: {single} is not a sharded dataset" in capsys.readouterr().err
    assert build(inputs / "one.extxyz", tmp_path / "none", "--shard-size", "5", "--append") == 2
    assert "--append: no dataset at" in capsys.readouterr().err


def test_a_failure_after_the_index_is_written_keeps_the_appended_shards(inputs, tmp_path, monkeypatch, capsys):
    """Printing the summary failed (a closed pipe): the append was complete and stays so."""
    import graph_builders.store
    from graph_builders.stream_build import StreamBuildError

    out = tmp_path / "data"
    assert build(inputs / "b.extxyz", out, "--shard-size", "60") == 0

    def broken(path):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(graph_builders.store, "describe", broken)
    with pytest.raises(StreamBuildError, match="Broken pipe"):
        build(inputs / "one.extxyz", out, "--shard-size", "60", "--append")
    assert len(contents(out)) == 121
