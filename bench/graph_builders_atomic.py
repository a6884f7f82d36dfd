"""Benchmark: atoms_to_graph (full PyG Data) against the raw vesin call and ASE's neighbor_list.

Workload (ANCHORS.md, "Neighbour lists"): random 64-atom FCC alloy cells at a 5 Å cutoff, and one
~50k-atom alloy cell. Every repeat times each contender on the same structures back to back
(interleaved, so machine load hits all alike). Medians over repeats are reported for wall time and
for process CPU time (the CPU figure is immune to waiting for a core on a shared machine), with the
ratios and the goals: >= 40x ASE, <= 1.3x raw vesin (64 atoms), <= 1.5x raw vesin (50k atoms).

    .venv/bin/python bench/graph_builders_atomic.py [--structures 500] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import vesin
from ase import Atoms
from ase.neighborlist import neighbor_list

from graph_builders.atomic import AtomicGraphBuilder, atoms_to_graph
from graph_builders.datasets.alloy import generate_alloy_structures, random_alloy

CUTOFF = 5.0
GOAL_VS_ASE = 40.0
GOAL_VS_VESIN_SMALL = 1.3
GOAL_VS_VESIN_LARGE = 1.5


@dataclass(frozen=True)
class Timing:
    """Median wall and CPU seconds of one pass over the structures."""

    wall: float
    cpu: float


def _raw_vesin(structures: Sequence[Atoms]) -> Callable[[], None]:
    calculator = vesin.NeighborList(cutoff=CUTOFF, full_list=True, n_threads=1)

    def run() -> None:
        for atoms in structures:
            calculator.compute(atoms.positions, atoms.cell.array, atoms.pbc, quantities="ijSd")

    return run


def _ours(structures: Sequence[Atoms]) -> Callable[[], None]:
    def run() -> None:
        for atoms in structures:
            atoms_to_graph(atoms, cutoff=CUTOFF)

    return run


def _builder(structures: Sequence[Atoms]) -> Callable[[], None]:
    build = AtomicGraphBuilder(cutoff=CUTOFF)

    def run() -> None:
        for atoms in structures:
            build(atoms)

    return run


def _ase(structures: Sequence[Atoms]) -> Callable[[], None]:
    def run() -> None:
        for atoms in structures:
            neighbor_list("ijSd", atoms, CUTOFF)

    return run


def _interleaved(contenders: dict[str, Callable[[], None]], repeats: int) -> dict[str, Timing]:
    """Median wall/CPU time per contender over ``repeats`` interleaved passes (after a warm-up)."""
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    for run in contenders.values():
        run()
    for _ in range(repeats):
        for name, run in contenders.items():
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            run()
            cpu[name].append(time.process_time() - cpu_start)
            wall[name].append(time.perf_counter() - wall_start)
    return {
        name: Timing(statistics.median(wall[name]), statistics.median(cpu[name])) for name in contenders
    }


def _verdict(value: float, goal: float, at_least: bool) -> str:
    ok = value >= goal if at_least else value <= goal
    return "met" if ok else "NOT met"


def _report_ratio(what: str, wall: float, cpu: float, goal: float, at_least: bool, unit: str) -> None:
    relation = ">=" if at_least else "<="
    print(f"  {what}: wall {wall:.2f}{unit} ({_verdict(wall, goal, at_least)}), "
          f"CPU {cpu:.2f}{unit} ({_verdict(cpu, goal, at_least)}); goal {relation} {goal}{unit}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run both workloads, print throughput, ratios and whether each goal is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--structures", type=int, default=500, help="number of 64-atom cells")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats (median reported)")
    parser.add_argument("--large-atoms", type=int, default=50784, help="atoms in the large cell")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    small, references = generate_alloy_structures(
        args.structures, components=(2, 5), sizes=(64,), seed=args.seed
    )
    edges = sum(atoms_to_graph(a, cutoff=CUTOFF).num_edges for a in small) / len(small)
    print(f"64-atom alloy cells: {len(small)} structures, cutoff {CUTOFF} Å, "
          f"{edges:.0f} edges/structure, median of {args.repeats} repeats, 1 thread")
    t = _interleaved(
        {"ours": _ours(small), "builder": _builder(small), "vesin": _raw_vesin(small), "ase": _ase(small)},
        args.repeats,
    )
    n = len(small)
    print("  structures/s                       wall       CPU")
    for key, label in [("ours", "atoms_to_graph (full Data)"), ("builder", "AtomicGraphBuilder (full Data)"),
                       ("vesin", "raw vesin compute('ijSd')"), ("ase", "ASE neighbor_list('ijSd')")]:
        print(f"  {label:31s} {n / t[key].wall:9.1f} {n / t[key].cpu:9.1f}")
    for key, label in [("ours", "atoms_to_graph"), ("builder", "AtomicGraphBuilder")]:
        _report_ratio(f"{label} speed-up over ASE", t["ase"].wall / t[key].wall,
                      t["ase"].cpu / t[key].cpu, GOAL_VS_ASE, True, "x")
        _report_ratio(f"{label} time / raw vesin", t[key].wall / t["vesin"].wall,
                      t[key].cpu / t["vesin"].cpu, GOAL_VS_VESIN_SMALL, False, "x")
    print(f"  (raw vesin itself is {t['ase'].cpu / t['vesin'].cpu:.1f}x ASE in CPU time)")

    rng = np.random.default_rng(args.seed)
    large = random_alloy(rng, references, 5, args.large_atoms, strain=0.03, rattle=0.05)
    num_edges = atoms_to_graph(large, cutoff=CUTOFF).num_edges
    print(f"large alloy cell: {len(large)} atoms, {num_edges} edges, median of {args.repeats} repeats")
    big = _interleaved({"ours": _ours([large]), "vesin": _raw_vesin([large])}, args.repeats)
    print("  milliseconds                       wall       CPU")
    print(f"  {'atoms_to_graph (full Data)':31s} {big['ours'].wall * 1e3:9.1f} {big['ours'].cpu * 1e3:9.1f}")
    print(f"  {'raw vesin compute(ijSd)':31s} {big['vesin'].wall * 1e3:9.1f} {big['vesin'].cpu * 1e3:9.1f}")
    _report_ratio("atoms_to_graph time / raw vesin", big["ours"].wall / big["vesin"].wall,
                  big["ours"].cpu / big["vesin"].cpu, GOAL_VS_VESIN_LARGE, False, "x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
