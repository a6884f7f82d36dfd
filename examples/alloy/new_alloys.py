"""Predict formation energies of new alloys with an ensemble, with uncertainty, and compare to EMT.

Builds structures a user would ask about, in two groups:

* like the training data: random alloys with as many components as the training alloys, a pure
  element on its perfect lattice, an ordered phase (L1_2);
* unlike it: more components than any training alloy, a vacancy, a (111) surface, a BCC cell, a
  strongly sheared cell, an element the training never saw (carbon on a lattice site);

predicts their formation energy per atom with the ensemble (mean +- calibrated std), says whether
each lies in the ensemble's applicability domain (and why not), and prints the EMT reference
value (the potential that labelled the training data; none for carbon, which EMT does not model
as a metal).

    python examples/alloy/new_alloys.py ENSEMBLE_DIR [--dataset alloy.bp] [--write new.extxyz]

The dataset (default: the one recorded in the ensemble's manifest) tells which elements and how
many components the members were trained on.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class NewAlloy:
    """One new structure and what makes it new."""

    atoms: object  # ase.Atoms
    name: str
    components: int
    novelty: str


@dataclass
class TrainingScope:
    """What the members were trained on: elements, most components, distortions."""

    elements: tuple[str, ...]
    most_components: int
    strain: float
    rattle: float


def training_scope(dataset: Path) -> TrainingScope:
    """Elements and the largest number of components of the training split, and the strain and
    rattle the structures were generated with."""
    from ase.data import chemical_symbols

    from graph_builders.store import open_dataset

    with open_dataset(dataset) as store:
        elements = tuple(str(store.metadata.get("elements", "Cu,Ni,Pd,Pt,Au,Ag,Al")).split(","))
        most = max(len(set(store.get("trainset", i).z.tolist())) for i in range(store.num_graphs("trainset")))
        strain = float(store.metadata.get("strain", 0.03))
        rattle = float(store.metadata.get("rattle", 0.05))
    return TrainingScope(tuple(e for e in elements if e in chemical_symbols), most, strain, rattle)


def make_new_alloys(scope: TrainingScope, seed: int = 7) -> list[NewAlloy]:
    """The structures of the module docstring (two of each random kind, one of each other)."""
    from graph_builders.datasets.alloy import composition_name, emt_reference, ordered_phase, random_alloy
    from graph_builders.datasets.alloy_shifts import make_shift

    rng = np.random.default_rng(seed)
    elements = scope.elements
    refs = {s: emt_reference(s) for s in elements}
    out: list[NewAlloy] = []

    def add(atoms, novelty: str) -> None:
        symbols = atoms.get_chemical_symbols()
        out.append(NewAlloy(atoms, composition_name(symbols), len(set(symbols)), novelty))

    for k in sorted({2, max(2, scope.most_components)}):
        for _ in range(2):
            chosen = {s: refs[s] for s in rng.choice(elements, k, replace=False)}
            add(random_alloy(rng, chosen, k, 32, scope.strain, scope.rattle), "in range")
    add(ordered_phase("A1", [elements[0]], refs, (2, 2, 2)), "pure element")
    add(ordered_phase("L1_2", list(rng.choice(elements, 2, replace=False)), refs, (2, 2, 2)), "ordered L1_2")
    if scope.most_components < len(elements):
        more = min(scope.most_components + 2, len(elements))
        chosen = {s: refs[s] for s in rng.choice(elements, more, replace=False)}
        add(random_alloy(rng, chosen, more, 32, scope.strain, scope.rattle), "more components")
    components = (2, min(3, len(elements)))
    for shift, novelty in (("vacancies", "vacancy"), ("surfaces", "surface"), ("bcc", "BCC lattice"),
                           ("sheared", "sheared 10%")):
        add(make_shift(shift, 1, elements, components, seed=seed)[0], novelty)
    carbon = random_alloy(rng, {s: refs[s] for s in elements[:2]}, 2, 32, scope.strain, scope.rattle)
    carbon.symbols[0] = "C"
    add(carbon, "unseen element")
    return out


def emt_formation_energy(atoms) -> float | None:
    """EMT formation energy per atom (the training labels' definition); None for elements EMT
    has no FCC reference for."""
    from graph_builders.datasets.alloy import EMT_FCC_METALS, emt_reference, label_alloy

    symbols = set(atoms.get_chemical_symbols())
    if not symbols <= set(EMT_FCC_METALS):
        return None
    refs = {s: emt_reference(s) for s in symbols}
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
    prediction = predictor.predict_atoms([a.atoms for a in alloys])
    pred = prediction.heads["formation_energy"]
    calibrated = "calibrated" if predictor.calibrated else "uncalibrated"
    print(f"ensemble of {predictor.num_members} members; training alloys have <= {scope.most_components} "
          f"components of {','.join(scope.elements)}; std is {calibrated}")
    print(f"{'alloy':<22}{'n':>3}  {'novelty':<16}{'E_f pred (eV/atom)':>21}{'E_f EMT':>10}{'|err|/std':>10}"
          f"  in domain")
    for k, alloy in enumerate(alloys):
        mean, std = float(pred.mean[k, 0]), float(pred.std[k, 0])
        ref = emt_formation_energy(alloy.atoms)
        ref_text = "-" if ref is None else f"{ref:+.4f}"
        ratio = "-" if ref is None else f"{abs(mean - ref) / max(std, 1e-12):.2f}"
        domain = "-"
        if prediction.in_domain is not None:
            domain = "yes" if prediction.in_domain[k] else "no: " + _short(prediction.reasons[k])
        print(f"{alloy.name:<22}{alloy.components:>3}  {alloy.novelty:<16}{mean:>+11.4f} +- {std:<7.4f}"
              f"{ref_text:>10}{ratio:>10}  {domain}")
    if args.write is not None:
        import ase.io

        ase.io.write(args.write, [a.atoms for a in alloys], format="extxyz")
        print(f"structures written to {args.write}")
    return 0


def _short(reasons: list[str]) -> str:
    """The first reason, without the counts (the CSV of `predict` has them all)."""
    first = reasons[0] if reasons else ""
    if "neighbour shells" in first:
        return "neighbour shells"
    if "latent distance" in first:
        return "latent distance"
    if first.startswith("element"):
        return first.split(" not")[0]
    return first


if __name__ == "__main__":
    raise SystemExit(main())
