"""Training throughput against HydraGNN itself, in the same run, on the same graphs.

    bash interop/setup_hydragnn.sh PATH/TO/HydraGNN .venv-hydragnn   # once (needs an MPI-enabled adios2)
    .venv/bin/python -m bench.hydragnn_anchor --hydragnn-python .venv-hydragnn/bin/python
        [--num-graphs 256] [--types GIN,SchNet,PNA,EGNN,PaiNN] [--hidden 64] [--epochs 5] [--repeats 2]

One dataset file (64-atom EMT alloys at 5 A with periodic images, one graph head: formation energy)
is read by both programs: ours through our loader, HydraGNN's through its ``AdiosDataset``
(preloaded). For each layer the same HydraGNN config (``bench/training.py``'s: 3 conv layers,
``--hidden``, graph head 2x64 shared + 2x64, batch 32, edge feature ``length``) trains one thread
per process, alternately ours (``bench/training.py --worker``: ``Trainer.train_epoch``) and
HydraGNN's (``interop/hydragnn_throughput.py``: its ``train``) ``--repeats`` times. Printed:
parameter counts, training graphs per CPU-second (ours: median over its repeats; HydraGNN: median
of epochs 2..N), the ratio and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ROOT = Path(__file__).resolve().parents[1]
HYDRAGNN_NAMES = {"PaiNN": "PAINN"}


def make_dataset(path: Path, num_graphs: int) -> None:
    """64-atom alloys with the formation-energy head only (HydraGNN's ``y`` is the config's heads)."""
    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.schema import HeadRegistry
    from graph_builders.store import write_dataset

    data = make_alloy_dataset(num_structures=num_graphs, sizes=(64,), components=(2, 3), seed=0, progress=False)
    heads = HeadRegistry.of([data.heads["formation_energy"]])
    graphs = []
    for g in data.graphs:
        for key in [k for k in g.keys() if k.startswith("y_") and k != "y_formation_energy"]:
            del g[key]
        graphs.append(g)
    write_dataset(path, graphs, heads, splits=data.splits, metadata=data.metadata)


def ours(layer: str, hidden: int, data: Path, repeats: int, default_allocator: bool) -> dict:
    cmd = [sys.executable, str(ROOT / "bench" / "training.py"), "--worker", "--type", layer, "--hidden-dim",
           str(hidden), "--data", str(data), "--repeats", str(repeats), "--batch-size", "32", "--device", "cpu"]
    if default_allocator:
        cmd.append("--default-allocator")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def theirs(python: Path, layer: str, hidden: int, data: Path, epochs: int, workdir: Path) -> dict:
    from bench.training import bench_config
    from ensemble.export import for_hydragnn

    config = for_hydragnn(bench_config(HYDRAGNN_NAMES.get(layer, layer), hidden, 32))
    if layer == "GIN":  # HydraGNN refuses edge features for GIN; ours has none either (no edge term)
        del config["NeuralNetwork"]["Architecture"]["edge_features"]
    path = workdir / f"{layer}_{hidden}.json"
    path.write_text(json.dumps(config))
    cmd = [str(python), str(ROOT / "interop" / "hydragnn_throughput.py"), str(data), str(path), "--epochs", str(epochs)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"HydraGNN {layer}: {out.stderr[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hydragnn-python", type=Path, required=True)
    parser.add_argument("--num-graphs", type=int, default=256)
    parser.add_argument("--types", default="GIN,SchNet,PNA,EGNN,PaiNN")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--default-allocator", action="store_true",
                        help="ours without the train command's glibc mmap threshold (less RSS, slower)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="hydragnn_anchor_"))
    data = workdir / "alloy64.bp"
    make_dataset(data, args.num_graphs)
    print(f"{'layer':7s} {'params ours':>11s} {'HydraGNN':>9s} {'gps ours':>9s} {'HydraGNN':>9s} {'ratio':>6s} "
          f"{'RSS MB ours':>11s} {'HydraGNN':>9s}   (graphs per CPU-second, one thread)")
    for layer in args.types.split(","):
        mine, other = [], []
        for r in range(args.repeats):
            runs = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
            for who in runs:
                if who == "ours":
                    mine.append(ours(layer, args.hidden, data, 2, args.default_allocator))
                else:
                    try:
                        other.append(theirs(args.hydragnn_python, layer, args.hidden, data, args.epochs, workdir))
                    except RuntimeError as exc:
                        print(f"{layer:7s} {exc}")
        if not other:
            continue
        gps_ours = statistics.median(m["ours_cpu_gps"] for m in mine)
        gps_theirs = statistics.median(o["train_graphs"] / c for o in other for c in o["cpu_s"][1:])
        print(f"{layer:7s} {mine[0]['params']:11d} {other[0]['params']:9d} {gps_ours:9.1f} {gps_theirs:9.1f} "
              f"{gps_ours / gps_theirs:6.2f} {max(m['peak_mb'] for m in mine):11.0f} "
              f"{max(o['peak_mb'] for o in other):9.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
