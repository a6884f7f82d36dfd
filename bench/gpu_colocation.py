"""Several trials on one device: the co-location curve (aggregate graphs/s of k trials at once) and
each trial's throughput, busy share and memory alone, per layer type and width.

Every trial is the real trial program (``hydragnn-ensemble train``, its own process, one torch
thread) on the same alloy dataset (formation energy; the anchor's generator, 32-48 atoms). Its
graphs/s are the training graphs over the median ``train_s`` of its epochs 2 to E-1 (the first
warms up, in the last the others may be gone). For k = 1, 2, 4, 8 copies of the small trial (the
demo's search space: SchNet, hidden 32, 2 layers, batch 32) start together; the curve is their
summed graphs/s over one alone, written as ``--out`` for ``simulate --colocation-curve``. On CUDA
``nvidia-smi`` is sampled every 0.5 s while a trial runs alone: its busy share (``utilization.gpu``,
median) and memory. Processes are time-sliced unless the machine runs NVIDIA MPS (``--mps`` records
that it does; this script does not start it).

    python -m bench.gpu_colocation [--device cuda] [--ks 1 2 4 8] [--alone SchNet:32 SchNet:128 ...]
                                   [--epochs 6] [--graphs 640] [--workdir DIR] [--out colocation.json]

On a CPU the same runs measure processes sharing the cores (a check that the script works, not a
GPU figure).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMALL = ("SchNet", 32, 2)  # a small trial of the demo's space: type, hidden, layers


def trial_config(mpnn_type: str, hidden: int, layers: int, epochs: int) -> dict:
    """A HydraGNN config of the alloy search space with the formation-energy head."""
    return {"NeuralNetwork": {
        "Architecture": {"mpnn_type": mpnn_type, "hidden_dim": hidden, "num_conv_layers": layers, "radius": 5.0,
                         "output_heads": {"graph": {"num_sharedlayers": 1, "dim_sharedlayers": hidden,
                                                    "num_headlayers": 1, "dim_headlayers": [hidden]}}},
        "Variables_of_interest": {"input_node_features": [0], "output_names": ["formation_energy"],
                                  "type": ["graph"], "output_dim": [1]},
        "Training": {"num_epoch": epochs, "batch_size": 32, "seed": 0, "Optimizer": {"learning_rate": 1e-3}}}}


class DeviceSampler:
    """``nvidia-smi`` busy share (%) and memory used (MiB) of GPU 0 every ``period`` seconds."""

    def __init__(self, period: float = 0.5) -> None:
        self.period = period
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "DeviceSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        command = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-i", "0"]
        while not self._stop.wait(self.period):
            out = subprocess.run(command, capture_output=True, text=True, check=False)
            fields = out.stdout.strip().split(",")
            if out.returncode == 0 and len(fields) == 2:
                self.samples.append((float(fields[0]), float(fields[1])))


def run_together(configs: list[Path], dataset: Path, work: Path, device: str) -> list[dict]:
    """Start one trial process per config at once; each one's graphs/s and peak memory."""
    procs = []
    for i, cfg in enumerate(configs):
        out = work / f"{cfg.stem}_{i}"
        shutil.rmtree(out, ignore_errors=True)
        command = [sys.executable, "-m", "hydragnn_ensemble", "train", str(cfg), "--dataset", str(dataset),
                   "-o", str(out), "--device", device, "--no-progress"]
        procs.append((out, subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            text=True)))
    rows = []
    for out, proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"trial in {out} exited {proc.returncode}: {err[-2000:]}")
        rows.append(_throughput(out, dataset))
    return rows


def _throughput(run_dir: Path, dataset: Path) -> dict:
    from graph_builders.store import GraphStore

    with GraphStore(dataset) as store:
        train_graphs = store.num_graphs("trainset")
    epochs = [json.loads(line) for line in (run_dir / "progress.jsonl").read_text().splitlines() if line.strip()]
    train_s = [e["train_s"] for e in epochs if e.get("train_s")]
    middle = train_s[1:-1] or train_s
    result = json.loads((run_dir / "result.json").read_text())
    return {"graphs_per_s": train_graphs / statistics.median(middle), "peak_memory_mb": result.get("peak_memory_mb"),
            "device": result.get("device")}


def measure(args: argparse.Namespace, work: Path) -> dict:
    """The trials alone per (type, width), then k copies of the small trial at once."""
    sys.path.insert(0, str(REPO))
    from bench.hydragnn_anchor import make_dataset

    dataset = work / "alloys.bp"
    if not dataset.exists():
        make_dataset(dataset, args.graphs, sizes=(32, 48), seed=5, fractions=(0.8, 0.1, 0.1))
    cuda = args.device == "cuda"
    alone = {}
    for spec in args.alone:
        mpnn_type, hidden = spec.split(":")
        cfg = work / f"{mpnn_type}_{hidden}.json"
        cfg.write_text(json.dumps(trial_config(mpnn_type, int(hidden), 3, args.epochs)))
        sampler = DeviceSampler() if cuda else None
        with sampler if sampler is not None else contextlib.nullcontext():
            row = run_together([cfg], dataset, work, args.device)[0]
        if sampler is not None and sampler.samples:
            row["busy_percent"] = statistics.median(s[0] for s in sampler.samples)
            row["device_memory_mb"] = max(s[1] for s in sampler.samples)
        alone[spec] = row
        print(f"alone {spec:12s} {row['graphs_per_s']:9.1f} graphs/s  busy {row.get('busy_percent', '-')}%  "
              f"peak {row['peak_memory_mb']} MB", flush=True)
    small = work / "small.json"
    small.write_text(json.dumps(trial_config(*SMALL, args.epochs)))
    totals = {}
    for k in args.ks:
        rows = run_together([small] * k, dataset, work, args.device)
        totals[k] = sum(r["graphs_per_s"] for r in rows)
        print(f"k={k}: {totals[k]:9.1f} graphs/s together ({totals[k] / totals[args.ks[0]]:.2f}x k={args.ks[0]})",
              flush=True)
    return {"alone": alone, "totals": totals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--alone", nargs="*", default=[f"{t}:{h}" for t in ("GIN", "PNA", "SchNet", "EGNN", "PaiNN")
                                                       for h in (32, 128)])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--graphs", type=int, default=640)
    parser.add_argument("--mps", action="store_true", help="the machine runs NVIDIA MPS (recorded in the output)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("colocation.json"))
    args = parser.parse_args(argv)
    if args.ks[0] != 1:
        parser.error("--ks must start with 1 (the curve is relative to one trial alone)")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        figures = measure(args, work)
    totals = figures["totals"]
    name = args.device
    if args.device == "cuda":
        import torch
        name = torch.cuda.get_device_name(0)
    out = {"aggregate": {str(k): totals[k] / totals[1] for k in args.ks},
           "source": f"bench/gpu_colocation.py on {name} ({'MPS' if args.mps else 'time-sliced'}), "
                     f"{time.strftime('%Y-%m-%d')}, small trial {SMALL[0]} hidden {SMALL[1]} x {SMALL[2]}",
           "graphs_per_s": {str(k): v for k, v in totals.items()}, "alone": figures["alone"]}
    args.out.write_text(json.dumps(out, indent=2))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
