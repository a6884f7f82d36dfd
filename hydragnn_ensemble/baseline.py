"""The baselines a model must beat, fitted on a dataset's training split and scored on another split.

Per head (:func:`fit_baselines`):

* an **energy** (graph head of dim 1 whose unit is an energy, :func:`graph_builders.schema.energy_unit`):
  the *composition-linear* fit, one reference energy per element: least squares, without an
  intercept, of each structure's energy on its element counts (a total, ``eV``) or on its element
  fractions (an energy per atom, ``eV/atom``). A structure of an element the training split never
  holds gets no reference energy for it (0);
* **forces** (node head of dim 3) and **stress** (graph head of dim 6): *zero* (the MAE is the
  split's mean |component|);
* any other head: the training split's *mean* per component (from the dataset's facts).

Scored on the evaluation split: MAE and RMSE in the head's unit over every component of every row
(structure or atom), and for an energy the MAE per atom: ``mean(|error| / atoms)`` over the
structures for a total, the MAE itself for a per-atom head. Structures whose target is not finite
are left out of both fit and score.

Each split is read once, in blocks of :data:`BLOCK` graphs, only the atomic numbers and the targets
needed (the training split: those of the energy heads; the counts of one block and the normal
equations are all that is held).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from graph_builders.heads import HeadRegistry, HeadSpec
from graph_builders.units import energy_unit

#: graphs per read, and nodes per read (a larger graph is read alone): what one read holds
BLOCK = 4096
BLOCK_NODES = 1_000_000
#: columns of the element-count matrix (atomic numbers 0..118)
NUM_ELEMENTS = 119
COMPOSITION = "composition-linear"
ZERO = "zero"
TRAINING_MEAN = "training mean"
#: the stored keys that may hold the atomic numbers, in the order they are looked for
ELEMENT_KEYS = ("z", "atomic_numbers")


@dataclass(frozen=True)
class HeadBaseline:
    """One head's baseline scored on a split: ``predictor`` (:data:`COMPOSITION`, :data:`ZERO` or
    :data:`TRAINING_MEAN`), the structures scored, MAE and RMSE in ``unit``, and for an energy the
    MAE per atom (in ``unit`` per atom: ``eV`` -> eV/atom)."""

    head: str
    unit: str
    predictor: str
    structures: int
    mae: float
    rmse: float
    mae_per_atom: float | None = None
    references: dict[int, float] = field(default_factory=dict)  # composition-linear: Z -> reference energy

    @property
    def description(self) -> str:
        """What predicts, in words (for a table's column)."""
        if self.predictor == COMPOSITION:
            return f"composition-linear ({len(self.references)} reference energies)"
        return {ZERO: f"zero {self.head}", TRAINING_MEAN: "training mean"}.get(self.predictor, self.predictor)


@dataclass(frozen=True)
class Baselines:
    """Every head's baseline, fitted on ``fit_split`` and scored on ``eval_split`` of ``dataset``."""

    dataset: str
    fit_split: str
    eval_split: str
    heads: dict[str, HeadBaseline]

    def get(self, head: str) -> HeadBaseline | None:
        return self.heads.get(head)


def baseline_kind(head: HeadSpec, has_elements: bool) -> str:
    """Which predictor a head's baseline is (see the module docstring)."""
    if head.level == "graph" and head.dim == 1 and energy_unit(head.unit) is not None and has_elements:
        return COMPOSITION
    if (head.level, head.dim) in (("node", 3), ("graph", 6)):
        return ZERO
    return TRAINING_MEAN


def element_key(store, split: str) -> str | None:
    """The key of ``split`` that holds the atomic numbers (None: not an atomic dataset)."""
    keys = store.keys(split)
    return next((k for k in ELEMENT_KEYS if k in keys), None)


def element_counts(z: np.ndarray, atoms: np.ndarray, dataset: str = "") -> np.ndarray:
    """``[graphs, NUM_ELEMENTS]``: how many atoms of each atomic number each graph has, from the
    concatenated atomic numbers ``z`` and each graph's atom count ``atoms``."""
    z = np.asarray(z, dtype=np.int64).reshape(-1)
    if z.size and (z.min() < 0 or z.max() >= NUM_ELEMENTS):
        raise ValueError(f"{dataset}: atomic numbers outside 0..{NUM_ELEMENTS - 1} (found {z.min()}..{z.max()})")
    graph = np.repeat(np.arange(len(atoms)), atoms)
    return np.bincount(graph * NUM_ELEMENTS + z, minlength=len(atoms) * NUM_ELEMENTS).reshape(
        len(atoms), NUM_ELEMENTS).astype(np.float64)


class _NormalEquations:
    """``X^T X`` and ``X^T y`` of a least-squares fit, accumulated block by block."""

    def __init__(self) -> None:
        self.gram = np.zeros((NUM_ELEMENTS, NUM_ELEMENTS))
        self.rhs = np.zeros(NUM_ELEMENTS)

    def add(self, design: np.ndarray, y: np.ndarray) -> None:
        self.gram += design.T @ design
        self.rhs += design.T @ y

    def solve(self) -> dict[int, float]:
        """The coefficient of each column some row has (by column: the atomic number), least
        squares (minimum norm where those columns are dependent)."""
        seen = np.flatnonzero(np.diag(self.gram) > 0)
        if not len(seen):
            return {}
        coef = np.linalg.lstsq(self.gram[np.ix_(seen, seen)], self.rhs[seen], rcond=None)[0]
        return {int(z): float(c) for z, c in zip(seen, coef)}


def _coefficients(references: dict[int, float]) -> np.ndarray:
    """``[NUM_ELEMENTS]``: the reference energy of each atomic number (0 where none was fitted)."""
    coef = np.zeros(NUM_ELEMENTS)
    for z, c in references.items():
        coef[z] = c
    return coef


def _design(counts: np.ndarray, per_atom: bool) -> np.ndarray:
    if not per_atom:
        return counts
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)


