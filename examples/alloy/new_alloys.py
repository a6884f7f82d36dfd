"""Predict formation energies of new alloys with an ensemble, with uncertainty, and compare to EMT.

Builds a handful of new random FCC alloys: compositions like the training data (in range) and
compositions outside it (more components than any training alloy, element pairs never seen
together), predicts their formation energy per atom with the ensemble (mean +- calibrated std)
and prints a table with the EMT reference value (the potential that labelled the training data).

    python examples/alloy/new_alloys.py ENSEMBLE_DIR [--dataset alloy.bp] [--write new.extxyz]

The dataset (default: the one recorded in the ensemble's manifest) tells which element counts
and element pairs the members were trained on.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class NewAlloy:
    """One new structure and what makes it new."""

    atoms: object  # ase.Atoms
    name: str
    components: int
    novelty: str  # "in range", "more components", "unseen pair"


@dataclass
class TrainingScope:
    """What the members were trained on: elements, most components, element pairs, distortions."""

    elements: tuple[str, ...]
    most_components: int
    pairs: set[frozenset[str]]
    strain: float
    rattle: float


def training_scope(dataset: Path) -> TrainingScope:
    """Elements, the largest number of components and the element pairs of the training split, and
    the strain/rattle the structures were generated with (so that "in range" really is)."""
    from ase.data import chemical_symbols

    from graph_builders.store import GraphStore

    with GraphStore(dataset) as store:
        elements = tuple(str(store.metadata.get("elements", "Cu,Ni,Pd,Pt,Au,Ag,Al")).split(","))
        pairs: set[frozenset[str]] = set()
        most = 0
        for i in range(store.num_graphs("trainset")):
            present = sorted({chemical_symbols[int(v)] for v in store.get("trainset", i).z.tolist()})
            most = max(most, len(present))
            pairs.update(frozenset(p) for p in itertools.combinations(present, 2))
        strain = float(store.metadata.get("strain", 0.03))
        rattle = float(store.metadata.get("rattle", 0.05))
    return TrainingScope(elements, most, pairs, strain, rattle)


def make_new_alloys(scope: TrainingScope, seed: int = 7, per_kind: int = 2, size: int = 32) -> list[NewAlloy]:
    """In-range alloys (2..most components), alloys with more components, unseen-pair binaries,
    distorted like the training structures."""
    from graph_builders.datasets.alloy import composition_name, emt_reference, random_alloy

    elements, most, seen_pairs = scope.elements, scope.most_components, scope.pairs
    rng = np.random.default_rng(seed)
    out: list[NewAlloy] = []
    kinds: list[tuple[tuple[str, ...], str]] = []
    for k in sorted({2, max(2, most)}):
        for _ in range(per_kind):
            kinds.append((tuple(rng.choice(elements, k, replace=False)), "in range"))
    for k in range(most + 1, min(most + 3, len(elements)) + 1):
        for _ in range(per_kind):
            kinds.append((tuple(rng.choice(elements, k, replace=False)), "more components"))
    unseen = [p for p in itertools.combinations(elements, 2) if frozenset(p) not in seen_pairs]
    kinds += [(p, "unseen pair") for p in unseen[:per_kind]]
    for chosen, novelty in kinds:
        refs = {s: emt_reference(s) for s in chosen}
        atoms = random_alloy(rng, refs, len(chosen), size, strain=scope.strain, rattle=scope.rattle)
        out.append(NewAlloy(atoms, composition_name(atoms.get_chemical_symbols()), len(chosen), novelty))
    return out


def emt_formation_energy(atoms) -> float:
    """EMT formation energy per atom (the training labels' definition)."""
    from graph_builders.datasets.alloy import emt_reference, label_alloy

    refs = {s: emt_reference(s) for s in set(atoms.get_chemical_symbols())}
    return float(label_alloy(atoms, refs)["formation_energy"][0, 0])


def main(argv: list[str] | None = None) -> int:
    import torch

    from ensemble.predictor import EnsemblePredictor

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ensemble_dir", type=Path)
    parser.add_argument("--dataset", type=Path, default=None, help="training dataset (default: the manifest's)")
    parser.add_argument("--write", type=Path, default=None, help="also write the structures to this extxyz")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    predictor = EnsemblePredictor(args.ensemble_dir)
    dataset = args.dataset or Path(predictor.manifest.dataset)
    scope = training_scope(dataset)
    alloys = make_new_alloys(scope, seed=args.seed)
    pred = predictor.predict_atoms([a.atoms for a in alloys]).heads["formation_energy"]
    calibrated = "calibrated" if predictor.scales else "uncalibrated"
    print(f"ensemble of {predictor.num_members} members; training alloys have <= {scope.most_components} "
          f"components of {','.join(scope.elements)}; std is {calibrated}")
    print(f"{'alloy':<26}{'n':>3}  {'novelty':<16}{'E_f pred (eV/atom)':>22}{'E_f EMT':>10}{'|err|/std':>10}")
    for k, alloy in enumerate(alloys):
        mean, std = float(pred.mean[k, 0]), float(pred.std[k, 0])
        ref = emt_formation_energy(alloy.atoms)
        print(f"{alloy.name:<26}{alloy.components:>3}  {alloy.novelty:<16}{mean:>+12.4f} +- {std:<7.4f}"
              f"{ref:>+10.4f}{abs(mean - ref) / max(std, 1e-12):>10.2f}")
    by_kind: dict[str, list[float]] = {}
    for k, alloy in enumerate(alloys):
        by_kind.setdefault(alloy.novelty, []).append(float(pred.std[k, 0]))
    print("mean std: " + ", ".join(f"{kind} {np.mean(v):.4f}" for kind, v in by_kind.items()))
    if args.write is not None:
        import ase.io

        ase.io.write(args.write, [a.atoms for a in alloys], format="extxyz")
        print(f"structures written to {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
