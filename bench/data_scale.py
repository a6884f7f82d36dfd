"""Data at HydraGNN's scale: a trial's start-up and memory, the loader's read speed and the balance of
data-parallel shares, at two dataset sizes (issue #50).

    python -m bench.data_scale make --num 20000 -o bench/out/cells20k      # synthetic datasets
    python -m bench.data_scale make --num 200000 -o bench/out/cells200k
    python -m bench.data_scale startup bench/out/cells20k bench/out/cells200k
    python -m bench.data_scale loader bench/out/cells200k
    python -m bench.data_scale balance demo_out/alloy.bp
    python -m bench.data_scale fit bench/out/cells20k demo_out/alloy.bp --write   # scheduler/data_cost.json

``make``: small periodic cells (FCC, 8 atoms of Cu/Ni/Pd/Ag/Au, rattled 0.05 Å, radius graph at
5 Å: 336 edges each) with synthetic labels (a Morse pair energy per edge and its exact forces: the
bench measures data handling, not physics), written as a sharded dataset of 20,000 graphs per shard
(:class:`graph_builders.store.ShardWriter`).

``startup``: one trial process per dataset (``python -m hydragnn_ensemble train``, a small GIN, one
epoch cut by a time budget), streamed (``preload: false``) and with the default (``auto``): seconds
from launch to the first training batch (the trainer's log), and the process's peak RSS.

``loader``: training graphs per second of the trainer's streamed loader (block reads, slimming,
standardising, collating; no model) against a raw bulk ADIOS2 read of the same split's variables
(bytes to graphs) and against reading graph by graph (``GraphStore.get``, the path every trial used
before), in the same process.

``balance``: two processes' shares of the same global batches, work-balanced (edges + nodes) or
count-balanced (equal graph counts): per step, each process's forward and backward time, max over
mean, the median over steps (the shares run one after the other in one process, so the times are
each share's own work; each timed as the best of 3 against the shared machine's noise, whose floor
is printed: one share timed against itself).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ELEMENTS = (29, 28, 46, 47, 79)
MORSE = {"depth": 0.3, "alpha": 1.6, "r0": 2.6}  # eV, 1/Å, Å: a Cu-like pair, for synthetic labels


def morse_labels(graph) -> tuple[np.ndarray, np.ndarray]:
    """Energy (1/2 sum over directed edges of the Morse pair energy) and its exact forces."""
    from graph_builders.schema import edge_vectors

    v = edge_vectors(graph).double().numpy()
    r = np.linalg.norm(v, axis=1)
    d, a, r0 = MORSE["depth"], MORSE["alpha"], MORSE["r0"]
    e = np.exp(-a * (r - r0))
    energy = 0.5 * float((d * (1 - e) ** 2).sum())
    dphi = 2 * d * (1 - e) * a * e  # d phi / d r
    centre = graph.edge_index[1].numpy()
    forces = np.zeros((graph.num_nodes, 3))
    np.add.at(forces, centre, (dphi / r)[:, None] * v)
    return np.array([[energy]]), forces


def make(num: int, out: Path, shard_size: int, seed: int) -> None:
    """Write ``num`` synthetic cells as a sharded dataset at ``out`` (see the module docstring)."""
    import torch
    from ase.build import bulk
    from tqdm import tqdm

    from graph_builders.atomic import AtomicGraphBuilder
    from graph_builders.schema import HeadRegistry, HeadSpec
    from graph_builders.store import ShardWriter, write_index

    torch.set_num_threads(1)
    heads = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/Å")])
    rng = np.random.default_rng(seed)
    base = bulk("Cu", "fcc", a=3.7, cubic=True).repeat((1, 1, 2))
    build = AtomicGraphBuilder(5.0)
    writer = ShardWriter(out, heads, shard_size, metadata={"cutoff": 5.0, "source": "bench.data_scale"}, seed=seed)
    for i in tqdm(range(num), desc=f"cells -> {out.name}", unit="cell"):
        atoms = base.copy()
        atoms.numbers = rng.choice(ELEMENTS, size=len(atoms))
        atoms.positions += rng.normal(scale=0.05, size=atoms.positions.shape)
        graph = build(atoms, name=f"cell{i}")
        energy, forces = morse_labels(graph)
        graph.y_energy = torch.tensor(energy, dtype=torch.float64)
        graph.y_forces = torch.tensor(forces, dtype=torch.float32)
        u = rng.random()
        writer.add(graph, "trainset" if u < 0.8 else ("valset" if u < 0.9 else "testset"))
    write_index(out, heads, "hydragnn", {"cutoff": 5.0, "source": "bench.data_scale"}, writer.finish())


TRIAL_CONFIG = {"NeuralNetwork": {
    "Architecture": {"mpnn_type": "GIN", "hidden_dim": 32, "num_conv_layers": 2,
                     "output_heads": {"graph": {"num_sharedlayers": 1, "dim_sharedlayers": 16,
                                                "num_headlayers": 1, "dim_headlayers": [16]}}},
    "Variables_of_interest": {"input_node_features": [0], "output_names": ["energy"], "output_index": [0],
                              "output_dim": [1], "type": ["graph"]},
    "Training": {"num_epoch": 1, "batch_size": 32, "Optimizer": {"learning_rate": 0.001}}}}


def startup(datasets: list[Path], budget_s: float, work: Path) -> None:
    """Launch-to-first-batch seconds and peak RSS of one trial per dataset and preload mode."""
    work.mkdir(parents=True, exist_ok=True)
    print(f"{'dataset':<22}{'graphs':>10}{'preload':>9}{'launch -> 1st batch s':>24}{'trial start-up s':>18}"
          f"{'peak RSS MB':>13}")
    for data in datasets:
        graphs = _graphs(data)
        for preload in (False, "auto"):
            cfg = json.loads(json.dumps(TRIAL_CONFIG))
            cfg["NeuralNetwork"]["Training"]["preload"] = preload
            cfg_path = work / f"cfg_{preload}.json"
            cfg_path.write_text(json.dumps(cfg))
            run = work / f"{data.name}_{preload}"
            subprocess.run(["rm", "-rf", str(run)], check=True)
            t0 = time.time()
            subprocess.run([sys.executable, "-m", "hydragnn_ensemble", "train", str(cfg_path), "--dataset", str(data),
                            "-o", str(run), "--device", "cpu", "--no-progress", "--time-budget", str(budget_s)],
                           check=True, capture_output=True)
            log = (run / "train.log").read_text()
            first = _first_batch(log)
            launch = _log_time(log, "first training batch") - t0
            rss = json.loads((run / "result.json").read_text())["peak_memory_mb"]
            print(f"{data.name:<22}{graphs:>10}{str(preload):>9}{launch:>24.2f}{first:>18.2f}{rss:>13.0f}")


def _graphs(data: Path) -> int:
    from graph_builders.store import open_dataset

    with open_dataset(data) as store:
        return sum(store.num_graphs(s) for s in store.split_names)


def _first_batch(log: str) -> float:
    match = re.search(r"first training batch after ([0-9.]+) s", log)
    if match is None:
        raise RuntimeError("the trainer's log has no first batch")
    return float(match.group(1))


def _log_time(log: str, marker: str) -> float:
    """The wall time of the log line holding ``marker`` (the log stamps seconds)."""
    line = next(line for line in log.splitlines() if marker in line)
    return time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))


def loader(data: Path, batches: int, rounds: int) -> None:
    """Streamed loader vs raw bulk read vs graph-by-graph reads, graphs/s (medians of ``rounds``),
    reading the fields of energy-only heads and those of an interatomic potential (geometry)."""
    from graph_builders.store import open_dataset

    single = []
    with open_dataset(data) as store:
        for r in range(rounds):
            idx = np.random.default_rng(r).integers(0, store.num_graphs("trainset"), 400)
            t0 = time.perf_counter()
            for i in idx.tolist():
                store.get("trainset", i)
            single.append(len(idx) / (time.perf_counter() - t0))
    g = float(np.median(single))
    print(f"{data.name}: graph by graph (GraphStore.get, every field) {g:,.0f} graphs/s")
    for geometry, what in ((False, "energy heads"), (True, "potential (+ cell, shifts, edge_attr)")):
        s, nbytes, keys = _loader_rate(data, batches, rounds, geometry)
        w = float(np.median([_raw_rate(data, keys) for _ in range(rounds)]))
        print(f"  {what}: streamed loader {s:,.0f} graphs/s ({1e6 / s:.1f} us per graph, {nbytes / 1e3:.1f} kB); "
              f"raw bulk ADIOS2 read of the same fields {w:,.0f} graphs/s (ratio {s / w:.2f}); "
              f"loader / graph by graph {s / g:.1f}x")


def fit(datasets: list[Path], batches: int, rounds: int, write: bool) -> None:
    """Streamed loader seconds per graph against stored bytes per graph over ``datasets``, fitted
    as ``per_graph_s + per_byte_s x bytes`` (least squares), and the seconds to open a dataset and
    read its facts: the costs :mod:`scheduler.data_cost` charges; ``write``: into its JSON file."""
    from scheduler.data_cost import DATA_COST_FILE

    sizes, seconds, opens = [], [], []
    for data in datasets:
        rate, nbytes, _ = _loader_rate(data, batches, rounds, geometry=True)
        sizes.append(nbytes)
        seconds.append(1.0 / rate)
        opens.append(_open_seconds(data, rounds))
    design = np.column_stack([np.ones(len(sizes)), sizes])
    (per_graph, per_byte), *_ = np.linalg.lstsq(design, np.asarray(seconds), rcond=None)
    record = {"measured_by": "bench/data_scale.py fit " + " ".join(d.name for d in datasets),
              "date": time.strftime("%Y-%m-%d"), "open_s": float(np.median(opens)),
              "per_graph_s": max(0.0, float(per_graph)), "per_byte_s": max(0.0, float(per_byte))}
    for data, b, sec in zip(datasets, sizes, seconds):
        print(f"  {data.name}: {b / 1e3:.1f} kB per graph, {sec * 1e6:.1f} us per graph streamed")
    print(json.dumps(record, indent=1))
    if write:
        DATA_COST_FILE.write_text(json.dumps(record, indent=1) + "\n")
        print(f"written to {DATA_COST_FILE}")


def _loader_rate(data: Path, batches: int, rounds: int, geometry: bool) -> tuple[float, float, list[str]]:
    """(graphs/s of the trainer's streamed loader over ``batches`` batches of 32, the median over
    rounds; stored bytes per graph; the keys it reads), reading a potential's fields or not."""
    import torch

    from hydragnn_ensemble.train.data import FieldSelection, StoreSource, epoch_batches, prepare_data

    torch.set_num_threads(1)
    source = StoreSource(data)
    fields = FieldSelection(tuple(h.key for h in source.heads), (0,), geometry, geometry)
    prepared = prepare_data(source, source.heads, fields, where=str(data), preload=False)
    split = prepared.splits["trainset"]
    rates = []
    for r in range(rounds):
        it = epoch_batches(prepared, 32, seed=r)
        t0, n, k, epoch = time.perf_counter(), 0, 0, 0
        while k < batches:  # as many epochs as it takes
            it.set_epoch(epoch)
            for batch in it:
                n, k = n + batch.num_graphs, k + 1
                if k == batches:
                    break
            epoch += 1
        rates.append(n / (time.perf_counter() - t0))
    return float(np.median(rates)), split.bytes_per_graph, split.keys