def _blocks(store, split: str, keys: list[str]):
    """``(block, atoms per graph)`` over ``split``: at most :data:`BLOCK` graphs and (unless one
    graph has more) :data:`BLOCK_NODES` nodes per read."""
    n = store.num_graphs(split)
    nodes = np.asarray(store.graph_sizes(split, 0, n)[0], dtype=np.int64)
    start = 0
    while start < n:
        within = np.searchsorted(np.cumsum(nodes[start:start + BLOCK]), BLOCK_NODES, side="right")
        stop = start + max(1, int(within))
        yield store.read_block(split, start, stop, keys), nodes[start:stop]
        start = stop


def _targets(block, head: HeadSpec) -> np.ndarray:
    """``[rows, dim]`` float64 targets of ``head`` in ``block``."""
    return np.asarray(block.arrays[head.key], dtype=np.float64).reshape(-1, head.dim)


def _fit_compositions(store, dataset: str, split: str, zkey: str, heads: list[HeadSpec]) -> dict[str, dict[int, float]]:
    """The reference energies of each composition-linear head, fitted on ``split``."""
    equations = {h.name: _NormalEquations() for h in heads}
    per_atom = {h.name: energy_unit(h.unit).per_atom for h in heads}
    for block, atoms in _blocks(store, split, [zkey] + [h.key for h in heads]):
        counts = element_counts(block.arrays[zkey], atoms, dataset)
        for h in heads:
            y = _targets(block, h)[:, 0]
            keep = np.isfinite(y)
            equations[h.name].add(_design(counts[keep], per_atom[h.name]), y[keep])
    return {name: eq.solve() for name, eq in equations.items()}


@dataclass
class _Score:
    """Running sums of one head's errors on the evaluation split."""

    absolute: float = 0.0
    squares: float = 0.0
    values: int = 0
    structures: int = 0
    per_atom: float = 0.0

    def add(self, errors: np.ndarray, structures: int, per_atom: np.ndarray | None) -> None:
        self.absolute += float(np.abs(errors).sum())
        self.squares += float((errors * errors).sum())
        self.values += errors.size
        self.structures += structures
        if per_atom is not None:
            self.per_atom += float(np.abs(per_atom).sum())


