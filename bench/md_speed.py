"""MD speed of the ensemble's ASE calculator: energy+forces(+std) calls per second.

Builds (or reuses, ``--ensemble DIR``) calibrated potential-mode ensembles of SchNet members of
~30k parameters each (hidden 32, 2 layers, the alloy example's heads), trained briefly with the
real trainer on a small EMT alloy dataset (speed does not depend on accuracy): the best 3 and the
best 5 of 5 trials, and each trial on its own as a one-member ensemble. Then times
``EnsembleCalculator`` calls the way ASE molecular dynamics makes them (positions moved by
~0.001 Å between calls, so every call computes; ``get_forces`` then the cached energy and stds) on
32- and 256-atom alloy cells, with 3 and 5 members, against

* the members one after another, each its own one-member calculator (mean and std of their
  energies and forces computed from theirs): the anchor;
* one member alone (its one-member calculator): the goal's yardstick;
* our calculator with member stacking off (``stack_members=False``: the members one after another
  inside one call, sharing the graph and the domain checks).

Ours stacks the members on batches of at most ``ensemble.stacking.CPU_STACK_MAX_NODES`` atoms on a
CPU (32 atoms here) and runs them one after another above it (256 atoms here).

One torch thread, all sides in this one process, interleaved, medians over ``--repeats`` of
``--calls`` calls each. Goals (issue #43): >= 40 calls/s for 32 atoms and 3 members; a 5-member
call <= 2x one member's. ``--profile`` prints cProfile's top functions of 32-atom 3-member calls.

    python -m bench.md_speed [--ensemble DIR] [--repeats 7] [--calls 20] [--profile] [--json out.json]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
ELEMENTS = ("Cu", "Ni", "Pd", "Au")
NUM_TRIALS = 5
# (learning_rate, seed) per trial: the same architecture, members of one search
TRIALS = [(0.003, 11), (0.002, 12), (0.004, 13), (0.005, 14), (0.0025, 15)]
STEP = 1e-3  # Å: the positions' random move between calls (a few MD steps' worth)


def base_config(epochs: int) -> dict[str, Any]:
    """The alloy example as SchNet potentials of ~30k parameters."""
    cfg = json.loads((REPO / "examples" / "alloy" / "config.json").read_text())
    cfg["NeuralNetwork"]["Architecture"].update(mpnn_type="SchNet", hidden_dim=32, num_conv_layers=2)
    cfg["NeuralNetwork"]["Training"].update(num_epoch=epochs, batch_size=16, compute_grad_energy=True)
    return cfg


def train(root: Path, num_structures: int, epochs: int) -> Path:
    """The dataset and the trials (real trainer) under ``root``; returns the dataset."""
    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.store import write_dataset
    from hydragnn_ensemble.train import train_trial

    data = make_alloy_dataset(num_structures, ELEMENTS, (2, 3), sizes=(32,), seed=3, progress=False)
    store = write_dataset(root / "alloy.bp", data.graphs, data.heads, metadata=data.metadata, seed=3,
                          fractions=(0.7, 0.15, 0.15))
    for trial_id, (lr, seed) in enumerate(TRIALS[:NUM_TRIALS]):
        cfg = base_config(epochs)
        cfg["NeuralNetwork"]["Training"]["Optimizer"]["learning_rate"] = lr
        cfg["NeuralNetwork"]["Training"]["seed"] = seed
        run_dir = root / "campaign" / "trials" / str(trial_id)
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps(cfg, indent=2))
        t0 = time.perf_counter()
        result = train_trial(run_dir / "config.json", store, run_dir, progress=False, device="cpu")
        if result.status != "completed":
            raise RuntimeError(f"trial {trial_id}: {result.status}: {result.failure_reason}")
        print(f"  trial {trial_id}: objective {result.objective:.4f}, {time.perf_counter() - t0:.1f} s", flush=True)
    return Path(store)


def build(root: Path, num_structures: int, epochs: int) -> dict[str, Path]:
    """Ensembles ``ens3``, ``ens5`` and ``one_<trial>`` under ``root`` (built once, then reused)."""
    from ensemble import BuildOptions, build_ensemble, calibrate

    names = ["ens3", "ens5"] + [f"one_{k}" for k in range(NUM_TRIALS)]
    dirs = {name: root / name for name in names}
    if all((d / "manifest.json").exists() for d in dirs.values()):
        return dirs
    print(f"building the ensembles in {root} (trained with the real trainer, {epochs} epochs):", flush=True)
    store = root / "alloy.bp"
    if not (root / "campaign").exists():
        store = train(root, num_structures, epochs)
    for k in (3, 5):
        build_ensemble(root / "campaign", dirs[f"ens{k}"],
                       BuildOptions(top_k=k, method="topk", dataset=store, overwrite=True))
    for trial_id in range(NUM_TRIALS):  # one trial's campaign: a one-member ensemble of it
        single = root / f"campaign_{trial_id}"
        if not single.exists():
            shutil.copytree(root / "campaign" / "trials" / str(trial_id), single / "trials" / str(trial_id))
        build_ensemble(single, dirs[f"one_{trial_id}"],
                       BuildOptions(top_k=1, method="topk", dataset=store, overwrite=True))
    for d in dirs.values():
        calibrate(d, plots=False)
    return dirs


def alloy_cell(num_atoms: int, seed: int):
    """A random Cu/Ni/Pd/Au fcc cell of ``num_atoms`` atoms (32 or 256), rattled."""
    from ase.build import bulk

    repeat = {32: 2, 256: 4}[num_atoms]
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True).repeat((repeat,) * 3)
    rng = np.random.default_rng(seed)
    atoms.numbers = rng.choice([29, 28, 46, 79], size=len(atoms))
    atoms.rattle(0.03, seed=seed)
    return atoms


class Mover:
    """Moves ``atoms`` to a fresh random displacement of its start positions (what an MD step does)."""

    def __init__(self, atoms, seed: int = 0) -> None:
        self.atoms, self.start = atoms, atoms.positions.copy()
        self.rng = np.random.default_rng(seed)

    def __call__(self) -> np.ndarray:
        positions = self.start + self.rng.normal(0.0, STEP, self.start.shape)
        self.atoms.positions = positions
        return positions


def ensemble_call(atoms, mover: Mover) -> Callable[[], None]:
    """One MD call of a calculator attached to ``atoms``: forces, then the cached energy and stds."""
    def call() -> None:
        mover()
        atoms.get_forces()
        atoms.get_potential_energy()
        _ = atoms.calc.results["energy_std"], atoms.calc.results["forces_std"]
    return call


def one_after_another(atoms, calculators: list, mover: Mover) -> Callable[[], None]:
    """The anchor: each member its own calculator on its own copy, then their mean and std."""
    copies = []
    for calc in calculators:
        copy = atoms.copy()
        copy.calc = calc
        copies.append(copy)

    def call() -> None:
        positions = mover()
        energies, forces = [], []
        for copy in copies:
            copy.positions = positions
            forces.append(copy.get_forces())
            energies.append(copy.get_potential_energy())
        _ = np.mean(energies), np.std(energies), np.mean(forces, axis=0), np.std(forces, axis=0)
    return call


def time_calls(calls: dict[str, Callable[[], None]], repeats: int, per_repeat: int) -> dict[str, float]:
    """Seconds per call of each side: medians of ``repeats`` runs of ``per_repeat`` calls, interleaved."""
    for call in calls.values():  # warm-up
        for _ in range(3):
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            t0 = time.perf_counter()
            for _ in range(per_repeat):
                call()
            times[name].append((time.perf_counter() - t0) / per_repeat)
    return {name: statistics.median(t) for name, t in times.items()}


def calculator(path: Path, stack: bool = True):
    from ensemble import EnsembleCalculator, EnsemblePredictor

    return EnsembleCalculator(predictor=EnsemblePredictor(path, stack_members=stack), on_out_of_domain="ignore")


def attached(atoms, calc):
    copy = atoms.copy()
    copy.calc = calc
    return copy


def measure(dirs: dict[str, Path], num_atoms: int, k: int, repeats: int, per_repeat: int) -> dict[str, Any]:
    """Seconds per call of ours, ours without stacking, the members one after another, one member."""
    atoms = alloy_cell(num_atoms, seed=num_atoms)
    from ensemble import read_manifest

    trial_ids = [m.trial_id for m in read_manifest(dirs[f"ens{k}"]).members]
    singles = [calculator(dirs[f"one_{t}"]) for t in trial_ids]
    ours, unstacked = attached(atoms, calculator(dirs[f"ens{k}"])), attached(atoms, calculator(dirs[f"ens{k}"], False))
    alone = attached(atoms, calculator(dirs[f"one_{trial_ids[0]}"]))
    calls = {"ours": ensemble_call(ours, Mover(ours)),
             "unstacked": ensemble_call(unstacked, Mover(unstacked)),
             "one_after_another": one_after_another(atoms, singles, Mover(atoms)),
             "one_member": ensemble_call(alone, Mover(alone))}
    seconds = time_calls(calls, repeats, per_repeat)
    return {"atoms": num_atoms, "members": k, "seconds": seconds,
            "calls_per_s": {name: 1.0 / s for name, s in seconds.items()},
            "vs_one_after_another": seconds["one_after_another"] / seconds["ours"],
            "vs_one_member": seconds["ours"] / seconds["one_member"]}


def profile(dirs: dict[str, Path], calls: int, top: int = 25) -> None:
    """cProfile of ``calls`` 32-atom 3-member calls: the top functions by own and by total time."""
    atoms = attached(alloy_cell(32, seed=32), calculator(dirs["ens3"]))
    call = ensemble_call(atoms, Mover(atoms))
    call()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        call()
    prof.disable()
    stats = pstats.Stats(prof)
    print(f"\ncProfile, {calls} calls of 32 atoms, 3 members, by own time:")
    stats.sort_stats("tottime").print_stats(top)
    print("by total time:")
    stats.sort_stats("cumulative").print_stats(top)


def goal_line(what: str, value: float, goal: str, met: bool) -> str:
    return f"  {what}: {value:.3g} (goal {goal}: {'met' if met else 'NOT met'})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ensemble calculator MD speed (energy+forces+std calls/s)")
    parser.add_argument("--ensemble", type=Path, default=None,
                        help="directory of the bench's ensembles: built there when missing, reused after")
    parser.add_argument("--structures", type=int, default=80, help="training structures (32 atoms each)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20, help="calls per repeat")
    parser.add_argument("--profile", action="store_true", help="also profile 32-atom 3-member calls")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.ensemble or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        dirs = build(root, args.structures, args.epochs)
        from ensemble import EnsemblePredictor

        params = [m.loaded.model.num_parameters() for m in EnsemblePredictor(dirs["ens5"]).members]
        print(f"members: SchNet potentials, {', '.join(map(str, params))} parameters; one torch thread; "
              f"median of {args.repeats} x {args.calls} calls", flush=True)
        rows = [measure(dirs, n, k, args.repeats, args.calls) for n in (32, 256) for k in (3, 5)]
        if args.profile:
            profile(dirs, 200)
    print(f"\n{'atoms':>5} {'K':>2} {'ours/s':>8} {'unstacked/s':>11} {'1-by-1/s':>9} {'1 member/s':>10} "
          f"{'x 1-by-1':>8} {'/ 1 member':>10}")
    for r in rows:
        c = r["calls_per_s"]
        print(f"{r['atoms']:>5} {r['members']:>2} {c['ours']:>8.1f} {c['unstacked']:>11.1f} "
              f"{c['one_after_another']:>9.1f} {c['one_member']:>10.1f} {r['vs_one_after_another']:>8.2f} "
              f"{r['vs_one_member']:>10.2f}")
    print("goals:")
    by = {(r["atoms"], r["members"]): r for r in rows}
    rate = by[(32, 3)]["calls_per_s"]["ours"]
    print(goal_line("32 atoms, 3 members, calls/s", rate, ">= 40", rate >= 40))
    for n in (32, 256):
        ratio = by[(n, 5)]["vs_one_member"]
        print(goal_line(f"{n} atoms, 5-member call / one member's", ratio, "<= 2", ratio <= 2))
    if args.json:
        args.json.write_text(json.dumps({"members_parameters": params, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
