"""Forces MAE / the trivial predictor's, per layer type offered in potential mode.

Each type the model accepts as a potential (CGCNN, SchNet, EGNN, PaiNN) trains with the real trainer
(one torch thread, CPU) on EMT alloys of the kind ``tests/core/test_potential_layers.py`` uses, a bit
larger: random 8- and 16-atom Cu/Ni/Pd/Au cells (rattled, strained; formation energy, stress,
forces), 60/20/20 split; the alloy example's potential config (``examples/alloy/potential.json``)
shrunk to hidden 32, 2 layers, batch 4, learning rate 0.005, a fixed number of epochs. The anchor,
in the same run: EGNN and CGCNN without the radial filter on their messages (what they were before
it; HydraGNN's EGNN has none either), trained by the same ``Trainer`` on a spec with
``radial_filter=False``. The trivial predictor predicts zero forces: its MAE is the mean |F|
component of the split. Printed: one line per run (forces validation and test MAE, the ratios, the
formation-energy validation MAE in meV/atom, seconds), then the medians over seeds as a table.

    python -m bench.potential_layers [--epochs 30] [--seeds 2] [--structures 200] [--types CGCNN SchNet EGNN PaiNN]
        [--no-anchor] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
TYPES = ("CGCNN", "SchNet", "EGNN", "PaiNN")
FILTERED = ("CGCNN", "EGNN")  # the families whose radial filter is optional (the anchor's rows)


def make_store(path: Path, structures: int, seed: int = 0) -> Path:
    """The EMT alloys (see the module docstring) written to ``path``."""
    from graph_builders.datasets.alloy import RANDOM_ONLY, make_alloy_dataset
    from graph_builders.store import write_dataset

    labelled = make_alloy_dataset(num_structures=structures, elements=("Cu", "Ni", "Pd", "Au"), components=(2, 3),
                                  sizes=(8, 16), mix=RANDOM_ONLY, seed=seed, progress=False)
    return write_dataset(path, labelled.graphs, labelled.heads, metadata=labelled.metadata, seed=seed,
                         fractions=(0.6, 0.2, 0.2))


def trivial_mae(store: Path, split: str) -> float:
    """The zero-forces predictor's MAE on ``split``: the mean |F| component."""
    from graph_builders.store import GraphStore

    with GraphStore(store) as graphs:
        forces = [graphs.get(split, i).y_forces.double() for i in range(graphs.num_graphs(split))]
    return float(torch.cat(forces).abs().mean())


def config(mpnn_type: str, epochs: int, seed: int) -> dict:
    """``examples/alloy/potential.json`` with ``mpnn_type``, hidden 32 x 2 layers, batch 4."""
    cfg = json.loads((REPO / "examples" / "alloy" / "potential.json").read_text())
    arch, training = cfg["NeuralNetwork"]["Architecture"], cfg["NeuralNetwork"]["Training"]
    arch.update(mpnn_type=mpnn_type, hidden_dim=32, num_conv_layers=2)
    arch["output_heads"]["graph"].update(num_sharedlayers=1, dim_sharedlayers=32, num_headlayers=1,
                                         dim_headlayers=[32])
    arch["output_heads"]["node"].update(num_headlayers=1, dim_headlayers=[32])
    if mpnn_type not in ("EGNN", "SchNet"):  # equivariance: only where HydraGNN accepts it
        arch["equivariance"] = False
    training.update(num_epoch=epochs, batch_size=4, EarlyStopping=False, seed=seed)
    training["Optimizer"]["learning_rate"] = 0.005
    return cfg


