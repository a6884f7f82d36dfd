"""What ``hydragnn_shaped`` costs in accuracy and buys in speed: each layer type trained both ways.

Each (layer, shape, seed) trains with the real trainer (``train_trial``, one torch thread, CPU) on
the same alloy dataset (800 binaries/ternaries of the demo generator, 32-48 atoms, formation
energy, 70/10/10/10 split), hidden 64, 3 layers, batch 32, the same epochs; the run prints the
parameter count, the best validation MAE, the test MAE of the best checkpoint (the trainer's own
``result.json``) and the median seconds per epoch, then the medians over seeds, shaped / full.
Runs alternate (full, shaped, full, ...) so the machine's drift falls on both.

    python -m bench.hydragnn_shaped [--epochs 20] [--seeds 3] [--types GIN PNA SchNet EGNN PaiNN] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


def config(mpnn_type: str, shaped: bool, epochs: int, seed: int) -> dict:
    """A HydraGNN config: hidden 64 x 3 layers, graph head 2x64 shared + 2x64."""
    return {"NeuralNetwork": {
        "Architecture": {"mpnn_type": mpnn_type, "hidden_dim": 64, "num_conv_layers": 3, "radius": 5.0,
                         "hydragnn_shaped": shaped,
                         "output_heads": {"graph": {"num_sharedlayers": 2, "dim_sharedlayers": 64,
                                                    "num_headlayers": 2, "dim_headlayers": [64, 64]}}},
        "Variables_of_interest": {"input_node_features": [0], "output_names": ["formation_energy"],
                                  "type": ["graph"], "output_dim": [1]},
        "Training": {"num_epoch": epochs, "batch_size": 32, "seed": seed, "Optimizer": {"learning_rate": 1e-3}}}}


def run(mpnn_type: str, shaped: bool, epochs: int, seed: int, store: Path, work: Path) -> dict:
    """One training; its parameters, best validation MAE, test MAE and median epoch seconds."""
    from hydragnn_ensemble.train import train_trial

    name = f"{mpnn_type}_{'shaped' if shaped else 'full'}_{seed}"
    path = work / f"{name}.json"
    path.write_text(json.dumps(config(mpnn_type, shaped, epochs, seed)))
    result = train_trial(path, store, work / name, progress=False, device="cpu")
    epochs_s = [json.loads(line)["epoch_s"] for line in (work / name / "progress.jsonl").read_text().splitlines()
                if line.strip() and "epoch_s" in json.loads(line)]
    metrics = result.heads["formation_energy"]
    return {"params": result.num_parameters, "val_mae": metrics.val_mae, "test_mae": metrics.test_mae,
            "epoch_s": float(np.median(epochs_s))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--types", nargs="+", default=["GIN", "PNA", "SchNet", "EGNN", "PaiNN"])
    parser.add_argument("--graphs", type=int, default=800)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sys.path.insert(0, str(REPO))
    from bench.hydragnn_anchor import make_dataset
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        store = work / "alloys.bp"
        if not store.exists():  # the anchor's formation-energy alloys, 32-48 atoms, 70/10/10/10
            make_dataset(store, args.graphs, sizes=(32, 48), seed=5, fractions=(0.7, 0.1, 0.1, 0.1))
        print(f"{'layer':6s} {'shape':7s} {'seed':>4s} {'params':>8s} {'val MAE':>9s} {'test MAE':>9s} {'s/epoch':>8s}")
        rows: dict[tuple[str, bool], list[dict]] = {}
        for mpnn_type in args.types:
            for seed in range(args.seeds):
                for shaped in (False, True):
                    r = run(mpnn_type, shaped, args.epochs, seed, store, work)
                    rows.setdefault((mpnn_type, shaped), []).append(r)
                    print(f"{mpnn_type:6s} {'shaped' if shaped else 'full':7s} {seed:4d} {r['params']:8d} "
                          f"{r['val_mae']:9.4f} {r['test_mae']:9.4f} {r['epoch_s']:8.2f}", flush=True)
        print("\nmedians over seeds, shaped / full:")
        for mpnn_type in args.types:
            full, shaped = rows[(mpnn_type, False)], rows[(mpnn_type, True)]
            med = {k: (float(np.median([r[k] for r in shaped])), float(np.median([r[k] for r in full])))
                   for k in ("val_mae", "test_mae", "epoch_s")}
            print(f"{mpnn_type}: params {shaped[0]['params']} / {full[0]['params']}; "
                  + "; ".join(f"{k} {s:.4g} / {f:.4g} = {s / f:.2f}x" for k, (s, f) in med.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
