"""Training throughput: our trainer vs a minimal hand-written loop, and HydraGNN's CPU anchors.

For each mpnn_type and hidden size (3 conv layers, graph head 2x64 shared + 2x64, batch 32, one
thread, 64-atom EMT alloy graphs at 5 A), a fresh worker process builds the trainer's model and
loader and times, alternately, ``Trainer.train_epoch`` (exactly what ``train_trial`` runs per
epoch) and a minimal loop over the *same loader* with an identically initialised model
(forward, MSE on normalised target, backward, AdamW step). Prints graphs/s (median of repeats),
trainer overhead %, peak RSS of the worker, and HydraGNN's figures from ANCHORS.md.

    .venv/bin/python bench/training.py [--num-graphs 256] [--types GIN,PNA,SchNet,PaiNN]
        [--hidden 64,128] [--repeats 3] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# bench/ also holds scripts named like our packages (bench/graph_builders.py): import the packages
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

# HydraGNN, one CPU thread, 2,000 64-atom alloys, batch 32, 3 layers (ANCHORS.md): graphs/s
ANCHORS = {
    64: {"GIN": 1208, "SchNet": 121, "PNA": 64, "PaiNN": 27, "EGNN": 86},
    128: {"GIN": 281, "SchNet": 25, "PNA": 15, "PaiNN": 11},
}
ANCHOR_RSS_GB = {"GIN": 0.85, "SchNet": 1.43, "PNA": 1.43, "PaiNN": 1.76, "EGNN": 1.49}


def bench_config(mpnn_type: str, hidden: int, batch_size: int) -> dict:
    return {
        "NeuralNetwork": {
            "Architecture": {
                "mpnn_type": mpnn_type, "hidden_dim": hidden, "num_conv_layers": 3, "radius": 5.0,
                "num_gaussians": 50, "edge_features": ["length"],
                "output_heads": {"graph": {"num_sharedlayers": 2, "dim_sharedlayers": 64,
                                           "num_headlayers": 2, "dim_headlayers": [64, 64]}},
            },
            "Variables_of_interest": {"input_node_features": [0], "output_names": ["formation_energy"],
                                      "type": ["graph"], "output_dim": [1]},
            "Training": {"num_epoch": 1, "batch_size": batch_size, "Optimizer": {"learning_rate": 1e-3},
                         "lr_schedule": "none"},
        }
    }


def make_dataset(path: Path, num_graphs: int) -> None:
    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.store import write_dataset

    data = make_alloy_dataset(num_structures=num_graphs, sizes=(64,), seed=0, progress=False)
    write_dataset(path, data.graphs, data.heads, splits=data.splits, metadata=data.metadata)


def _time_alternately(train_epoch, minimal_epoch, repeats: int, sync) -> tuple[list, list, list, list]:
    """Wall and CPU seconds of the trainer's epoch and the minimal loop, alternating which goes first
    (after one warm-up epoch of each): (ours, minimal, ours_cpu, minimal_cpu). Without a
    ``minimal_epoch``, the trainer's alone (its lists stay empty)."""
    ours, minimal, ours_cpu, minimal_cpu = [], [], [], []
    train_epoch(0)  # warm-up both
    if minimal_epoch is not None:
        minimal_epoch()
    for r in range(repeats):
        for which in ((0,) if minimal_epoch is None else (0, 1) if r % 2 == 0 else (1, 0)):
            sync()
            t, c = time.perf_counter(), time.process_time()
            if which == 0:
                train_epoch(r + 1)
            else:
                minimal_epoch()
            sync()
            (ours if which == 0 else minimal).append(time.perf_counter() - t)
            (ours_cpu if which == 0 else minimal_cpu).append(time.process_time() - c)
    return ours, minimal, ours_cpu, minimal_cpu


def _trainer(args: argparse.Namespace):
    """The trainer of the bench's config on ``args.data``, one thread, on ``args.device``."""
    import torch

    from hydragnn_ensemble.config import config_from_dict
    from hydragnn_ensemble.train.allocator import keep_freed_memory
    from hydragnn_ensemble.train.budget import TimeBudget
    from hydragnn_ensemble.train.data import open_source
    from hydragnn_ensemble.train.distributed import DistributedContext, ProcessGroup
    from hydragnn_ensemble.train.log import TrialLog
    from hydragnn_ensemble.train.trainer import Trainer, prepare_trial, resolve_device

    torch.set_num_threads(1)
    if not args.default_allocator:
        keep_freed_memory()  # as the train command does
    cfg = config_from_dict(bench_config(args.type, args.hidden_dim, args.batch_size))
    device = resolve_device(args.device, DistributedContext())
    source = open_source(args.data)
    try:
        inputs = prepare_trial(cfg, source, str(args.data))
    finally:
        source.close()
    run_dir = Path(tempfile.mkdtemp())
    return Trainer(inputs, run_dir, device=device, pg=ProcessGroup(DistributedContext(), device),
                   log=TrialLog(run_dir, enabled=False), budget=TimeBudget(None), progress=False)