def _open_seconds(data: Path, rounds: int) -> float:
    """Seconds to open a dataset and read its facts (what every trial does at start)."""
    from graph_builders.store import dataset_facts, open_dataset

    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        with open_dataset(data) as store:
            dataset_facts(store)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _raw_rate(data: Path, keys: list[str]) -> float:
    """Graphs/s of reading, whole with ADIOS2, the training split's variables the loader reads for
    ``keys`` (the same bytes; the first shard of a sharded dataset)."""
    import adios2

    from graph_builders.store import GraphStore, is_sharded

    path = sorted(data.glob("*.bp"))[0] if is_sharded(data) else data
    with GraphStore(path) as store:
        stored = store.stored_keys("trainset", keys)
        n = store.num_graphs("trainset")
    with adios2.FileReader(str(path)) as f:
        t0 = time.perf_counter()
        for key in stored:
            f.read(f"trainset/{key}")
        return n / (time.perf_counter() - t0)


def balance(data: Path, steps: int, repeats: int = 3) -> None:
    """Per-step time imbalance (max/mean over two processes) of work- and count-balanced shares."""
    import torch

    from hydragnn_ensemble.config import config_from_dict
    from hydragnn_ensemble.train.trainer import prepare_trial
    from hydragnn_ensemble.train.data import open_source
    from hydragnn_ensemble.train.batches import EpochBatches
    from hydragnn_ensemble.model import build_model

    torch.set_num_threads(1)
    cfg = json.loads(json.dumps(TRIAL_CONFIG))
    source = open_source(data)
    heads = source.heads
    voi = cfg["NeuralNetwork"]["Variables_of_interest"]
    first = heads.names[0]
    voi.update(output_names=[first], output_index=[0], output_dim=[heads[first].dim], type=[heads[first].level])
    cfg["NeuralNetwork"]["Architecture"].update(mpnn_type="SchNet", hidden_dim=64, num_conv_layers=3)
    inputs = prepare_trial(config_from_dict(cfg), source, str(data))
    model = build_model(inputs.spec)
    split = inputs.data.splits["trainset"]
    print(f"{data}: SchNet hidden 64, 3 layers, batch 32, two processes' shares of the same global batches "
          f"(each share's forward + backward timed as the best of {repeats})")

    def seconds(part) -> float:
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = model(part)
            sum(v.float().pow(2).mean() for v in out.values()).backward()
            best = min(best, time.perf_counter() - t0)
        return best

    for mode in ("count", "cost", "noise"):  # noise: the first share against itself (the timing floor)
        shares = [EpochBatches(split, 32, rank=r, world_size=2, seed=1, balance=mode if mode != "noise" else "cost")
                  for r in range(2)]
        ratios: list[float] = []
        epoch = 0
        while len(ratios) < steps:
            for share in shares:
                share.set_epoch(epoch)
            for parts in zip(*shares):
                times = [seconds(part) for part in (parts if mode != "noise" else (parts[0], parts[0]))]
                ratios.append(max(times) / (sum(times) / len(times)))
            epoch += 1
        label = f"{mode}-balanced" if mode != "noise" else "one share twice"
        print(f"  {label:>15}: per-step max/mean time over 2 processes: median {np.median(ratios):.3f}, "
              f"p90 {np.quantile(ratios, 0.9):.3f} over {len(ratios)} steps")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.data_scale", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("--num", type=int, required=True)
    p.add_argument("-o", "--output", type=Path, required=True)
    p.add_argument("--shard-size", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("startup")
    p.add_argument("datasets", nargs="+", type=Path)
    p.add_argument("--budget", type=float, default=15.0)
    p.add_argument("--work", type=Path, default=Path("bench/out/data_scale"))
    p = sub.add_parser("loader")
    p.add_argument("dataset", type=Path)
    p.add_argument("--batches", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p = sub.add_parser("fit")
    p.add_argument("datasets", nargs="+", type=Path)
    p.add_argument("--batches", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--write", action="store_true", help="into scheduler/data_cost.json")
    p = sub.add_parser("balance")
    p.add_argument("dataset", type=Path)
    p.add_argument("--steps", type=int, default=40)
    args = parser.parse_args(argv)
    if args.command == "make":
        make(args.num, args.output, args.shard_size, args.seed)
    elif args.command == "startup":
        startup(args.datasets, args.budget, args.work)
    elif args.command == "loader":
        loader(args.dataset, args.batches, args.rounds)
    elif args.command == "fit":
        fit(args.datasets, args.batches, args.rounds, args.write)
    else:
        balance(args.dataset, args.steps)


if __name__ == "__main__":
    main()
