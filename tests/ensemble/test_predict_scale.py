"""predict at scale: inputs read and predicted in chunks (bounded memory), shared over real MPI ranks,
one output identical to one process's; the pieces (extxyz frame table, input plan, partial merge)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import ase.io
import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.calculators.emt import EMT

from ensemble.input_plan import BadInput, plan_inputs
from ensemble.partials import PartWriter, merge_bad, merge_frames, merge_rows
from graph_builders.xyz_frames import scan_frames, split_frames

REPO = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"


def _cells(n: int, seed: int, labelled: bool) -> list[Atoms]:
    """8-atom periodic alloy cells (Cu with Ni/Pd/Au), EMT energy, forces and stress when ``labelled``."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        atoms = bulk("Cu", "fcc", a=3.6 + 0.2 * rng.random(), cubic=True).repeat((1, 1, 2))
        atoms.symbols[rng.choice(8, 3, replace=False)] = ["Ni", "Pd", "Au"]
        atoms.rattle(0.03, seed=seed * 1000 + k)
        if labelled:
            atoms.calc = EMT()
            atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()
        out.append(atoms)
    return out


def _vacancy() -> Atoms:
    atoms = bulk("Cu", "fcc", a=3.8, cubic=True).repeat((2, 2, 2))
    atoms.symbols[[3]] = "Au"
    atoms.rattle(0.03, seed=2)
    del atoms[4]
    return atoms


CHUNK = 16  # a tiny chunk: 12 chunks of the 189 structures, dealt to the ranks in turn


@pytest.fixture(scope="module")
def screening_inputs(tmp_path_factory, alloy_store) -> list[Path]:
    """189 structures in input order: 16 unlabelled cells (extxyz), a 12-graph dataset (three splits,
    with stress targets no file carries), 160 EMT-labelled cells (extxyz) of which number 37 has two
    atoms out of each other's reach (invalid) and number 20 is a 31-atom cell with a vacancy (outside
    the ensemble's domain), one CIF. At CHUNK structures per chunk, rank 0 of two
    predicts the first cells and rank 1 the whole dataset (and some cells)."""
    from graph_builders.store import GraphStore, write_dataset

    root = tmp_path_factory.mktemp("screen")
    plain, small, labelled, cif = root / "plain.extxyz", root / "small.bp", root / "emt.extxyz", root / "one.cif"
    ase.io.write(plain, _cells(16, 1, labelled=False))
    with GraphStore(alloy_store) as store:
        write_dataset(small, store.read_range("trainset", 0, 12), store.heads, fractions=(0.6, 0.2, 0.2))
    cells = _cells(160, 2, labelled=True)
    cells[37] = Atoms("Cu2", positions=[[0, 0, 0], [9, 0, 0]], cell=[20, 20, 20], pbc=True)
    cells[20] = _vacancy()
    ase.io.write(labelled, cells)
    ase.io.write(cif, _cells(1, 3, labelled=False)[0])
    return [plain, small, labelled, cif]


def _predict_argv(ensemble: Path, inputs: list[Path], out: Path, chunk: int) -> list[str]:
    return ["predict", str(ensemble), *map(str, inputs), "-o", str(out / "pred.csv"),
            "--forces-out", str(out / "pred.extxyz"), "--chunk-size", str(chunk), "--no-progress"]


@pytest.fixture(scope="module")
def one_process(calibrated_potential_ensemble, screening_inputs, tmp_path_factory):
    """The CLI in this process at CHUNK: its folder, exit code, stderr and the number of graphs of
    every predict call."""
    from ensemble.predictor import EnsemblePredictor
    from hydragnn_ensemble.cli import main

    out = tmp_path_factory.mktemp("one")
    sizes: list[int] = []
    original = EnsemblePredictor.predict_graphs

    def recording(self, graphs):
        sizes.append(len(graphs))
        return original(self, graphs)

    err = out.parent / f"{out.name}.stderr"
    with pytest.MonkeyPatch.context() as m, open(err, "w") as fh:
        m.setattr(EnsemblePredictor, "predict_graphs", recording)
        m.setattr(sys, "stderr", fh)
        rc = main(_predict_argv(calibrated_potential_ensemble, screening_inputs, out, CHUNK))
    return out, rc, err.read_text(), sizes


BAD = "Cu2: 2 atom(s) have no neighbour"


