"""Training throughput against HydraGNN itself, in the same run, on the same graphs.

    bash interop/setup_hydragnn.sh PATH/TO/HydraGNN .venv-hydragnn   # once (needs an MPI-enabled adios2)
    .venv/bin/python -m bench.hydragnn_anchor --hydragnn-python .venv-hydragnn/bin/hydragnn-python
        [--num-graphs 256] [--types GIN,SchNet,PNA,EGNN,PaiNN] [--hidden 64 128] [--arms default keep]
        [--epochs 5] [--repeats 2]

One dataset file (64-atom EMT alloys at 5 A with periodic images, one graph head: formation energy)
is read by both programs: ours through our loader, HydraGNN's through its ``AdiosDataset``
(preloaded). For each layer the same HydraGNN config (``bench/training.py``'s: 3 conv layers,
``--hidden``, graph head 2x64 shared + 2x64, batch 32, edge feature ``length``) trains one thread
per process, alternately ours (``bench/training.py --worker``: ``Trainer.train_epoch``) and
HydraGNN's (``interop/hydragnn_throughput.py``: its ``train``) ``--repeats`` times, in two arms
with the same process settings on both sides: glibc's malloc as it comes (``default``), and with
its mmap and trim thresholds raised through the environment (``keep``: what our ``train`` command
sets in-process; here our code does not set it, the environment does, for both). Printed per arm:
parameter counts, training graphs per CPU-second and per wall second (ours: the median of its
epochs 2..N after a warm-up epoch, one model and one training loop in the process; HydraGNN: the
median of its epochs 2..N), the ratios, peak RSS and the threads HydraGNN's process ran torch with.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ROOT = Path(__file__).resolve().parents[1]
HYDRAGNN_NAMES = {"PaiNN": "PAINN"}


def make_dataset(path: Path, num_graphs: int, sizes: tuple[int, ...] = (64,), seed: int = 0,
                 fractions: tuple[float, ...] | None = None) -> None:
    """Alloys (64 atoms) with the formation-energy head only (HydraGNN's ``y`` is the config's heads),
    in the generator's splits or, with ``fractions``, split anew."""
    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.schema import HeadRegistry
    from graph_builders.store import write_dataset

    data = make_alloy_dataset(num_structures=num_graphs, sizes=sizes, components=(2, 3), seed=seed, progress=False)
    heads = HeadRegistry.of([data.heads["formation_energy"]])
    graphs = []
    for g in data.graphs:
        for key in [k for k in g.keys() if k.startswith("y_") and k != "y_formation_energy"]:
            del g[key]
        graphs.append(g)
    if fractions is None:
        write_dataset(path, graphs, heads, splits=data.splits, metadata=data.metadata)
    else:
        write_dataset(path, graphs, heads, metadata=data.metadata, seed=seed, fractions=fractions)


#: glibc's malloc settings of the ``keep`` arm, for both programs alike (what the ``train``
#: command sets in-process with mallopt, ``hydragnn_ensemble/train/allocator.py``)
KEEP_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
ARMS = ("default", "keep")


def _env(arm: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    return {**env, **KEEP_ENV} if arm == "keep" else env


def ours(layer: str, hidden: int, data: Path, repeats: int, arm: str) -> dict:
    """Our trainer's epoch (``bench/training.py --worker --trainer-only``: one model, one loop, as
    HydraGNN's process), the allocator set by the arm's environment only (never by our own code):
    graphs per CPU-second and per wall second."""
    cmd = [sys.executable, str(ROOT / "bench" / "training.py"), "--worker", "--type", layer, "--hidden-dim",
           str(hidden), "--data", str(data), "--repeats", str(repeats), "--batch-size", "32", "--device", "cpu",
           "--default-allocator", "--trainer-only"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=_env(arm))
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return {"params": got["params"], "cpu_gps": got["ours_cpu_gps"], "wall_gps": got["ours_gps"],
            "peak_mb": got["peak_mb"], "threads": 1}


def theirs(python: Path, layer: str, hidden: int, data: Path, epochs: int, workdir: Path, arm: str) -> dict:
    """HydraGNN's own ``train`` epoch on the same file and config, in the arm's environment:
    the median of its epochs 2..N."""
    from bench.training import bench_config
    from ensemble.export import for_hydragnn

    config = for_hydragnn(bench_config(HYDRAGNN_NAMES.get(layer, layer), hidden, 32))
    if layer == "GIN":  # HydraGNN refuses edge features for GIN; ours has none either (no edge term)
        del config["NeuralNetwork"]["Architecture"]["edge_features"]
    path = workdir / f"{layer}_{hidden}.json"
    path.write_text(json.dumps(config))
    cmd = [str(python), str(ROOT / "interop" / "hydragnn_throughput.py"), str(data), str(path), "--epochs", str(epochs)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(arm))
    if out.returncode != 0:
        raise RuntimeError(f"HydraGNN {layer}: {out.stderr[-1500:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    n = got["train_graphs"]
    return {"params": got["params"], "cpu_gps": statistics.median(n / c for c in got["cpu_s"][1:]),
            "wall_gps": statistics.median(n / w for w in got["wall_s"][1:]), "peak_mb": got["peak_mb"],
            "threads": got.get("threads")}


def measure(args: argparse.Namespace, layer: str, hidden: int, arm: str, data: Path, workdir: Path) -> None:
    """``--repeats`` interleaved runs of both programs; one printed row of medians."""
    mine, other = [], []
    for r in range(args.repeats):
        for who in (("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")):
            if who == "ours":
                mine.append(ours(layer, hidden, data, max(1, args.epochs - 1), arm))  # as many epochs as HydraGNN
                continue
            try:
                other.append(theirs(args.hydragnn_python, layer, hidden, data, args.epochs, workdir, arm))
            except RuntimeError as exc:
                print(f"{layer:7s} {exc}")
    if not other:
        return
    med = lambda rows, key: statistics.median(x[key] for x in rows)  # noqa: E731
    cpu_o, cpu_t, wall_o, wall_t = med(mine, "cpu_gps"), med(other, "cpu_gps"), med(mine, "wall_gps"), med(other, "wall_gps")
    print(f"{layer:7s} {hidden:6d} {arm:8s} {mine[0]['params']:8d} {other[0]['params']:8d} {cpu_o:8.1f} {cpu_t:8.1f} "
          f"{cpu_o / cpu_t:6.2f} {wall_o:8.1f} {wall_t:8.1f} {wall_o / wall_t:6.2f} "
          f"{max(m['peak_mb'] for m in mine):7.0f} {max(o['peak_mb'] for o in other):7.0f} {other[0]['threads']}",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hydragnn-python", type=Path, required=True)
    parser.add_argument("--num-graphs", type=int, default=256)
    parser.add_argument("--types", default="GIN,SchNet,PNA,EGNN,PaiNN")
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="hydragnn_anchor_"))
    data = workdir / "alloy64.bp"
    make_dataset(data, args.num_graphs)
    print("graphs per CPU-second and per wall second of training, one thread each; arm: glibc malloc as "
          "default, or keep (mmap/trim thresholds 1 GiB) for both programs")
    print(f"{'layer':7s} {'hidden':>6s} {'arm':8s} {'par ours':>8s} {'HydraGNN':>8s} {'cpu ours':>8s} {'HydraGNN':>8s} "
          f"{'ratio':>6s} {'wallours':>8s} {'HydraGNN':>8s} {'ratio':>6s} {'RSS ours':>7s} {'HydraGNN':>7s} threads")
    for hidden in args.hidden:
        for layer in args.types.split(","):
            for arm in args.arms:
                measure(args, layer, hidden, arm, data, workdir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