def _per_atom(head: HeadSpec, errors: np.ndarray, atoms: np.ndarray) -> np.ndarray | None:
    """Each structure's error per atom for an energy head (None for any other head)."""
    unit = energy_unit(head.unit) if head.level == "graph" and head.dim == 1 else None
    if unit is None:
        return None
    return errors[:, 0] if unit.per_atom else errors[:, 0] / np.maximum(atoms, 1)


def _block_errors(block, head: HeadSpec, kind: str, atoms: np.ndarray, counts: np.ndarray | None,
                  coef: np.ndarray | None, mean: np.ndarray | None) -> tuple[np.ndarray, int, np.ndarray | None]:
    """One block's errors of ``head``'s baseline: ``[rows, dim]`` (structures with finite targets
    only), how many structures they belong to, and for an energy each structure's error per atom."""
    y = _targets(block, head)
    if head.level == "node":
        graph = np.repeat(np.arange(len(atoms)), atoms)
        bad = np.unique(graph[~np.isfinite(y).all(axis=1)])
        keep, structures, atoms_kept = ~np.isin(graph, bad), len(atoms) - len(bad), None
    else:
        keep = np.isfinite(y).all(axis=1)
        structures, atoms_kept = int(keep.sum()), atoms[keep]
    if kind == COMPOSITION:
        predicted = (_design(counts, energy_unit(head.unit).per_atom) @ coef)[:, None]
    elif kind == ZERO:
        predicted = np.zeros_like(y)
    else:
        predicted = np.broadcast_to(mean, y.shape)
    errors = (predicted - y)[keep]
    return errors, structures, None if atoms_kept is None else _per_atom(head, errors, atoms_kept)


def fit_baselines(dataset: str | os.PathLike, eval_split: str, fit_split: str = "trainset",
                  heads: list[str] | None = None) -> Baselines:
    """Fit every head's baseline (or those named in ``heads``) on ``fit_split`` of ``dataset`` and
    score it on ``eval_split`` (see the module docstring). ValueError naming the dataset and split
    when a split is missing or empty."""
    from graph_builders.store import dataset_facts, open_dataset

    with open_dataset(dataset) as store:
        for split in (fit_split, eval_split):
            if split not in store.split_names or store.num_graphs(split) == 0:
                raise ValueError(f"{dataset}: no {split} to {'fit' if split == fit_split else 'score'} the baselines on "
                                 f"(splits: {', '.join(store.split_names)})")
        registry: HeadRegistry = store.heads
        chosen = [h for h in registry if heads is None or h.name in heads]
        zkey = element_key(store, fit_split)
        kinds = {h.name: baseline_kind(h, zkey is not None) for h in chosen}
        composition = [h for h in chosen if kinds[h.name] == COMPOSITION]
        references = _fit_compositions(store, str(dataset), fit_split, zkey, composition) if composition else {}
        coefs = {name: _coefficients(refs) for name, refs in references.items()}
        means = {}
        if any(k == TRAINING_MEAN for k in kinds.values()):
            facts = dataset_facts(store).splits[fit_split]
            means = {h.name: facts.heads[h.name].mean for h in chosen if kinds[h.name] == TRAINING_MEAN}
        scores = {h.name: _Score() for h in chosen}
        keys = ([zkey] if composition else []) + [h.key for h in chosen]
        for block, atoms in _blocks(store, eval_split, keys):
            counts = element_counts(block.arrays[zkey], atoms, str(dataset)) if composition else None
            for h in chosen:
                errors, structures, per_atom = _block_errors(block, h, kinds[h.name], atoms, counts,
                                                             coefs.get(h.name), means.get(h.name))
                scores[h.name].add(errors, structures, per_atom)
    out = {}
    for h in chosen:
        s = scores[h.name]
        if s.values == 0:
            continue
        energy = h.level == "graph" and h.dim == 1 and energy_unit(h.unit) is not None
        out[h.name] = HeadBaseline(
            h.name, h.unit, kinds[h.name], s.structures, s.absolute / s.values, float(np.sqrt(s.squares / s.values)),
            s.per_atom / s.structures if energy else None, references.get(h.name, {}))
    return Baselines(str(dataset), fit_split, eval_split, out)