def test_one_process_predicts_chunk_by_chunk(one_process, screening_inputs):
    from graph_builders.store import GraphStore

    out, rc, err, sizes = one_process
    assert rc == 1
    assert err.count("bad input:") == 1 and f"bad input: {screening_inputs[2]}[37]: {BAD}" in err
    # bounded memory: never more than a chunk of graphs at once, every structure once
    assert max(sizes) == CHUNK and sum(sizes) == 188 and len(sizes) == -(-189 // CHUNK)
    rows = list(csv.DictReader((out / "pred.csv").open()))
    plain, small, labelled, cif = map(str, screening_inputs)
    assert [(r["source"], r["index"]) for r in rows[:2]] == [(plain, "0"), (plain, "1")]
    with GraphStore(small) as store:
        assert [r["index"] for r in rows[16:28]] == [f"{split}:{i}" for split in store.split_names
                                                     for i in range(store.num_graphs(split))]
    assert [r["index"] for r in rows[28 + 35:28 + 40]] == ["35", "36", "38", "39", "40"]
    assert (rows[-1]["source"], rows[-1]["index"]) == (cif, "0") and len(rows) == 188
    # stress labels come only from the dataset (which rank 1 predicts under mpiexec), forces from the
    # EMT file: both columns are there, empty where an input has no label
    assert rows[16]["stress_0_ref"] != "" and rows[0]["stress_0_ref"] == rows[40]["stress_0_ref"] == ""
    assert rows[40]["forces_mae"] != "" and rows[0]["forces_mae"] == ""
    assert len(ase.io.read(out / "pred.extxyz", ":")) == 188
    assert [r["in_domain"] for r in rows].count("no") == 1 and rows[28 + 20]["in_domain"] == "no"


@pytest.mark.mpi
def test_two_ranks_write_what_one_process_writes(calibrated_potential_ensemble, screening_inputs, one_process,
                                                 tmp_path):
    proc = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, "-m", "hydragnn_ensemble",
                           *_predict_argv(calibrated_potential_ensemble, screening_inputs, tmp_path, CHUNK)],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stderr.count("bad input:") == 1 and f"[37]: {BAD}" in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout.count("188 structure(s) predicted by 3 member(s)") == 1
    assert f"on 2 MPI ranks: 12 chunk(s) of at most {CHUNK} structure(s)" in proc.stdout
    # the summary reduced over the ranks: the outside-the-domain cell was rank 1's
    assert proc.stdout.count("1 of 188 outside the ensemble's applicability domain") == 1
    assert proc.stdout.count(f"  {screening_inputs[2]}[20] AuCu30: ") == 1, proc.stdout
    for name in ("pred.csv", "pred.extxyz"):
        assert (tmp_path / name).read_bytes() == (one_process[0] / name).read_bytes(), name
    # the partial files and the temporary outputs are gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pred.csv", "pred.extxyz"]


def test_one_chunk_writes_what_the_in_memory_path_writes(calibrated_potential_ensemble, screening_inputs,
                                                         one_process, tmp_path, capsys):
    """With every structure in one chunk, the chunked path writes what the old one did (load
    everything, predict, write); smaller chunks only change which graphs share a batch."""
    from ensemble import EnsemblePredictor, load_inputs, write_node_extxyz, write_predictions_csv
    from hydragnn_ensemble.cli import main

    predictor = EnsemblePredictor(calibrated_potential_ensemble)
    items, bad = load_inputs(screening_inputs, predictor)
    assert [(b.source, b.index) for b in bad] == [(str(screening_inputs[2]), "37")]
    prediction = predictor.predict_graphs([item.graph for item in items])
    write_predictions_csv(items, prediction, tmp_path / "memory.csv")
    write_node_extxyz(items, prediction, tmp_path / "memory.extxyz")
    out = tmp_path / "cli"
    out.mkdir()
    assert main(_predict_argv(calibrated_potential_ensemble, screening_inputs, out, 1000)) == 1
    assert "1 bad input(s) skipped" in capsys.readouterr().err
    assert (out / "pred.csv").read_bytes() == (tmp_path / "memory.csv").read_bytes()
    assert (out / "pred.extxyz").read_bytes() == (tmp_path / "memory.extxyz").read_bytes()
    whole = list(csv.DictReader((tmp_path / "memory.csv").open()))
    chunked = list(csv.DictReader((one_process[0] / "pred.csv").open()))
    assert [(r["source"], r["index"]) for r in chunked] == [(r["source"], r["index"]) for r in whole]
    for col in ("formation_energy_mean", "formation_energy_std", "stress_3_mean", "forces_mae", "latent_distance"):
        a = np.array([float(r[col] or "nan") for r in whole])
        b = np.array([float(r[col] or "nan") for r in chunked])
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6, equal_nan=True)


def test_a_malformed_frame_is_listed_alone(calibrated_potential_ensemble, tmp_path):
    from ensemble import EnsemblePredictor, load_inputs

    path = tmp_path / "five.extxyz"
    ase.io.write(path, _cells(5, 4, labelled=True))
    frames = split_frames(path.read_bytes())
    lines = frames[2].decode().splitlines(keepends=True)
    lines[4] = "Cu 0.0 zero 0.0 0.0 0.0 0.0\n"
    path.write_bytes(b"".join(frames[:2]) + "".join(lines).encode() + b"".join(frames[3:]))
    items, bad = load_inputs([path], EnsemblePredictor(calibrated_potential_ensemble))
    assert [item.index for item in items] == ["0", "1", "3", "4"]
    assert [(b.index, b.reason.split(":")[0]) for b in bad] == [("2", "cannot read as 'extxyz' (malformed frame?)")]


