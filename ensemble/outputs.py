"""Write ensemble predictions: one CSV row per structure (graph heads), node heads per atom in extxyz.

CSV columns: ``source, index, name, formula, num_atoms``, then per graph head ``<head>_mean``,
``<head>_std`` (total, calibrated) and the share of each uncertainty term,
``<head>_epistemic_std`` (always), ``<head>_aleatoric_std``, ``<head>_distance_std`` and
``<head>_domain_std`` where the ensemble has them (``std^2`` is the sum of their squares; see
:mod:`ensemble.uncertainty`); heads of dim > 1 get one set per component, ``<head>_<c>_mean`` etc.
(c = 0..dim-1; stress in Voigt order xx yy zz yz xz xy). When an input carries a label for a
head (an extxyz energy, stress or forces; a dataset's targets; converted to the head's unit),
``<head>_ref`` and ``<head>_error`` (mean - ref) follow for graph heads and ``<head>_mae`` (over
the structure's atoms and components) for node heads; cells are empty for inputs without it. Then,
when the ensemble stores its applicability domain, ``latent_distance`` (about 1 in distribution),
``in_domain`` (yes/no) and ``domain_reasons`` (why not, ``; ``-separated).

extxyz: one frame per atomic structure with per-atom arrays ``<head>_mean`` and ``<head>_std``
([N, dim]) for each node head (and ``<head>_in_domain`` per atom where known), and the graph-head
means and stds in the frame's info.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graph_builders.schema import HeadSpec, energy_unit
from ensemble.accuracy import is_energy
from ensemble.combine import EnsemblePrediction
from ensemble.inputs import InputItem


LEADING_COLUMNS: tuple[str, ...] = ("source", "index", "name", "formula", "num_atoms")


def is_predictions_csv(path: Path) -> bool:
    """True for a file :func:`write_predictions_csv` wrote (its header row), which may be replaced."""
    try:
        with open(path, newline="") as fh:
            return fh.readline().startswith(",".join(LEADING_COLUMNS))
    except (OSError, UnicodeDecodeError):
        return False


def is_node_extxyz(path: Path) -> bool:
    """True for a file :func:`write_node_extxyz` wrote (per-atom ``<head>_mean`` arrays)."""
    try:
        with open(path) as fh:
            fh.readline()
            comment = fh.readline()
    except (OSError, UnicodeDecodeError):
        return False
    return "_mean:R:" in comment and "source=" in comment


def _columns(prediction: EnsemblePrediction) -> list[tuple[str, str, str, int]]:
    """(column name, head, field, component) for every graph-head value."""
    cols = []
    for name, hp in prediction.heads.items():
        if hp.head.level != "graph":
            continue
        fields = ["mean", "std"] + [f"{part}_std" for part in hp.parts]
        for c in range(hp.head.dim):
            stem = name if hp.head.dim == 1 else f"{name}_{c}"
            cols.extend((f"{stem}_{f}", name, f, c) for f in fields)
    return cols


def _value(prediction: EnsemblePrediction, head: str, field: str, row: int, c: int) -> float:
    hp = prediction.heads[head]
    if field == "mean":
        return float(hp.mean[row, c])
    if field == "std":
        return float(hp.std[row, c])
    return float(hp.parts[field.removesuffix("_std")][row, c])


def _reference_columns(prediction: EnsemblePrediction, labelled: Collection[str] | None = None
                       ) -> list[tuple[str, str, str, int]]:
    """(column, head, field, component) for the heads in ``labelled`` (None: every head)."""
    cols = []
    for name, hp in prediction.heads.items():
        if labelled is not None and name not in labelled:
            continue
        if hp.head.level == "node":
            cols.append((f"{name}_mae", name, "mae", 0))
            continue
        for c in range(hp.head.dim):
            stem = name if hp.head.dim == 1 else f"{name}_{c}"
            cols += [(f"{stem}_ref", name, "ref", c), (f"{stem}_error", name, "error", c)]
    return cols


def _reference_cell(item: InputItem, prediction: EnsemblePrediction, row: int, head: str, field: str,
                    c: int) -> str:
    label = item.labels.get(head)
    if label is None:
        return ""
    mean = prediction.heads[head].mean[prediction.rows(head, row)]
    if field == "mae":
        return f"{float(np.abs(mean - label).mean()):.6g}"
    return f"{float(label[0, c]):.6g}" if field == "ref" else f"{float(mean[0, c] - label[0, c]):.6g}"


@dataclass(frozen=True)
class ReferenceError:
    """A head's MAE against the labels the inputs carry (over structures, atoms and components), the
    structures that carried one, and for an energy the MAE per atom (in the head's unit per atom)."""

    mae: float
    count: int
    mae_per_atom: float | None = None


@dataclass(frozen=True)
class ReferenceSums:
    """What :class:`ReferenceError` divides, as sums that add up over chunks (and ranks): ``|mean -
    label|`` over every value, the values, the structures with a label and, for a total energy,
    ``|error| / atoms`` over the structures."""

    abs_sum: float
    values: int
    structures: int
    per_atom_sum: float = 0.0

    def plus(self, other: "ReferenceSums") -> "ReferenceSums":
        return ReferenceSums(self.abs_sum + other.abs_sum, self.values + other.values,
                             self.structures + other.structures, self.per_atom_sum + other.per_atom_sum)

    def error(self, head: HeadSpec) -> ReferenceError:
        """The MAE (and per atom for an energy: an eV/atom head's own MAE, a total's per structure)."""
        mae = self.abs_sum / self.values
        per_atom = None
        if is_energy(head):
            per_atom = mae if energy_unit(head.unit).per_atom else self.per_atom_sum / self.structures
        return ReferenceError(mae, self.structures, per_atom)


def reference_errors(items: list[InputItem], prediction: EnsemblePrediction) -> dict[str, ReferenceError]:
    """Per head with labels: its :class:`ReferenceError`."""
    return {name: sums.error(prediction.heads[name].head) for name, sums in reference_sums(items, prediction).items()}


def reference_sums(items: list[InputItem], prediction: EnsemblePrediction) -> dict[str, ReferenceSums]:
    """Per head with labels: its :class:`ReferenceSums` (sums of several chunks add up)."""
    out = {}
    for name, hp in prediction.heads.items():
        rows = [(row, item) for row, item in enumerate(items) if name in item.labels]
        if not rows:
            continue
        errors = [np.abs(hp.mean[prediction.rows(name, row)] - item.labels[name]).ravel() for row, item in rows]
        per_atom = sum(float(e.sum()) / max(item.num_nodes, 1) for e, (_, item) in zip(errors, rows)) \
            if hp.head.level == "graph" else 0.0
        values = np.concatenate(errors)
        out[name] = ReferenceSums(float(values.sum()), int(values.size), len(rows), per_atom)
    return out
    return out


def _domain_cells(prediction: EnsemblePrediction, row: int) -> list[str]:
    distance = next((hp.distance for hp in prediction.heads.values()
                     if hp.head.level == "graph" and hp.distance is not None), None)
    cells = [] if distance is None else [f"{distance[row]:.3g}"]
    if prediction.in_domain is not None:
        cells += ["yes" if prediction.in_domain[row] else "no", "; ".join(prediction.reasons[row])]
    return cells


@dataclass
class CsvLayout:
    """The predictions CSV's columns for an ensemble. A row's cells (:meth:`cells`) hold the reference
    columns of every head; the file keeps those of the heads some input carries a label for
    (:meth:`header`, :meth:`keep`), which is known only once every row is made."""

    values: list[tuple[str, str, str, int]]
    references: list[tuple[str, str, str, int]]
    domain: list[str]

    @classmethod
    def of(cls, prediction: EnsemblePrediction) -> "CsvLayout":
        domain = (["latent_distance"] if any(hp.distance is not None for hp in prediction.heads.values()
                                             if hp.head.level == "graph") else [])
        if prediction.in_domain is not None:
            domain += ["in_domain", "domain_reasons"]
        return cls(_columns(prediction), _reference_columns(prediction), domain)

    def cells(self, item: InputItem, prediction: EnsemblePrediction, row: int) -> list[str]:
        """Every cell of ``item``'s row (reference cells of every head)."""
        return ([item.source, item.index, item.name, item.formula, str(item.num_nodes)] +
                [f"{_value(prediction, h, f, row, c):.6g}" for _, h, f, c in self.values] +
                [_reference_cell(item, prediction, row, h, f, c) for _, h, f, c in self.references] +
                _domain_cells(prediction, row))

    def keep(self, labelled: Collection[str]) -> list[int]:
        """Which of :meth:`cells` the file keeps when the heads ``labelled`` carry labels."""
        lead = len(LEADING_COLUMNS) + len(self.values)
        refs = [lead + j for j, (_, head, _, _) in enumerate(self.references) if head in labelled]
        tail = lead + len(self.references)
        return list(range(lead)) + refs + list(range(tail, tail + len(self.domain)))

    def header(self, labelled: Collection[str]) -> list[str]:
        return (list(LEADING_COLUMNS) + [c[0] for c in self.values] +
                [c[0] for c in self.references if c[1] in labelled] + self.domain)


def labelled_heads(items: Iterable[InputItem]) -> set[str]:
    """The heads some of ``items`` carries a label for."""
    return {name for item in items for name in item.labels}


def write_predictions_csv(items: list[InputItem], prediction: EnsemblePrediction,
                          path: str | os.PathLike) -> Path:
    """The per-structure table (atomic write: temporary file + rename)."""
    path = Path(path)
    layout = CsvLayout.of(prediction)
    labelled = labelled_heads(items)
    keep = layout.keep(labelled)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(layout.header(labelled))
        for row, item in enumerate(items):
            cells = layout.cells(item, prediction, row)
            writer.writerow([cells[j] for j in keep])
    os.replace(tmp, path)
    return path


def node_heads(prediction: EnsemblePrediction) -> list[str]:
    """The node-level heads (what the per-atom extxyz holds)."""
    return [n for n, hp in prediction.heads.items() if hp.head.level == "node"]


def node_frame(item: InputItem, prediction: EnsemblePrediction, row: int) -> Any | None:
    """``item``'s structure with its node-head means and stds as per-atom arrays (and the graph
    heads' in its info); None when the input has no atomic structure."""
    if item.atoms is None:
        return None
    atoms = item.atoms.copy()
    atoms.calc = None
    atoms.info = {"source": item.source, "index": item.index, "name": item.name}
    if prediction.in_domain is not None:
        atoms.info["in_domain"] = bool(prediction.in_domain[row])
    for head in node_heads(prediction):
        hp = prediction.heads[head]
        rows = prediction.rows(head, row)
        atoms.set_array(f"{head}_mean", hp.mean[rows].astype(float))
        atoms.set_array(f"{head}_std", hp.std[rows].astype(float))
        if hp.in_domain is not None:
            atoms.set_array(f"{head}_in_domain", hp.in_domain[rows].astype(bool))
    for name, hp in prediction.heads.items():
        if hp.head.level == "graph":
            atoms.info[f"{name}_mean"] = hp.mean[row].tolist() if hp.head.dim > 1 else float(hp.mean[row, 0])
            atoms.info[f"{name}_std"] = hp.std[row].tolist() if hp.head.dim > 1 else float(hp.std[row, 0])
    return atoms


def frame_text(atoms: Any) -> str:
    """One structure as extxyz text (written on this process alone, not only on MPI rank 0)."""
    import ase.io

    buffer = io.StringIO()
    ase.io.write(buffer, atoms, format="extxyz", parallel=False)
    return buffer.getvalue()


def write_node_extxyz(items: list[InputItem], prediction: EnsemblePrediction,
                      path: str | os.PathLike) -> Path | None:
    """Per-atom node-head means and stds as extxyz arrays; None when there is no node head."""
    if not node_heads(prediction):
        return None
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        for row, item in enumerate(items):
            atoms = node_frame(item, prediction, row)
            if atoms is not None:
                fh.write(frame_text(atoms))
    os.replace(tmp, path)
    return path
