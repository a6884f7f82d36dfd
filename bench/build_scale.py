"""build-graphs at scale (issue #50): peak memory at two input sizes, the speed-up of two MPI ranks,
and bytes per graph of the layouts against the layout before #50.

    python -m bench.build_scale                          # 20,000 and 200,000 structures
    python -m bench.build_scale --sizes 2000 20000       # a quick run

Input: ``N`` small periodic cells (as :mod:`bench.data_scale` makes them: FCC, 8 atoms of
Cu/Ni/Pd/Ag/Au, rattled 0.05 Å) with synthetic labels (a Morse pair energy per edge at 5 Å and its
exact forces, :func:`bench.data_scale.morse_labels`; the bench measures data handling, not
physics), written once to ``WORK/cellsN.extxyz`` (kept for later runs; the first ``M`` cells of
every size are the same).

Per size, each in a fresh process, same input, same options (``--cutoff 5 --shard-size 20000``,
torch on one thread; ``--shard-size`` changes the shard size):

* **peak RSS** of ``build-graphs --shard-size 20000`` in one process (``ru_maxrss`` of that child,
  from ``os.wait4``): the goal is RSS(200k) <= 1.25 x RSS(20k);
* **graphs/s** of that run and of ``mpiexec -n 2 hydragnn-ensemble build-graphs`` (same command):
  input structures over wall seconds from launch to exit (start-up included; the start-up alone,
  the same command on one structure, is shown beside) and CPU seconds (all processes: what the
  two ranks spend beyond one process is the cost of sharing the work): the goal is >= 1.7 x. On
  a machine of two cores shared with other work, the two ranks also compete with that work.

Bytes per graph (the smallest size): the datasets' files on disk (shards, their ADIOS2 metadata,
the index) over their graphs, for ``--layout hydragnn`` (the one-process run) and ``--layout
compact`` (one more run). Before #50 the writer also stored our ``z`` and ``edge_shift`` beside
HydraGNN's ``atomic_numbers`` and ``edge_shifts``; now the reader derives them. "Before #50" is the
hydragnn dataset plus what storing them took: for every field a shard's split lists as derived from
one of HydraGNN's (``"from": "atomic_numbers"`` / ``"edge_shifts"``), the elements of that source
variable at the derived field's item size, and its ``variable_count`` and ``variable_offset`` (8
bytes per graph each). The goal: half or less, HydraGNN still reading it (``compact``: for HydraGNN
configs whose layers compute their own edge lengths; :mod:`graph_builders.store.layouts`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
OPTIONS = ["--scale", "atomic", "--cutoff", "5.0", "--no-progress"]


def make_input(num: int, path: Path, seed: int = 0) -> Path:
    """``num`` labelled cells in one extxyz file (kept: made once per size), written in chunks."""
    import ase.io
    import torch
    from ase.build import bulk
    from ase.calculators.singlepoint import SinglePointCalculator

    from bench.data_scale import ELEMENTS, morse_labels
    from graph_builders.atomic import AtomicGraphBuilder

    marker = path.with_name(path.name + ".done")
    if marker.exists() and path.exists():
        return path
    torch.set_num_threads(1)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    rng = np.random.default_rng(seed)
    base = bulk("Cu", "fcc", a=3.7, cubic=True).repeat((1, 1, 2))
    build = AtomicGraphBuilder(5.0)
    chunk = []
    for i in range(num):
        atoms = base.copy()
        atoms.numbers = rng.choice(ELEMENTS, size=len(atoms))
        atoms.positions += rng.normal(scale=0.05, size=atoms.positions.shape)
        energy, forces = morse_labels(build(atoms))
        atoms.calc = SinglePointCalculator(atoms, energy=float(energy[0, 0]), forces=forces)
        chunk.append(atoms)
        if len(chunk) == 5000 or i == num - 1:
            ase.io.write(tmp, chunk, format="extxyz", append=True)
            chunk = []
    tmp.replace(path)
    marker.write_text(str(num))
    return path


def timed_run(argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system, of the child and the children it waited for: under
    mpiexec every rank) and peak RSS in MB (``ru_maxrss`` from ``os.wait4``: of its largest process,
    under mpiexec not the ranks' sum) of the command."""
    import tempfile

    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n"
                               f"{err.read().decode(errors='replace')[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def build_command(data: Path, out: Path, ranks: int, shard_size: int, *extra: str) -> list[str]:
    cli = [sys.executable, "-m", "hydragnn_ensemble", "build-graphs", str(data), "-o", str(out), *OPTIONS,
           "--shard-size", str(shard_size), *extra]
    return [str(VENV_BIN / "mpiexec"), "-n", str(ranks), *cli] if ranks > 1 else cli


