"""The cost model's analytic anchors, measured on the current trainer (issue #27).

For each mpnn_type and three shapes (hidden 64 x 3 conv layers, hidden 8 x 1 and hidden 8 x 3;
batch 32), a fresh worker process (one torch thread, as a campaign's trials) builds the trainer on
64-atom EMT alloy graphs at 5 A and times, after one warm-up epoch, ``repeats`` epochs as
``Trainer.fit`` runs them: the training pass (``train_epoch``) and the validation pass
(``evaluate("valset")``). Per type the three training times per graph give, by non-negative least
squares, the cost model's terms (``scheduler.cost_anchors.TypeRates``): seconds per analytic FLOP,
and the fixed seconds per batch and per batch and layer (what small models are made of: the FLOP
count alone under-predicted the demo's smallest trials 30x). Prints them with the training graphs/s
at hidden 64 x 3 (now in ``scheduler/cost_anchors.json`` and measured) and an epoch over its
training pass; ``--write`` replaces the file (the epoch-over-training figure: the median over all
runs).

For the types that can be interatomic potentials (``needs_geometry``), hidden 64 x 3 and hidden
8 x 1 also train as potentials (energy, stress and forces, ``compute_grad_energy``) and with those
three heads predicted directly: the median ratio is the type's ``potential_factor`` (a potential's
loss differentiates its forces and stress, themselves derivatives of the energy: a second backward
pass).

    .venv/bin/python bench/cost_anchors.py [--num-graphs 256] [--repeats 3] [--types GIN,SchNet]
        [--factors-only] [--write]

``--factors-only`` measures the potential factors alone and keeps the file's rates.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# bench/ holds scripts named like our packages (bench/graph_builders.py): import the packages only
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from scheduler.cost_anchors import ANCHORS_FILE, TypeRates, load_anchors  # noqa: E402
from scheduler.dataset_stats import DatasetStats  # noqa: E402
from scheduler.flop_model import MPNN_COSTS, graph_flops  # noqa: E402

SHAPES = ((64, 3), (8, 1), (8, 3))  # (hidden, conv layers); the first is the reference shape
FACTOR_SHAPES = ((64, 3), (8, 1))  # where a potential's training is compared with direct heads
BATCH = 32
#: the alloy data's heads, as the demo's potential config (examples/alloy/potential.json) reads them
POTENTIAL_HEADS = {"input_node_features": [0], "output_names": ["formation_energy", "stress", "forces"],
                   "output_index": [0, 1, 2], "output_dim": [1, 6, 3], "type": ["graph", "graph", "node"]}


def _bench_training():
    """bench/training.py as a module (its dataset and config of the same shape)."""
    spec = importlib.util.spec_from_file_location("bench_training", HERE / "training.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker(args: argparse.Namespace) -> None:
    """One (mpnn_type, hidden, layers): prints one JSON line with its training seconds per graph
    and epoch/training ratio."""
    import torch

    from hydragnn_ensemble.config import config_from_dict
    from hydragnn_ensemble.train.budget import TimeBudget
    from hydragnn_ensemble.train.data import open_source
    from hydragnn_ensemble.train.distributed import DistributedContext, ProcessGroup
    from hydragnn_ensemble.train.log import TrialLog
    from hydragnn_ensemble.train.trainer import Trainer, prepare_trial, resolve_device

    torch.set_num_threads(1)
    config = _bench_training().bench_config(args.type, args.hidden, BATCH)
    config["NeuralNetwork"]["Architecture"]["num_conv_layers"] = args.layers
    if args.heads in ("direct3", "potential"):
        config["NeuralNetwork"]["Variables_of_interest"] = dict(POTENTIAL_HEADS)
        config["NeuralNetwork"]["Architecture"]["output_heads"]["node"] = {
            "num_headlayers": 2, "dim_headlayers": [64, 64], "type": "mlp"}
        config["NeuralNetwork"]["Architecture"]["periodic_boundary_conditions"] = True
        config["NeuralNetwork"]["Training"]["compute_grad_energy"] = args.heads == "potential"
    cfg = config_from_dict(config)
    device = resolve_device("cpu", DistributedContext())
    source = open_source(args.data)
    try:
        inputs = prepare_trial(cfg, source, str(args.data))
    finally:
        source.close()
    run_dir = Path(tempfile.mkdtemp())
    trainer = Trainer(inputs, run_dir, device=device, pg=ProcessGroup(DistributedContext(), device),
                      log=TrialLog(run_dir, enabled=False), budget=TimeBudget(None), progress=False)
    train_s, val_s = [], []
    for epoch in range(args.repeats + 1):  # epoch 0 warms up
        t0 = time.perf_counter()
        trainer.train_epoch(epoch)
        t1 = time.perf_counter()
        trainer.evaluate("valset")
        t2 = time.perf_counter()
        if epoch:
            train_s.append(t1 - t0)
            val_s.append(t2 - t1)
    n = inputs.data.num_graphs("trainset")
    med = statistics.median
    print(json.dumps({"type": args.type, "hidden": args.hidden, "layers": args.layers, "train_graphs": n,
                      "s_per_graph": med(train_s) / n, "epoch_over_train": (med(train_s) + med(val_s)) / med(train_s)}))


def fit_rates(mpnn_type: str, runs: list[dict], stats: DatasetStats) -> TypeRates:
    """Non-negative least squares of seconds per graph on [FLOPs, 1/batch, layers/batch] (relative
    errors: each row divided by its time)."""
    from scipy.optimize import nnls

    rows, rhs = [], []
    for r in runs:
        flops = graph_flops(mpnn_type, r["hidden"], r["layers"], 1, stats.mean_nodes, stats.mean_edges)
        rows.append([flops / r["s_per_graph"], 1.0 / BATCH / r["s_per_graph"], r["layers"] / BATCH / r["s_per_graph"]])
        rhs.append(1.0)
    (per_flop, batch_s, layer_s), _ = nnls(rows, rhs)
    return TypeRates(per_flop, batch_s, layer_s)


def _run_worker(mpnn_type: str, data: Path, hidden: int, layers: int, repeats: int, heads: str) -> dict:
    """One fresh worker process's JSON line (``worker``); RuntimeError with its stderr on failure."""
    out = subprocess.run([sys.executable, __file__, "--worker", "--type", mpnn_type, "--data", str(data),
                          "--hidden", str(hidden), "--layers", str(layers), "--repeats", str(repeats),
                          "--heads", heads], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{mpnn_type} h{hidden} L{layers} {heads}: worker failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def potential_factors(types: list[str], data: Path, repeats: int) -> dict[str, float]:
    """Per type that can be a potential: the median over ``FACTOR_SHAPES`` of a potential's training
    seconds per graph over the same three heads predicted directly (printed as measured)."""
    from hydragnn_ensemble.model.layers import layer_class

    factors = {}
    for mpnn_type in types:
        if not layer_class(mpnn_type).needs_geometry:
            continue
        ratios = []
        for hidden, layers in FACTOR_SHAPES:
            direct = _run_worker(mpnn_type, data, hidden, layers, repeats, "direct3")["s_per_graph"]
            potential = _run_worker(mpnn_type, data, hidden, layers, repeats, "potential")["s_per_graph"]
            ratios.append(potential / direct)
            print(f"{mpnn_type:7s} h{hidden} x {layers}: potential {1 / potential:7.1f} graphs/s, "
                  f"direct heads {1 / direct:7.1f} graphs/s: x{potential / direct:.2f}", flush=True)
        factors[mpnn_type] = round(max(1.0, statistics.median(ratios)), 3)
    return factors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-graphs", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--types", default=",".join(sorted(MPNN_COSTS)))
    ap.add_argument("--write", action="store_true", help=f"replace {ANCHORS_FILE.name} with the figures measured")
    ap.add_argument("--factors-only", action="store_true", help="measure the potential factors alone, keep the rates")
    ap.add_argument("--heads", default="anchor", choices=("anchor", "direct3", "potential"), help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--type", help=argparse.SUPPRESS)
    ap.add_argument("--hidden", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--layers", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    types = [t for t in args.types.split(",") if t]
    unknown = sorted(set(types) - set(MPNN_COSTS))
    if unknown:
        ap.error(f"unknown --types {unknown}; known: {sorted(MPNN_COSTS)}")
    now = load_anchors()
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "anchor.bp"
        _bench_training().make_dataset(data, args.num_graphs)
        stats = DatasetStats.from_store(str(data))
        try:
            factors = {**now.potential_factor, **potential_factors(types, data, args.repeats)}
            for mpnn_type in ([] if args.factors_only else types):
                for hidden, layers in SHAPES:
                    runs.setdefault(mpnn_type, []).append(
                        _run_worker(mpnn_type, data, hidden, layers, args.repeats, "anchor"))
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
    print(f"potential factors: {factors}")
    if args.factors_only:
        if args.write:
            record = json.loads(ANCHORS_FILE.read_text())
            record["potential_factor"] = dict(sorted(factors.items()))
            ANCHORS_FILE.write_text(json.dumps(record, indent=1) + "\n")
            print(f"wrote the potential factors into {ANCHORS_FILE}")
        return 0
    print(f"graphs: {stats.mean_nodes:.1f} nodes, {stats.mean_edges:.0f} edges; batch {BATCH}; one thread")
    print(f"{'type':7s} {'h64x3 g/s now':>13s} {'measured':>9s} {'fit err':>8s} {'s/GFLOP':>8s} "
          f"{'ms/batch':>9s} {'ms/batch/layer':>15s} {'epoch/train':>12s}")
    rates = dict(now.rates)
    for mpnn_type, measured in runs.items():
        fit = fit_rates(mpnn_type, measured, stats)
        rates[mpnn_type] = fit
        ref = measured[0]
        before = 1.0 / now.rates[mpnn_type].seconds_per_graph(mpnn_type, ref["hidden"], ref["layers"], BATCH, 1, stats)
        err = max(abs(math.log(fit.seconds_per_graph(mpnn_type, r["hidden"], r["layers"], BATCH, 1, stats)
                               / r["s_per_graph"])) for r in measured)
        print(f"{mpnn_type:7s} {before:13.1f} {1.0 / ref['s_per_graph']:9.1f} {err:8.3f} {fit.seconds_per_flop * 1e9:8.3f} "
              f"{fit.batch_s * 1e3:9.2f} {fit.layer_s * 1e3:15.2f} "
              f"{statistics.median(r['epoch_over_train'] for r in measured):12.2f}")
    if args.write:
        record = {
            "measured_by": "bench/cost_anchors.py", "date": datetime.date.today().isoformat(),
            "machine": f"{platform.machine()} {platform.processor() or platform.platform()}, 1 torch thread",
            "graphs": {"mean_nodes": round(stats.mean_nodes, 1), "mean_edges": round(stats.mean_edges, 1),
                       "train_graphs": runs[types[0]][0]["train_graphs"], "batch_size": BATCH},
            "rates": {t: {"seconds_per_gflop": r.seconds_per_flop * 1e9, "batch_s": r.batch_s, "layer_s": r.layer_s}
                      for t, r in sorted(rates.items())},
            "epoch_over_train": round(statistics.median(r["epoch_over_train"] for m in runs.values() for r in m), 3),
            "potential_factor": dict(sorted(factors.items())),
        }
        ANCHORS_FILE.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {ANCHORS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