def worker(args: argparse.Namespace) -> None:
    """One (mpnn_type, hidden) measurement; prints one JSON line."""
    import torch
    import torch.nn.functional as F

    from hydragnn_ensemble.model import build_model
    from hydragnn_ensemble.train.trainer import peak_memory_mb

    trainer = _trainer(args)
    device, prepared = trainer.device, trainer.data
    loader = trainer.train_loader
    n = prepared.num_graphs("trainset")
    if args.trainer_only:  # one model and one loop in the process, as in HydraGNN's (peak RSS alike)
        ours, _, ours_cpu, _ = _time_alternately(trainer.train_epoch, None, args.repeats, lambda: None)
        print(json.dumps({"type": args.type, "hidden": args.hidden_dim, "device": device.type, "train_graphs": n,
                          "params": trainer.num_parameters, "ours_gps": n / statistics.median(ours),
                          "ours_cpu_gps": n / statistics.median(ours_cpu), "ours_s": ours,
                          "peak_mb": peak_memory_mb(device)}))
        return
    torch.manual_seed(0)
    model = build_model(trainer.spec).to(device)
    model.load_state_dict(trainer.model.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    stats = prepared.normaliser["formation_energy"]
    mean, std = stats.mean.to(device), stats.std.to(device)

    def minimal_epoch() -> None:
        model.train()
        for batch in loader:
            batch = batch.to(device, non_blocking=True)
            out = model(batch)
            loss = F.mse_loss(out["formation_energy"], (batch.y_formation_energy - mean) / std)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    ours, minimal, ours_cpu, minimal_cpu = _time_alternately(trainer.train_epoch, minimal_epoch, args.repeats, sync)
    med = statistics.median
    print(json.dumps({
        "type": args.type, "hidden": args.hidden_dim, "device": device.type, "train_graphs": n,
        "params": trainer.num_parameters,
        "ours_gps": n / med(ours), "minimal_gps": n / med(minimal),
        "ours_cpu_gps": n / med(ours_cpu), "minimal_cpu_gps": n / med(minimal_cpu),
        "ours_s": ours, "minimal_s": minimal,
        "peak_mb": peak_memory_mb(device),
    }))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-graphs", type=int, default=256, help="alloy structures (80%% train)")
    p.add_argument("--types", default="GIN,PNA,SchNet,PaiNN")
    p.add_argument("--hidden", default="64,128")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--data", type=Path, default=None, help="existing alloy .bp (else generated)")
    p.add_argument("--default-allocator", action="store_true",
                   help="leave glibc's mmap threshold as it is (the train command raises it: faster, more RSS)")
    p.add_argument("--trainer-only", action="store_true", help=argparse.SUPPRESS)  # bench/hydragnn_anchor.py
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--type", help=argparse.SUPPRESS)
    p.add_argument("--hidden-dim", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return

    tmp = Path(tempfile.mkdtemp())
    data = args.data
    if data is None:
        data = tmp / "alloy.bp"
        t = time.perf_counter()
        make_dataset(data, args.num_graphs)
        print(f"generated {args.num_graphs} 64-atom alloys in {time.perf_counter() - t:.1f} s")
    devices = [args.device]
    rows = []
    for hidden in (int(h) for h in args.hidden.split(",")):
        for mpnn in args.types.split(","):
            for device in devices:
                cmd = [sys.executable, __file__, "--worker", "--type", mpnn, "--hidden-dim", str(hidden),
                       "--data", str(data), "--repeats", str(args.repeats), "--batch-size",
                       str(args.batch_size), "--device", device]
                out = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    print(f"{mpnn} h{hidden}: worker failed:\n{out.stderr[-2000:]}")
                    continue
                row = json.loads(out.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(f"  measured {mpnn} h{hidden} on {device}", flush=True)

    print(f"\nTraining throughput, one thread, batch {args.batch_size}, 3 layers, 64-atom alloys "
          f"(median of {args.repeats}; 'cpu' columns: graphs per CPU-second of this process, robust "
          f"on a shared machine; 'wall': graphs per wall-second):")
    head = (f"{'mpnn':8s} {'hidden':>6s} {'dev':>4s} {'params':>8s} {'ours cpu':>9s} {'min cpu':>9s} "
            f"{'overhead':>9s} {'ours wall':>9s} {'min wall':>9s} {'HydraGNN':>9s} {'x HydraGNN':>10s} "
            f"{'peak MB':>8s} {'HydraGNN RSS':>12s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        anchor = ANCHORS.get(r["hidden"], {}).get(r["type"])
        gps = r["ours_cpu_gps"] if r["device"] == "cpu" else r["ours_gps"]
        base = r["minimal_cpu_gps"] if r["device"] == "cpu" else r["minimal_gps"]
        overhead = (base / gps - 1.0) * 100.0
        ratio = f"{gps / anchor:10.2f}" if anchor and r["device"] == "cpu" else f"{'-':>10s}"
        rss = ANCHOR_RSS_GB.get(r["type"]) if r["hidden"] == 64 else None
        print(f"{r['type']:8s} {r['hidden']:6d} {r['device']:>4s} {r['params']:8d} {r['ours_cpu_gps']:9.1f} "
              f"{r['minimal_cpu_gps']:9.1f} {overhead:8.1f}% {r['ours_gps']:9.1f} {r['minimal_gps']:9.1f} "
              f"{anchor or '-':>9} {ratio} {r['peak_mb']:8.0f} {(str(rss) + ' GB') if rss else '-':>12s}")
    print("overhead = minimal-loop graphs/s over trainer graphs/s - 1 (CPU time on cpu; goal <= 5%)")


if __name__ == "__main__":
    main()