def dataset_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def num_graphs(path: Path) -> int:
    from graph_builders.store import open_dataset

    with open_dataset(path) as store:
        return sum(store.num_graphs(s) for s in store.split_names)


def derived_bytes(path: Path) -> int:
    """What storing the fields now derived from HydraGNN's took before #50 (module docstring)."""
    import adios2

    from graph_builders.store.layouts import DERIVED_FROM_HYDRAGNN

    total = 0
    for shard in sorted(path.glob("*.bp")):
        with adios2.FileReader(str(shard)) as f:
            variables = f.available_variables()
            for attr in [a for a in f.available_attributes() if a.startswith("hydragnn_ensemble/")
                         and a.endswith("/fields")]:
                split = attr.split("/")[1]
                for spec in json.loads(f.read_attribute(attr)).values():
                    source = spec.get("from")
                    if source not in DERIVED_FROM_HYDRAGNN.values():
                        continue
                    info = variables[f"{split}/{source}"]
                    elements = int(np.prod([int(n) for n in info["Shape"].split(",")]))
                    itemsize = np.dtype(getattr(np, spec["torch_dtype"])).itemsize
                    ndata = int(np.prod([int(n) for n in variables[f"{split}/{source}/variable_count"]["Shape"]
                                         .split(",")]))
                    total += elements * itemsize + 2 * 8 * ndata
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.build_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 200_000])
    parser.add_argument("--shard-size", type=int, default=20_000)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "build_scale")
    parser.add_argument("--keep", action="store_true", help="keep the datasets built")
    args = parser.parse_args(argv)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    one = make_input(1, work / "cells1.extxyz")
    rows = []
    for ranks in (1, 2):  # the start-up alone: the same command on one structure
        out = work / f"startup_r{ranks}"
        shutil.rmtree(out, ignore_errors=True)
        rows.append(timed_run(build_command(one, out, ranks, args.shard_size))[0])
        shutil.rmtree(out, ignore_errors=True)
    startup = {1: rows[0], 2: rows[1]}
    table = []
    for num in args.sizes:
        data = make_input(num, work / f"cells{num}.extxyz")
        single, double = work / f"ds{num}_r1", work / f"ds{num}_r2"
        for path in (single, double):
            shutil.rmtree(path, ignore_errors=True)
        wall1, cpu1, rss = timed_run(build_command(data, single, 1, args.shard_size))
        wall2, cpu2, _ = timed_run(build_command(data, double, 2, args.shard_size))
        assert num_graphs(single) == num_graphs(double) == num, (num_graphs(single), num_graphs(double))
        table.append((num, rss, wall1, cpu1, wall2, cpu2))
        if num == min(args.sizes):
            compact = work / f"ds{num}_compact"
            shutil.rmtree(compact, ignore_errors=True)
            timed_run(build_command(data, compact, 1, args.shard_size, "--layout", "compact"))
            per_graph = {"hydragnn": dataset_bytes(single) / num, "compact": dataset_bytes(compact) / num}
            per_graph["before #50"] = per_graph["hydragnn"] + derived_bytes(single) / num
            if not args.keep:
                shutil.rmtree(compact)
        if not args.keep:
            shutil.rmtree(double)
            shutil.rmtree(single)
    print(f"build-graphs {' '.join(OPTIONS)} --shard-size {args.shard_size} (start-up alone: {startup[1]:.1f} s "
          f"one process, {startup[2]:.1f} s mpiexec -n 2)")
    print(f"{'structures':>11}{'peak RSS MB':>13}{'RSS / first':>13}{'1 proc s':>10}{'CPU s':>8}{'graphs/s':>10}"
          f"{'2 ranks s':>11}{'CPU s':>8}{'graphs/s':>10}{'speed-up':>10}")
    for num, rss, wall1, cpu1, wall2, cpu2 in table:
        print(f"{num:>11,}{rss:>13.0f}{rss / table[0][1]:>13.2f}{wall1:>10.1f}{cpu1:>8.1f}{num / wall1:>10.0f}"
              f"{wall2:>11.1f}{cpu2:>8.1f}{num / wall2:>10.0f}{wall1 / wall2:>10.2f}")
    print(f"bytes per graph on disk ({min(args.sizes):,} structures): " + ", ".join(
        f"{name} {value:,.0f}" for name, value in per_graph.items()))
    before = per_graph["before #50"]
    print(f"  against before #50: hydragnn {per_graph['hydragnn'] / before:.2f}x, compact "
          f"{per_graph['compact'] / before:.2f}x")


if __name__ == "__main__":
    main()
