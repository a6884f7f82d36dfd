"""Turn input files into graphs for the ensemble, keeping the good ones and listing the bad ones.

Inputs are any structure file ASE reads (extxyz, CIF, POSCAR, ...; a file may hold several
structures) and ADIOS2 datasets (``.bp`` or a sharded dataset directory, any scale: atoms, grains,
meshes built by ``build-graphs``/``demo-data``; every split is read). A file that cannot be read, a
structure that cannot become a graph, or a graph without the inputs the members need is a
:class:`BadInput` naming the file, the structure index and the reason; everything else is predicted.

The inputs are planned first (:mod:`ensemble.input_plan`: what they hold, cut into chunks) and a
:class:`ChunkReader` reads one chunk at a time: a dataset's graphs in one block read, an extxyz
file's frames from their own bytes (a frame that cannot be parsed is listed alone, its neighbours
still read), any other file whole. :func:`load_inputs` reads everything as one chunk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry, HeadSpec, energy_unit
from ensemble.input_plan import BadInput, InputPlan, Piece, Position, Source, plan_inputs
from ensemble.predictor import EnsemblePredictor, PredictionError

__all__ = ["BadInput", "ChunkReader", "InputItem", "check_graph", "in_head_unit", "load_inputs"]


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
    position: Position = (0, 0, 0)  # (input, split, index): the order of the output rows


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


class ChunkReader:
    """Reads the chunks of an :class:`~ensemble.input_plan.InputPlan` into graphs (datasets stay
    open between chunks; :meth:`close` closes them)."""

    def __init__(self, plan: InputPlan, predictor: EnsemblePredictor) -> None:
        self.plan = plan
        self.predictor = predictor
        self._stores: dict[int, Any] = {}

    def __enter__(self) -> "ChunkReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()

    def read(self, chunk: list[Piece]) -> tuple[list[InputItem], list[BadInput]]:
        """The graphs of ``chunk``'s structures and its bad ones, both in input order."""
        good: list[InputItem] = []
        bad: list[BadInput] = []
        for piece in chunk:
            source = self.plan.sources[piece.source]
            if source.kind == "dataset":
                self._dataset_piece(piece, source, good, bad)
            elif source.kind == "frames":
                self._frames_piece(piece, source, good, bad)
            else:
                self._file_piece(piece, source, good, bad)
        return good, bad

    # -- datasets --------------------------------------------------------------------------------
    def _store(self, piece: Piece, source: Source) -> Any:
        from graph_builders.store import open_dataset

        if piece.source not in self._stores:
            self._stores[piece.source] = open_dataset(source.path)
        return self._stores[piece.source]

    def _dataset_piece(self, piece: Piece, source: Source, good: list[InputItem], bad: list[BadInput]) -> None:
        split = source.splits[piece.split]
        try:
            store = self._store(piece, source)
            graphs: list[Data | Exception] = list(store.read_range(split, piece.start, piece.stop))
        except (ValueError, OSError, RuntimeError):  # find the graphs that cannot be read, one by one
            graphs = []
            for i in range(piece.start, piece.stop):
                try:
                    graphs.append(self._store(piece, source).get(split, i))
                except (ValueError, OSError, RuntimeError) as exc:
                    graphs.append(exc)
        for i, graph in zip(range(piece.start, piece.stop), graphs):
            index, position = f"{split}:{i}", (piece.source, piece.split, i)
            try:
                if isinstance(graph, Exception):
                    raise graph
                check_graph(self.predictor, graph)
            except (ValueError, OSError, RuntimeError) as exc:
                bad.append(BadInput(source.path, index, str(exc), position))
                continue
            z = getattr(graph, "z", None)
            formula = _formula(z.numpy()) if z is not None else ""
            name = str(getattr(graph, "name", "") or formula or index)
            good.append(InputItem(source.path, index, name, formula, graph.num_nodes, graph, _atoms_of_graph(graph),
                                  _dataset_labels(graph, self._store(piece, source).heads, self.predictor.heads),
                                  position))

    # -- structure files -------------------------------------------------------------------------
    def _frames_piece(self, piece: Piece, source: Source, good: list[InputItem], bad: list[BadInput]) -> None:
        from graph_builders.xyz_frames import parse_frames, read_bytes, split_frames

        path, fmt = source.path, source.fmt or "extxyz"
        try:
            data = read_bytes(path, piece.byte_start, piece.byte_stop)
        except OSError as exc:
            bad.append(BadInput(path, f"{piece.start}:{piece.stop}", f"cannot read: {exc}",
                                (piece.source, 0, piece.start)))
            return
        try:
            structures: list[Any] = parse_frames(data, fmt)
            if len(structures) != piece.units:
                raise ValueError(f"{len(structures)} structure(s) where {piece.units} frame(s) were found")
        except Exception:  # ASE raises many types: parse frame by frame to name the bad ones
            structures = []
            for frame in split_frames(data):
                try:
                    structures += parse_frames(frame, fmt) or [ValueError("an empty frame")]
                except Exception as exc:
                    structures.append(exc)
        for k, atoms in zip(range(piece.start, piece.stop), structures):
            if isinstance(atoms, Exception):
                bad.append(BadInput(path, str(k), f"cannot read as {fmt!r} (malformed frame?): "
                                    f"{type(atoms).__name__}: {atoms}", (piece.source, 0, k)))
            else:
                self._structure(path, k, (piece.source, 0, k), atoms, good, bad)

    def _file_piece(self, piece: Piece, source: Source, good: list[InputItem], bad: list[BadInput]) -> None:
        from graph_builders.readers import StructureReadError, read_structures

        try:
            structures = read_structures(source.path, ":", source.fmt)
        except StructureReadError as exc:
            bad.append(BadInput(source.path, None, str(exc).removeprefix(f"{source.path}: "), (piece.source, 0, -1)))
            return
        for k, atoms in enumerate(structures):
            self._structure(source.path, k, (piece.source, 0, k), atoms, good, bad)

    def _structure(self, path: str, k: int, position: Position, atoms: Any, good: list[InputItem],
                   bad: list[BadInput]) -> None:
        if len(atoms) == 0:
            bad.append(BadInput(path, str(k), "structure has no atoms", position))
            return
        formula = atoms.get_chemical_formula(mode="metal")
        try:
            graph = self.predictor.build_graph(atoms, name=formula)
            check_graph(self.predictor, graph)
        except ValueError as exc:  # InvalidStructureError, PredictionError
            bad.append(BadInput(path, str(k), str(exc), position))
            return
        good.append(InputItem(path, str(k), formula, formula, len(atoms), graph, atoms,
                              _file_labels(atoms, self.predictor.heads), position))


def load_inputs(paths: list[str | os.PathLike], predictor: EnsemblePredictor) -> tuple[list[InputItem], list[BadInput]]:
    """Graphs of every structure in ``paths`` (built once, at the ensemble's cutoff), and the bad
    ones, both in input order (everything in memory at once: ``predict`` reads in chunks)."""
    plan = plan_inputs(paths)
    good: list[InputItem] = []
    bad = list(plan.bad)
    with ChunkReader(plan, predictor) as reader:
        for chunk in plan.chunks:
            items, wrong = reader.read(chunk)
            good += items
            bad += wrong
    bad.sort(key=lambda b: b.position)
    return good, bad
