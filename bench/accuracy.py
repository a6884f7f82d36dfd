"""Accuracy of each mpnn_type on the three demo datasets, against the mean predictor.

For every dataset (alloy, polycrystal, fem) and mpnn_type, trains the dataset's example config
(``examples/<dataset>/config.json``) with only ``mpnn_type`` (and the size options below) changed,
through ``train_trial``, and prints the test MAE of every head and its ratio to the MAE of
predicting the training mean (lower is better; 1.0 = no better than the mean).

    .venv/bin/python bench/accuracy.py [--datasets alloy,polycrystal,fem]
        [--types GIN,PNA,SchNet,PaiNN] [--samples 400] [--epochs 20] [--hidden 64]
        [--config-name potential.json --datasets alloy --types SchNet,PaiNN]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

# bench/ also holds scripts named like our packages (bench/graph_builders.py): import the packages
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def generate(name: str, samples: int, path: Path) -> None:
    from graph_builders.store import write_dataset

    if name == "alloy":
        from graph_builders.datasets.alloy import make_alloy_dataset

        data = make_alloy_dataset(num_structures=samples, seed=0, progress=False)
    elif name == "polycrystal":
        from graph_builders.datasets.polycrystal import make_polycrystal_dataset

        data = make_polycrystal_dataset(num_samples=samples, seed=0, progress=False)
    else:
        from graph_builders.datasets.fem import make_fem_dataset

        data = make_fem_dataset(num_samples=samples, refine=4, seed=0, progress=False)
    write_dataset(path, data.graphs, data.heads, splits=data.splits, metadata=data.metadata)


def mean_predictor_mae(path: Path, heads: list[str]) -> dict[str, float]:
    """Test MAE of predicting the training mean (per component for multi-dimensional heads)."""
    from graph_builders.store import GraphStore

    with GraphStore(path) as store:
        def stack(split: str, head: str) -> torch.Tensor:
            return torch.cat([store.get(split, i)["y_" + head] for i in range(store.num_graphs(split))]).double()

        return {h: float((stack("testset", h) - stack("trainset", h).mean(0)).abs().mean()) for h in heads}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="alloy,polycrystal,fem")
    p.add_argument("--types", default="GIN,PNA,SchNet,PaiNN")
    p.add_argument("--samples", type=int, default=400)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--time-budget", type=float, default=None, help="seconds per trial")
    p.add_argument("--config-name", default="config.json",
                   help="example file per dataset, e.g. potential.json (alloy: forces/stress by autograd)")
    args = p.parse_args()
    torch.set_num_threads(1)

    from hydragnn_ensemble.config import load_config
    from hydragnn_ensemble.train import train_trial

    tmp = Path(tempfile.mkdtemp())
    rows = []
    for name in args.datasets.split(","):
        path = tmp / f"{name}.bp"
        t = time.perf_counter()
        generate(name, args.samples, path)
        print(f"{name}: {args.samples} samples generated in {time.perf_counter() - t:.1f} s", flush=True)
        base = load_config(ROOT / "examples" / name / args.config_name)
        heads = list(base.variables.output_names)
        baseline = mean_predictor_mae(path, heads)
        for mpnn in args.types.split(","):
            cfg = base.model_copy(deep=True)
            cfg.architecture.mpnn_type = mpnn
            cfg.architecture.hidden_dim = args.hidden
            cfg.architecture.num_conv_layers = args.layers
            cfg.training.num_epoch = args.epochs
            cfg.training.EarlyStopping = False
            t = time.perf_counter()
            result = train_trial(cfg, path, tmp / f"{name}-{mpnn}", device="cpu", progress=False,
                                 time_budget_s=args.time_budget)
            wall = time.perf_counter() - t
            row = {"dataset": name, "mpnn": mpnn, "status": result.status, "wall_s": wall,
                   "epochs": result.epochs, "failure": result.failure_reason, "heads": {}}
            for h in heads:
                m = result.heads.get(h)
                mae = m.test_mae if m else None
                row["heads"][h] = {"test_mae": mae, "mean_mae": baseline[h],
                                   "ratio": None if mae is None else mae / baseline[h],
                                   "unit": m.unit if m else ""}
            rows.append(row)
            print(json.dumps(row), flush=True)

    print(f"\nTest MAE per head (ratio to the mean predictor), {args.samples} samples, {args.epochs} epochs, "
          f"hidden {args.hidden}, {args.layers} layers:")
    for r in rows:
        cells = "; ".join(
            f"{h} {v['test_mae']:.4g} {v['unit']} ({v['ratio']:.2f})".replace("  ", " ")
            if v["test_mae"] is not None else f"{h} -" for h, v in r["heads"].items())
        extra = f" [{r['status']}: {r['failure']}]" if r["status"] != "completed" else ""
        print(f"{r['dataset']:12s} {r['mpnn']:7s} {r['wall_s']:6.0f}s  {cells}{extra}")


if __name__ == "__main__":
    main()
