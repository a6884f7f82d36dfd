"""Benchmark of the ADIOS2 graph store against torch.save/torch.load.

Writes and reads back alloy-like graphs (64 atoms, ~2,600 directed edges each, every attribute of
the schema plus energy/forces targets and a name) with

* ours: ``write_dataset`` -> one .bp file; full sequential read via ``GraphStore.get``; random
  reads of single samples;
* anchor: ``torch.save`` of the list of graphs (as dicts of tensors, so that
  ``torch.load(weights_only=True)`` can read it) and ``torch.load``; a random sample needs the whole
  list loaded first, so its latency is the load time (in-memory indexing afterwards is ~free);
* extra anchor: one ``torch.save`` file per graph (per-sample pickles, HydraGNN's
  SimplePickleDataset style), which does allow random reads.

Each measurement is repeated; medians are printed with ratios anchor / ours.

    .venv/bin/python bench/graph_builders_store.py [--num 10000] [--repeats 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry, HeadSpec
from graph_builders.store import GraphStore, write_dataset

HEADS = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/A")])


def make_graphs(num: int, atoms: int = 64, edges: int = 2600, seed: int = 0) -> list[Data]:
    """Synthetic graphs with the shapes and dtypes of 64-atom periodic alloy cells."""
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for i in range(num):
        e = edges + int(torch.randint(-40, 41, (1,), generator=gen))
        z = torch.randint(13, 80, (atoms,), generator=gen)
        graphs.append(Data(
            pos=torch.rand(atoms, 3, generator=gen) * 8.0,
            x=z.float().unsqueeze(1),
            z=z,
            edge_index=torch.randint(0, atoms, (2, e), generator=gen),
            edge_attr=torch.rand(e, 1, generator=gen) * 5.0,
            cell=(torch.eye(3) * 8.0).unsqueeze(0),
            pbc=torch.ones(1, 3, dtype=torch.bool),
            edge_shift=torch.randint(-1, 2, (e, 3), generator=gen).float(),
            y_energy=torch.randn(1, 1, generator=gen),
            y_forces=torch.randn(atoms, 3, generator=gen),
            num_components=torch.tensor([3]),
            name=f"alloy-{i:05d}",
        ))
    return graphs


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _latencies(read_one, indices: np.ndarray) -> np.ndarray:
    out = np.empty(len(indices))
    for k, i in enumerate(indices.tolist()):
        t0 = time.perf_counter()
        read_one(i)
        out[k] = time.perf_counter() - t0
    return out


def _size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--random-reads", type=int, default=1_000)
    parser.add_argument("--out", type=Path, default=None, help="scratch folder (default: a temp dir)")
    parser.add_argument("--no-per-sample-files", action="store_true", help="skip the one-file-per-graph anchor")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    scratch = Path(tempfile.mkdtemp(dir=args.out, prefix="store-bench-"))
    try:
        t0 = time.perf_counter()
        graphs = make_graphs(args.num)
        edges = np.mean([g.edge_index.shape[1] for g in graphs])
        print(f"{args.num} graphs, 64 atoms, {edges:.0f} edges on average (built in {time.perf_counter() - t0:.1f} s)")
        rng = np.random.default_rng(1)
        split = {"trainset": list(range(args.num))}
        bp, pt, per_dir = scratch / "graphs.bp", scratch / "graphs.pt", scratch / "per_sample"
        rows: dict[str, list[float]] = {}
        lat: dict[str, list[np.ndarray]] = {"ours": [], "per-sample files": []}

        for _ in range(args.repeats):
            rows.setdefault("write ours", []).append(_timed(lambda: write_dataset(bp, graphs, HEADS, splits=split)))
            with GraphStore(bp) as store:
                rows.setdefault("sequential read ours", []).append(
                    _timed(lambda: [store.get("trainset", i) for i in range(args.num)]))
                idx = rng.integers(0, args.num, args.random_reads)
                lat["ours"].append(_latencies(lambda i: store.get("trainset", i), idx))
            t_first = _timed(lambda: GraphStore(bp).get("trainset", int(rng.integers(args.num))))
            rows.setdefault("open + first sample ours", []).append(t_first)

            dicts = lambda: [g.to_dict() for g in graphs]  # noqa: E731
            rows.setdefault("write torch.save list", []).append(_timed(lambda: torch.save(dicts(), pt)))
            rows.setdefault("sequential read torch.load list", []).append(
                _timed(lambda: [Data(**d) for d in torch.load(pt, weights_only=True)]))
            rows.setdefault("open + first sample torch.load list", []).append(
                _timed(lambda: Data(**torch.load(pt, weights_only=True)[int(rng.integers(args.num))])))

            if not args.no_per_sample_files:
                shutil.rmtree(per_dir, ignore_errors=True)
                per_dir.mkdir()
                files = [per_dir / f"{i}.pt" for i in range(args.num)]
                rows.setdefault("write per-sample files", []).append(
                    _timed(lambda: [torch.save(g.to_dict(), f) for g, f in zip(graphs, files)]))
                load = lambda i: Data(**torch.load(files[i], weights_only=True))  # noqa: E731
                rows.setdefault("sequential read per-sample files", []).append(
                    _timed(lambda: [load(i) for i in range(args.num)]))
                lat["per-sample files"].append(_latencies(load, rng.integers(0, args.num, args.random_reads)))

        print(f"\nfile sizes: ours {_size_mb(bp):.0f} MB, torch.save list {_size_mb(pt):.0f} MB"
              + ("" if args.no_per_sample_files else f", per-sample files {_size_mb(per_dir):.0f} MB"))
        print(f"\nmedians over {args.repeats} repeats, {args.num} graphs")
        med = {k: statistics.median(v) for k, v in rows.items()}
        for k, v in med.items():
            print(f"  {k:<40} {v:8.3f} s   ({args.num / v:9.0f} graphs/s)")
        for name, runs in lat.items():
            if runs:
                p50 = statistics.median(np.percentile(r, 50) for r in runs) * 1e6
                p99 = statistics.median(np.percentile(r, 99) for r in runs) * 1e6
                print(f"  random read {name:<28} p50 {p50:8.0f} us   p99 {p99:8.0f} us")
        print("\nratios (anchor time / ours; > 1 means ours is faster)")
        print(f"  write:           torch.save list / ours = {med['write torch.save list'] / med['write ours']:.2f}")
        print(f"  sequential read: torch.load list / ours = "
              f"{med['sequential read torch.load list'] / med['sequential read ours']:.2f}")
        print(f"  first random sample after open: torch.load list / ours = "
              f"{med['open + first sample torch.load list'] / med['open + first sample ours']:.1f}")
        if lat["per-sample files"]:
            ours = statistics.median(np.percentile(r, 50) for r in lat["ours"])
            theirs = statistics.median(np.percentile(r, 50) for r in lat["per-sample files"])
            print(f"  random read p50: per-sample files / ours = {theirs / ours:.2f}")
            print(f"  sequential read: per-sample files / ours = "
                  f"{med['sequential read per-sample files'] / med['sequential read ours']:.2f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
