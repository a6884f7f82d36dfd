"""Screening at scale (issue #50): ``predict`` on many structures, one process vs ``mpiexec -n 2``.

    python -m bench.predict_scale --num 20000                  # the issue's measurement
    python -m bench.predict_scale --num 2000 --ensemble ENS    # any ensemble directory (from `select`)

Inputs: ``--num`` small periodic cells (as ``bench.data_scale make`` builds them: FCC, 8 atoms of
Cu/Ni/Pd/Ag/Au, rattled 0.05 Å) in one extxyz file. Ensemble: ``--ensemble`` or, by default, a small
one built here: three SchNet interatomic potentials (``bench.ensemble``'s first three candidates,
forces and stress by autograd) trained a few epochs with the real trainer on 120 EMT alloys of the
same elements, top-3, calibrated (uncertainty model and applicability domain, as a user's would be).

Both sides run the real command line, each a fresh launch with the same settings (one torch thread
per process, ``--chunk-size``, ``--forces-out``): ``python -m hydragnn_ensemble predict`` and
``mpiexec -n 2`` of the same. Reported: wall seconds from launch to exit and structures/s of each,
their ratio (goal >= 1.7x at 20,000); the same for the time ``predict`` reports for predicting
(planning, reading, building, predicting, writing and merging: the imports and loading the
members, paid once per process, excluded); and whether the outputs (CSV and per-atom extxyz) are
byte for byte the same.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ELEMENTS = (29, 28, 46, 47, 79)  # as bench.data_scale: Cu Ni Pd Ag Au
TRAIN_ELEMENTS = ("Cu", "Ni", "Pd", "Ag", "Au")


def make_cells(num: int, path: Path, seed: int = 0) -> Path:
    """``num`` 8-atom periodic cells (bench.data_scale's) written to the extxyz ``path``."""
    import ase.io
    from ase.build import bulk

    rng = np.random.default_rng(seed)
    base = bulk("Cu", "fcc", a=3.7, cubic=True).repeat((1, 1, 2))
    cells = []
    for _ in range(num):
        atoms = base.copy()
        atoms.numbers = rng.choice(ELEMENTS, size=len(atoms))
        atoms.positions += rng.normal(scale=0.05, size=atoms.positions.shape)
        cells.append(atoms)
    ase.io.write(path, cells, format="extxyz")
    return path


def build_ensemble_here(work: Path, epochs: int) -> Path:
    """A small calibrated ensemble of three SchNet potentials (see the module docstring)."""
    import torch

    from bench.ensemble import train_members
    from ensemble import BuildOptions, build_ensemble, calibrate
    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.store import write_dataset

    torch.set_num_threads(1)
    data = make_alloy_dataset(120, TRAIN_ELEMENTS, (2, 3), sizes=(32,), seed=3, progress=False)
    store = write_dataset(work / "train.bp", data.graphs, data.heads, metadata=data.metadata, seed=3,
                          fractions=(0.8, 0.1, 0.1))
    train_members(store, 3, epochs, work / "campaign")
    build_ensemble(work / "campaign", work / "ens", BuildOptions(top_k=3, method="topk"))
    calibrate(work / "ens", plots=False)
    return work / "ens"


def predict_argv(ensemble: Path, cells: Path, out: Path, chunk: int, ranks: int) -> list[str]:
    cli = [sys.executable, "-m", "hydragnn_ensemble", "predict", str(ensemble), str(cells),
           "-o", str(out / "pred.csv"), "--forces-out", str(out / "pred.extxyz"), "--chunk-size", str(chunk),
           "--no-progress"]
    if ranks == 1:
        return cli
    return [str(Path(sys.executable).parent / "mpiexec"), "-n", str(ranks), *cli]


def timed_predict(ensemble: Path, cells: Path, out: Path, chunk: int, ranks: int) -> tuple[float, float]:
    """Wall seconds of one ``predict`` launch from launch to exit, and the seconds it reports for
    predicting (from planning to the merged files: start-up and loading the members excluded)."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.run(predict_argv(ensemble, cells, out, chunk, ranks), cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"predict with {ranks} process(es) failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    found = re.search(r"structure\(s\) predicted by \d+ member\(s\) in ([0-9.]+) s", proc.stdout)
    if found is None:
        raise SystemExit(f"no timing in predict's summary:\n{proc.stdout[-2000:]}")
    return wall, float(found.group(1))


def same_files(a: Path, b: Path) -> bool:
    return all((a / name).read_bytes() == (b / name).read_bytes() for name in ("pred.csv", "pred.extxyz"))


def measure(ensemble: Path, work: Path, num: int, chunk: int, ranks: int, repeats: int) -> dict:
    cells = make_cells(num, work / f"cells{num}.extxyz")
    runs: dict[int, list[tuple[float, float]]] = {1: [], ranks: []}
    for r in range(repeats):
        for n in (1, ranks):
            runs[n].append(timed_predict(ensemble, cells, work / f"out_{n}_{r}", chunk, n))
    out: dict = {"structures": num, "chunk_size": chunk, "ranks": ranks, "repeats": repeats,
                 "outputs_equal": all(same_files(work / f"out_1_{r}", work / f"out_{ranks}_{r}")
                                      for r in range(repeats))}
    for k, phase in enumerate(("launch_to_exit", "predicting")):
        one = statistics.median(t[k] for t in runs[1])
        many = statistics.median(t[k] for t in runs[ranks])
        out[phase] = {"one_s": one, "mpi_s": many, "one_per_s": num / one, "mpi_per_s": num / many,
                      "ratio": one / many}
    return out


def report(res: dict) -> None:
    n, r = res["structures"], res["ranks"]
    print(f"\npredict, {n} cells of 8 atoms, --chunk-size {res['chunk_size']} (median of {res['repeats']}):")
    print(f"{'':<16}{'1 process s':>13}{'mpiexec -n ' + str(r) + ' s':>17}{'1 proc /s':>11}"
          f"{'-n ' + str(r) + ' /s':>10}{'ratio':>8}")
    for phase, label in (("launch_to_exit", "launch to exit"), ("predicting", "predicting")):
        row = res[phase]
        print(f"{label:<16}{row['one_s']:>13.1f}{row['mpi_s']:>17.1f}{row['one_per_s']:>11.1f}{row['mpi_per_s']:>10.1f}"
              f"{row['ratio']:>8.2f}")
    print(f"outputs (CSV and per-atom extxyz) byte for byte equal: {res['outputs_equal']}  "
          "(goal: ratio >= 1.7 at 20,000 structures)")
    print("(predicting: the time predict reports, from planning the inputs to the merged files; launch to exit "
          "adds the imports and loading the members, once per process)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.predict_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--num", type=int, default=20000, help="structures to predict (default 20,000)")
    parser.add_argument("--ensemble", type=Path, default=None, help="ensemble directory (default: build one)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the members built here")
    parser.add_argument("--chunk-size", type=int, default=512)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None, help="keep the files here (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ensemble = args.ensemble
        if ensemble is None:
            t0 = time.perf_counter()
            ensemble = build_ensemble_here(work, args.epochs)
            print(f"ensemble built in {time.perf_counter() - t0:.0f} s: {ensemble}", flush=True)
        res = measure(ensemble, work, args.num, args.chunk_size, args.ranks, args.repeats)
    report(res)
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=2))
    return 0 if res["outputs_equal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