# -- the pieces, without an ensemble ---------------------------------------------------------------

def test_frame_table_delimits_frames_as_ase_does(tmp_path):
    path = tmp_path / "cells.extxyz"
    cells = _cells(6, 5, labelled=True)
    ase.io.write(path, cells)
    table = scan_frames(path)
    assert table.num_frames == 6 and table.error is None
    data = path.read_bytes()
    for k, frame in enumerate(split_frames(data)):
        assert frame == data[table.offsets[k]:table.offsets[k + 1]]
        np.testing.assert_allclose(ase.io.read(path, k).positions, cells[k].positions, atol=1e-7)
    (tmp_path / "cut.extxyz").write_bytes(data[:table.offsets[4] + 40])  # frame 4 cut short
    cut = scan_frames(tmp_path / "cut.extxyz")
    assert cut.num_frames == 4 and "frame 4 (line" in cut.error and "cut short" in cut.error
    (tmp_path / "blank.extxyz").write_bytes(data + b"\n\n")
    assert scan_frames(tmp_path / "blank.extxyz").num_frames == 6


def test_plan_cuts_the_inputs_into_chunks_in_input_order(tmp_path):
    a, b = tmp_path / "a.extxyz", tmp_path / "b.extxyz"
    ase.io.write(a, _cells(5, 6, labelled=False))
    ase.io.write(b, _cells(4, 7, labelled=False))
    ase.io.write(tmp_path / "c.cif", _cells(1, 8, labelled=False)[0])
    (tmp_path / "empty.xyz").write_text("")
    data = b.read_bytes()
    (tmp_path / "cut.extxyz").write_bytes(data[:scan_frames(b).offsets[2] + 30])
    paths = [a, tmp_path / "missing.cif", tmp_path / "empty.xyz", tmp_path / "c.cif", b, tmp_path / "cut.extxyz"]
    plan = plan_inputs(paths, chunk_size=4)
    assert [s.kind for s in plan.sources] == ["frames", "bad", "bad", "file", "frames", "frames"]
    assert [[(p.source, p.start, p.stop) for p in chunk] for chunk in plan.chunks] == [
        [(0, 0, 4)], [(0, 4, 5), (3, 0, 1), (4, 0, 2)], [(4, 2, 4), (5, 0, 2)]]
    assert all(chunk_units == 4 for chunk_units in map(plan.chunk_units, range(3)))
    first = plan.chunks[1][2]
    assert data[first.byte_start:first.byte_stop] == b"".join(split_frames(data)[:2])
    assert [(b.position, b.index, b.reason.split(" (")[0]) for b in plan.bad] == [
        ((1, 0, -1), None, "no such file"), ((2, 0, -1), None, "file is empty"),
        ((5, 0, 2), "2", "cannot read as 'extxyz' from here on")]
    assert len(plan_inputs(paths).chunks) == 1
    with pytest.raises(ValueError, match="at least 1"):
        plan_inputs(paths, chunk_size=0)


def test_partial_files_merge_in_input_order(tmp_path):
    with PartWriter(tmp_path, 0) as w0, PartWriter(tmp_path, 1) as w1:
        w0.write_rows([((0, 0, 0), ["a0", "x", "1"]), ((0, 0, 1), ["a1", "y", "2"]), ((2, 0, 0), ["c0", "z", "3"])])
        w1.write_rows([((0, 0, 2), ["a2", "has,comma", "4"]), ((1, 1, 5), ["b5", 'say "hi"', "5"])])
        w0.write_frame((0, 0, 1), "1\nframe a1\nCu 0 0 0\n")
        w1.write_frame((0, 0, 2), "1\nframe a2\nCu 0 0 0\n")
        w1.write_bad([BadInput("b", "7", "bad one", (1, 1, 7))])
    merge_rows(tmp_path, 2, ["name", "value"], [0, 1], tmp_path / "out.csv")
    assert list(csv.reader((tmp_path / "out.csv").open())) == [
        ["name", "value"], ["a0", "x"], ["a1", "y"], ["a2", "has,comma"], ["b5", 'say "hi"'], ["c0", "z"]]
    merge_frames(tmp_path, 2, tmp_path / "out.extxyz")
    assert (tmp_path / "out.extxyz").read_text() == "1\nframe a1\nCu 0 0 0\n1\nframe a2\nCu 0 0 0\n"
    planned = [BadInput("c", None, "missing", (3, 0, -1)), BadInput("a", None, "bad file", (0, 0, -1))]
    assert [b.source for b in merge_bad(tmp_path, 2, planned)] == ["a", "b", "c"]
