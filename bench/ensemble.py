"""Ensemble benchmark: accuracy, uncertainty in and out of distribution, calibration, throughput.

Trains candidate members with the REAL trainer (``train_trial``, in this process, one after
another: a campaign under the MPI runtime adds process start-up per trial and does not change what
is measured here) on EMT binary and ternary alloys, records them as a campaign directory (journal,
trials/<id>/), selects K of them with ``ensemble.build_ensemble`` (default: per-head bagged greedy
selection on the validation split), calibrates on the validation split, and reports in one run:

1. ensemble MAE vs the best single member's MAE per head on held-out binaries/ternaries
   (in distribution; goal: no worse);
2. mean predicted std of the formation energy on quaternaries/quinaries (out of distribution) vs
   in distribution (goal >= 1.5x);
3. 95% coverage after calibration (goal 0.90-0.98) and Spearman(|error|, std);
4. prediction throughput for K members sharing each structure's graph, batch and per-edge
   geometry vs the anchor: the K members run one after another, each building its own graphs and
   batches and running its own plain forward pass (the side-branch script's way); both sides in
   this one process with one torch thread; medians of repeats and the ratio (goal >= 3x).

The candidates: three SchNet interatomic potentials (forces = -dE/dpos, stress from the strain
derivative; seeds and learning rates differ), a SchNet with direct heads, a SchNet with a Gaussian
NLL variance output (aleatoric std), two GINs and a CGCNN with direct heads.

    python -m bench.ensemble [--train 400] [--epochs 15] [--members 8] [--top-k 5]
                             [--method topk|greedy|greedy-per-head] [--bags 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
ELEMENTS = ("Cu", "Ni", "Pd", "Pt", "Au", "Ag", "Al")
# (mpnn_type, hidden_dim, num_conv_layers, learning_rate, seed, compute_grad_energy, loss_function_type):
# diverse candidates, as a search would give (potentials first: they are the slowest to train)
MEMBER_CONFIGS = [
    ("SchNet", 32, 2, 0.003, 11, True, "mse"), ("SchNet", 32, 2, 0.002, 12, True, "mse"),
    ("SchNet", 32, 2, 0.004, 13, True, "mse"), ("SchNet", 32, 2, 0.004, 0, False, "mse"),
    ("SchNet", 32, 2, 0.004, 14, False, "GaussianNLLLoss"), ("GIN", 48, 2, 0.003, 1, False, "mse"),
    ("GIN", 32, 3, 0.004, 4, False, "mse"), ("CGCNN", 32, 2, 0.004, 2, False, "mse"),
]


def make_sets(n_train: int, n_test: int, tmp: Path):
    """Training store (binaries+ternaries, 80/10/10), ID holdout (2-3 comp.), OOD (4-5 comp.)."""
    from graph_builders.datasets.alloy import make_alloy_dataset, generate_alloy_structures
    from graph_builders.store import write_dataset

    train = make_alloy_dataset(n_train, ELEMENTS, (2, 3), sizes=(32,), seed=11, progress=False)
    store = write_dataset(tmp / "alloy_2_3.bp", train.graphs, train.heads, metadata=train.metadata,
                          seed=11, fractions=(0.8, 0.1, 0.1))
    ind = make_alloy_dataset(n_test, ELEMENTS, (2, 3), sizes=(32,), seed=12, progress=False)
    ood = make_alloy_dataset(n_test, ELEMENTS, (4, 5), sizes=(32,), seed=13, progress=False)
    atoms, _ = generate_alloy_structures(n_test, ELEMENTS, (2, 5), sizes=(32,), seed=14)
    return store, ind.graphs, ood.graphs, atoms


def train_members(store: Path, n_members: int, epochs: int, campaign: Path) -> None:
    """Train the members with the real trainer and record them as a campaign directory."""
    from hpo.journal import Journal
    from hpo.space import apply_params
    from hydragnn_ensemble.train import train_trial

    base = json.loads((REPO / "examples" / "alloy" / "config.json").read_text())
    base["NeuralNetwork"]["Training"].update(num_epoch=epochs, batch_size=32)
    (campaign / "trials").mkdir(parents=True)
    (campaign / "base_config.json").write_text(json.dumps(base, indent=2))
    keys = ["NeuralNetwork.Architecture.mpnn_type", "NeuralNetwork.Architecture.hidden_dim",
            "NeuralNetwork.Architecture.num_conv_layers", "NeuralNetwork.Training.Optimizer.learning_rate",
            "NeuralNetwork.Training.seed", "NeuralNetwork.Training.compute_grad_energy",
            "NeuralNetwork.Training.loss_function_type"]
    frozen = {"dataset": str(store), "objective": "objective", "search_space": {k: {} for k in keys}}
    with Journal(campaign / "journal.jsonl") as journal:
        journal.append({"event": "campaign_started", "campaign": frozen, "resume": False, "ranks": 1, "slots": 1})
        for trial_id, values in enumerate(MEMBER_CONFIGS[:n_members]):
            params = dict(zip(keys, values))
            run_dir = campaign / "trials" / str(trial_id)
            run_dir.mkdir()
            (run_dir / "config.json").write_text(json.dumps(apply_params(base, params), indent=2))
            journal.append({"event": "trial_suggested", "trial_id": trial_id, "params": params, "attempt": 0})
            journal.append({"event": "trial_started", "trial_id": trial_id, "attempt": 0, "slots": [0],
                            "hosts": ["localhost"], "size": 1})
            t0 = time.perf_counter()
            result = train_trial(run_dir / "config.json", store, run_dir, progress=False, device="cpu")
            kind = "potential" if values[5] else ("NLL" if values[6] != "mse" else "direct")
            print(f"  trial {trial_id} {values[0]:<6} hidden {values[1]:>2} {kind:<9}: {result.status}, objective "
                  f"{result.objective:.4f}, {result.epochs} epochs, {time.perf_counter() - t0:.1f} s", flush=True)
            journal.append({"event": "trial_finished", "trial_id": trial_id, "attempt": 0,
                            "result": result.to_dict()})


def mae(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y)))


def accuracy_and_uncertainty(ens_dir: Path, ind: list, ood: list) -> dict:
    from ensemble.calibration import calibration_metrics
    from ensemble.predictor import EnsemblePredictor, split_targets

    predictor = EnsemblePredictor(ens_dir)
    out: dict = {"heads": {}}
    p_in, p_out = predictor.predict_graphs(ind), predictor.predict_graphs(ood)
    y_in, y_out = split_targets(ind, predictor.heads), split_targets(ood, predictor.heads)
    objectives = [m.objective for m in predictor.manifest.members]
    best_by_objective = int(np.argmin(objectives))
    for head, hp in p_in.heads.items():
        member_mae = [mae(hp.members[k], y_in[head]) for k in range(hp.members.shape[0])]
        cal = calibration_metrics(y_in[head], hp.mean, hp.std)
        cal_ood = calibration_metrics(y_out[head], p_out.heads[head].mean, p_out.heads[head].std)
        out["heads"][head] = {
            "unit": hp.head.unit,
            "ensemble_mae": mae(hp.mean, y_in[head]),
            "best_member_mae": min(member_mae),
            "best_objective_member_mae": member_mae[best_by_objective],
            "member_maes": member_mae,
            "ood_ensemble_mae": mae(p_out.heads[head].mean, y_out[head]),
            "mean_aleatoric_std_id": None if hp.aleatoric_std is None else float(np.mean(hp.aleatoric_std)),
            "mean_aleatoric_std_ood": (None if p_out.heads[head].aleatoric_std is None
                                       else float(np.mean(p_out.heads[head].aleatoric_std))),
            "mean_std_id": float(np.mean(hp.std)),
            "mean_std_ood": float(np.mean(p_out.heads[head].std)),
            "mean_epistemic_std_id": float(np.mean(hp.epistemic_std)),
            "mean_epistemic_std_ood": float(np.mean(p_out.heads[head].epistemic_std)),
            "coverage_95_id": cal.coverage_95, "coverage_68_id": cal.coverage_68,
            "spearman_id": cal.spearman, "coverage_95_ood": cal_ood.coverage_95,
            "spearman_ood": cal_ood.spearman,
        }
    return out


def throughput(ens_dir: Path, structures: list, repeats: int, batch_size: int = 32) -> dict:
    """Structures per second: shared graphs, batches and geometry vs members one after another."""
    from torch_geometric.data import Batch

    from graph_builders.atomic import atoms_to_graph
    from ensemble.predictor import EnsemblePredictor, slim_graph
    from hydragnn_ensemble.inference import load_checkpoint

    predictor = EnsemblePredictor(ens_dir, batch_size=batch_size)
    # the anchor's own copies of the members, untouched by the predictor
    own = [(load_checkpoint(ens_dir / m.checkpoint), m.radius) for m in predictor.manifest.members]

    def ours() -> None:
        predictor.predict_atoms(structures)

    def anchor() -> None:
        for loaded, radius in own:  # each member on its own: its own graphs, batches, forward passes
            graphs = [slim_graph(atoms_to_graph(a, cutoff=radius)) for a in structures]
            for start in range(0, len(graphs), batch_size):
                loaded.predict(Batch.from_data_list(graphs[start:start + batch_size]))

    ours(), anchor()  # warm-up
    t_ours, t_anchor = [], []
    for _ in range(repeats):
        t0 = time.perf_counter(); ours(); t_ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); anchor(); t_anchor.append(time.perf_counter() - t0)
    m_ours, m_anchor = statistics.median(t_ours), statistics.median(t_anchor)
    kinds = [("potential" if m.potential_mode else "direct") + f" {m.loaded.spec.mpnn_type}"
             for m in predictor.members]
    return {"structures": len(structures), "members": len(predictor.members), "member_kinds": kinds,
            "repeats": repeats, "ours_s": m_ours, "anchor_s": m_anchor,
            "ours_ms_per_structure": 1000 * m_ours / len(structures),
            "anchor_ms_per_structure": 1000 * m_anchor / len(structures),
            "ours_per_s": len(structures) / m_ours, "anchor_per_s": len(structures) / m_anchor,
            "speedup": m_anchor / m_ours}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ensemble accuracy / uncertainty / throughput benchmark")
    parser.add_argument("--train", type=int, default=400, help="binary+ternary structures (80/10/10 split)")
    parser.add_argument("--test", type=int, default=80, help="held-out structures per test set")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--members", type=int, default=8, help="trained candidates")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--method", choices=("topk", "greedy", "greedy-per-head"), default="greedy-per-head",
                        help="member selection (greedy: Caruana on the valset over all trained members; "
                             "greedy-per-head: per-head weights, at most --top-k members)")
    parser.add_argument("--bags", type=int, default=20, help="greedy-per-head: bootstrap resamples of the valset")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sys.path.insert(0, str(REPO))  # run as a script: the repository's packages first
    from ensemble.build import BuildOptions, build_ensemble
    from ensemble.calibration import calibrate

    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        print(f"data: {args.train} binaries/ternaries for training, {args.test} ID and {args.test} OOD "
              "(quaternaries/quinaries) held out", flush=True)
        store, ind, ood, mixed = make_sets(args.train, args.test, tmp)
        print(f"training {args.members} members ({args.epochs} epochs each, real trainer):", flush=True)
        train_members(store, args.members, args.epochs, tmp / "campaign")
        build_ensemble(tmp / "campaign", tmp / "ens", BuildOptions(top_k=args.top_k, method=args.method,
                                                             candidates=args.members, bags=args.bags))
        report = calibrate(tmp / "ens", plots=False)
        results = accuracy_and_uncertainty(tmp / "ens", ind, ood)
        results["uncertainty_weights"] = {h: m.weights for h, m in report.models.items()}
        from ensemble.manifest import read_manifest

        manifest = read_manifest(tmp / "ens")
        results["members"] = {m.trial_id: m.weight for m in manifest.members}
        results["head_weights"] = {m.trial_id: m.head_weights for m in manifest.members}
        print(f"members (trial: weight): {results['members']}", flush=True)
        for m in manifest.members:
            if m.head_weights:
                print(f"  trial {m.trial_id} per-head weights: "
                      + ", ".join(f"{h} {w:.2f}" for h, w in m.head_weights.items()), flush=True)
        results["throughput"] = throughput(tmp / "ens", mixed, args.repeats)
    results["total_s"] = time.perf_counter() - t_start

    print(f"\n{'head':<18}{'ens MAE':>10}{'best mbr':>10}{'best-obj':>10}{'ratio':>7}"
          f"{'std ID':>9}{'std OOD':>9}{'OOD/ID':>7}{'cov95':>7}{'spearman':>9}{'MAE OOD/ID':>11}{'alea OOD/ID':>12}")
    for head, h in results["heads"].items():
        alea = (h["mean_aleatoric_std_ood"] / h["mean_aleatoric_std_id"]
                if h["mean_aleatoric_std_id"] else float("nan"))
        print(f"{head:<18}{h['ensemble_mae']:>10.4g}{h['best_member_mae']:>10.4g}"
              f"{h['best_objective_member_mae']:>10.4g}{h['ensemble_mae'] / h['best_member_mae']:>7.3f}"
              f"{h['mean_std_id']:>9.4g}{h['mean_std_ood']:>9.4g}{h['mean_std_ood'] / h['mean_std_id']:>7.2f}"
              f"{h['coverage_95_id']:>7.2f}{h['spearman_id'] if h['spearman_id'] is not None else float('nan'):>9.2f}"
              f"{h['ood_ensemble_mae'] / h['ensemble_mae']:>11.2f}{alea:>12.2f}")
    print("(best mbr: the best single member on the ID test set, per head; MAE OOD/ID: the ensemble's own "
          "error ratio, what a calibrated std ratio should follow)")
    tp = results["throughput"]
    print(f"\nthroughput, {tp['members']} members ({', '.join(tp['member_kinds'])}), {tp['structures']} "
          f"structures, one process, one torch thread each side (median of {tp['repeats']}):")
    print(f"  shared graphs+batches+geometry: {tp['ours_s']:.3f} s ({tp['ours_ms_per_structure']:.2f} ms/structure, "
          f"{tp['ours_per_s']:.1f} structures/s)")
    print(f"  members one by one (anchor): {tp['anchor_s']:.3f} s ({tp['anchor_ms_per_structure']:.2f} ms/structure, "
          f"{tp['anchor_per_s']:.1f} structures/s)")
    print(f"  speed-up: {tp['speedup']:.2f}x")
    print(f"total bench time {results['total_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
