"""Turn input files into graphs for the ensemble, keeping the good ones and listing the bad ones.

Inputs are any structure file ASE reads (extxyz, CIF, POSCAR, ...; a file may hold several
structures) and ADIOS2 datasets (``.bp``, any scale: atoms, grains, meshes built by
``build-graphs``/``demo-data``; every split is read). A file that cannot be read, a structure that
cannot become a graph, or a graph without the inputs the members need is a :class:`BadInput`
naming the file, the structure index and the reason; everything else is predicted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry, HeadSpec, energy_unit
from ensemble.predictor import EnsemblePredictor, PredictionError


@dataclass
class InputItem:
    """One structure/graph to predict."""

    source: str
    index: str  # position in the file ("3", or "testset:12" for datasets)
    name: str
    formula: str
    num_nodes: int
    graph: Data
    atoms: Any | None = None  # ase.Atoms where the input was (or carries) an atomic structure
    #: reference values the input carries for the ensemble's heads, in each head's unit
    #: ([1, dim] graph head, [N, dim] node head): the file's labels or the dataset's targets
    labels: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class BadInput:
    """An input that could not be predicted, and why."""

    source: str
    index: str | None
    reason: str

    def describe(self) -> str:
        where = self.source if self.index is None else f"{self.source}[{self.index}]"
        return f"{where}: {self.reason}"


def check_graph(predictor: EnsemblePredictor, graph: Data) -> None:
    """Raise :class:`PredictionError` when a member cannot read ``graph`` (missing fields, too few
    feature columns, wrong edge feature width)."""
    for key in ("pos", "edge_index"):
        if getattr(graph, key, None) is None:
            raise PredictionError(f"graph has no {key!r}")
    x = getattr(graph, "x", None)
    for member in predictor.members:
        spec, cols = member.loaded.spec, member.loaded.x_columns
        if cols and (x is None or x.dim() != 2 or max(cols) >= x.shape[1]):
            width = None if x is None else tuple(x.shape)
            raise PredictionError(f"member trial {member.trial_id} reads x columns {list(cols)}, graph x is {width}")
        if spec.use_atomic_numbers and getattr(graph, "z", None) is None:
            raise PredictionError(f"member trial {member.trial_id} needs atomic numbers z; the graph has none")
        if spec.edge_dim > 0:
            ea = getattr(graph, "edge_attr", None)
            if ea is None or ea.shape[1] != spec.edge_dim:
                raise PredictionError(f"member trial {member.trial_id} needs edge_attr of width {spec.edge_dim}")


def in_head_unit(head: HeadSpec, value: np.ndarray, unit: str, num_atoms: int) -> np.ndarray | None:
    """``value`` (a label in ``unit``) in ``head``'s unit and shape, or None when it cannot be: another
    shape, or another unit that is not an energy convertible to the head's (a total energy in eV
    compared with an eV/atom head is divided by the number of atoms)."""
    rows = 1 if head.level == "graph" else num_atoms
    if value.shape != (rows, head.dim):
        return None
    if unit == head.unit:
        return value
    have, want = energy_unit(unit), energy_unit(head.unit)
    if have is None or want is None:
        return None
    per_atom_ev = value * have.to_ev / (1 if have.per_atom else num_atoms)
    return per_atom_ev * (1 if want.per_atom else num_atoms) / want.to_ev


def _file_labels(atoms: Any, heads: HeadRegistry) -> dict[str, np.ndarray]:
    """The labels an input structure carries for ``heads`` (see :mod:`graph_builders.labels`)."""
    from graph_builders.labels import structure_labels

    found = structure_labels(atoms)
    out = {}
    for head in heads:
        if head.name in found.targets:
            value = in_head_unit(head, found.targets[head.name], found.units[head.name], len(atoms))
            if value is not None:
                out[head.name] = value
    return out


def _dataset_labels(graph: Data, stored: HeadRegistry, heads: HeadRegistry) -> dict[str, np.ndarray]:
    """The targets a dataset graph carries for ``heads`` (the dataset's registry says their units)."""
    out = {}
    for head in heads:
        y = getattr(graph, head.key, None)
        if y is None or head.name not in stored:
            continue
        value = in_head_unit(head, y.double().numpy(), stored[head.name].unit, graph.num_nodes)
        if value is not None:
            out[head.name] = value
    return out


def _formula(numbers: np.ndarray) -> str:
    from ase import Atoms

    return Atoms(numbers=numbers).get_chemical_formula(mode="metal")


def _atoms_of_graph(graph: Data) -> Any | None:
    z = getattr(graph, "z", None)
    if z is None:
        return None
    from ase import Atoms

    cell = graph.cell[0].numpy() if getattr(graph, "cell", None) is not None else None
    pbc = graph.pbc[0].numpy() if getattr(graph, "pbc", None) is not None else False
    return Atoms(numbers=z.numpy(), positions=graph.pos.numpy(), cell=cell, pbc=pbc)


def _from_dataset(path: Path, predictor: EnsemblePredictor, good: list[InputItem], bad: list[BadInput]) -> None:
    from graph_builders.store import open_dataset

    try:
        store = open_dataset(path)
    except (ValueError, OSError, RuntimeError) as exc:
        bad.append(BadInput(str(path), None, f"cannot open dataset: {exc}"))
        return
    with store:
        for split in store.split_names:
            for i in range(store.num_graphs(split)):
                index = f"{split}:{i}"
                try:
                    graph = store.get(split, i)
                    check_graph(predictor, graph)
                except (ValueError, OSError, RuntimeError) as exc:
                    bad.append(BadInput(str(path), index, str(exc)))
                    continue
                z = getattr(graph, "z", None)
                formula = _formula(z.numpy()) if z is not None else ""
                name = str(getattr(graph, "name", "") or formula or index)
                good.append(InputItem(str(path), index, name, formula, graph.num_nodes, graph,
                                      _atoms_of_graph(graph), _dataset_labels(graph, store.heads, predictor.heads)))


def _from_structures(path: Path, predictor: EnsemblePredictor, good: list[InputItem], bad: list[BadInput]) -> None:
    from graph_builders.readers import StructureReadError, read_structures

    try:
        structures = read_structures(path)
    except StructureReadError as exc:
        bad.append(BadInput(str(path), None, str(exc).removeprefix(f"{path}: ")))
        return
    for k, atoms in enumerate(structures):
        formula = atoms.get_chemical_formula(mode="metal")
        try:
            graph = predictor.build_graph(atoms, name=formula)
            check_graph(predictor, graph)
        except ValueError as exc:  # InvalidStructureError, PredictionError
            bad.append(BadInput(str(path), str(k), str(exc)))
            continue
        good.append(InputItem(str(path), str(k), formula, formula, len(atoms), graph, atoms,
                              _file_labels(atoms, predictor.heads)))


def load_inputs(paths: list[str | os.PathLike], predictor: EnsemblePredictor) -> tuple[list[InputItem], list[BadInput]]:
    """Graphs of every structure in ``paths`` (built once, at the ensemble's cutoff), and the bad ones."""
    good: list[InputItem] = []
    bad: list[BadInput] = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            bad.append(BadInput(str(path), None, "no such file"))
        elif path.suffix == ".bp":
            _from_dataset(path, predictor, good, bad)
        else:
            _from_structures(path, predictor, good, bad)
    return good, bad