def train(mpnn_type: str, radial_filter: bool, epochs: int, seed: int, store: Path, run_dir: Path):
    """One trial with the real ``Trainer``; ``radial_filter=False`` trains the spec without the filter."""
    from hydragnn_ensemble.config import config_from_dict
    from hydragnn_ensemble.train.budget import TimeBudget
    from hydragnn_ensemble.train.data import open_source
    from hydragnn_ensemble.train.distributed import DistributedContext, ProcessGroup
    from hydragnn_ensemble.train.log import TrialLog
    from hydragnn_ensemble.train.trainer import Trainer, prepare_trial

    source = open_source(store)
    try:
        inputs = prepare_trial(config_from_dict(config(mpnn_type, epochs, seed)), source, str(store))
        inputs = dataclasses.replace(inputs, spec=dataclasses.replace(inputs.spec, radial_filter=radial_filter))
        device = torch.device("cpu")
        with ProcessGroup(DistributedContext(), device) as pg:
            trainer = Trainer(inputs, run_dir, device=device, pg=pg, log=TrialLog(run_dir), budget=TimeBudget(None),
                              progress=False)
            return trainer.fit()
    finally:
        source.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--structures", type=int, default=200)
    parser.add_argument("--types", nargs="+", default=list(TYPES))
    parser.add_argument("--no-anchor", action="store_true", help="skip EGNN and CGCNN without the radial filter")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        store = work / f"alloys_{args.structures}.bp"
        if not store.exists():
            make_store(store, args.structures)
        trivial = {split: trivial_mae(store, split) for split in ("valset", "testset")}
        print(f"{args.structures} structures (8 and 16 atoms), {args.epochs} epochs; trivial forces MAE (mean |F|): "
              f"val {trivial['valset']:.4f}, test {trivial['testset']:.4f} eV/Å")
        arms = [(t, True) for t in args.types] + ([] if args.no_anchor else
                                                   [(t, False) for t in args.types if t in FILTERED])
        print(f"{'layer':7s} {'filter':6s} {'seed':>4s} {'F val':>7s} {'/triv':>6s} {'F test':>7s} {'/triv':>6s} "
              f"{'E val meV/at':>12s} {'s':>6s}")
        rows: dict[tuple[str, bool], list[dict[str, float]]] = {}
        for seed in range(args.seeds):
            for mpnn_type, radial_filter in arms:
                started = time.perf_counter()
                result = train(mpnn_type, radial_filter, args.epochs, seed, store,
                               work / f"{mpnn_type}_{'filter' if radial_filter else 'none'}_{seed}")
                seconds = time.perf_counter() - started
                if result.status != "completed":
                    print(f"{mpnn_type:7s} {str(radial_filter):6s} {seed:4d} {result.status}: {result.failure_reason}")
                    continue
                f, e = result.heads["forces"], result.heads["formation_energy"]
                row = {"val": f.val_mae, "val_ratio": f.val_mae / trivial["valset"], "test": f.test_mae,
                       "test_ratio": f.test_mae / trivial["testset"], "energy": 1000 * e.val_mae, "s": seconds}
                rows.setdefault((mpnn_type, radial_filter), []).append(row)
                print(f"{mpnn_type:7s} {'yes' if radial_filter else 'no':6s} {seed:4d} {row['val']:7.4f} "
                      f"{row['val_ratio']:6.3f} {row['test']:7.4f} {row['test_ratio']:6.3f} {row['energy']:12.1f} "
                      f"{row['s']:6.1f}", flush=True)
        print(f"\nmedians over {args.seeds} seed(s); goal: forces MAE / trivial <= 0.5 for every type offered\n")
        print("| layer | radial filter | forces val MAE (eV/Å) | / trivial | forces test MAE | / trivial "
              "| energy val MAE (meV/atom) | s per run |")
        print("|---|---|---|---|---|---|---|---|")
        for (mpnn_type, radial_filter), runs in rows.items():
            med = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
            label = "yes" if radial_filter else "no (before)"
            filt = label if mpnn_type in FILTERED else "(by construction)"
            print(f"| {mpnn_type} | {filt} | {med['val']:.4f} | {med['val_ratio']:.2f} | {med['test']:.4f} | "
                  f"{med['test_ratio']:.2f} | {med['energy']:.1f} | {med['s']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
