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
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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


def _reference_columns(items: list[InputItem], prediction: EnsemblePrediction) -> list[tuple[str, str, str, int]]:
    """(column, head, field, component) for the heads some input carries a label for."""
    cols = []
    for name, hp in prediction.heads.items():
        if not any(name in item.labels for item in items):
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


def reference_errors(items: list[InputItem], prediction: EnsemblePrediction) -> dict[str, ReferenceError]:
    """Per head with labels: its :class:`ReferenceError` (:func:`ensemble.accuracy.error_stats`)."""
    from ensemble.accuracy import error_stats

    out = {}
    for name, hp in prediction.heads.items():
        rows = [(row, item) for row, item in enumerate(items) if name in item.labels]
        if not rows:
            continue
        mean = np.concatenate([hp.mean[prediction.rows(name, row)] for row, _ in rows])
        labels = np.concatenate([item.labels[name].reshape(-1, hp.head.dim) for _, item in rows])
        stats = error_stats(hp.head, labels, mean, np.array([item.num_nodes for _, item in rows]))
        out[name] = ReferenceError(stats.mae, len(rows), stats.mae_per_atom)
    return out


def _domain_cells(prediction: EnsemblePrediction, row: int) -> list[str]:
    distance = next((hp.distance for hp in prediction.heads.values()
                     if hp.head.level == "graph" and hp.distance is not None), None)
    cells = [] if distance is None else [f"{distance[row]:.3g}"]
    if prediction.in_domain is not None:
        cells += ["yes" if prediction.in_domain[row] else "no", "; ".join(prediction.reasons[row])]
    return cells


def write_predictions_csv(items: list[InputItem], prediction: EnsemblePrediction,
                          path: str | os.PathLike) -> Path:
    """The per-structure table (atomic write: temporary file + rename)."""
    path = Path(path)
    cols = _columns(prediction)
    refs = _reference_columns(items, prediction)
    tmp = path.with_name(path.name + ".tmp")
    domain_header = (["latent_distance"] if any(hp.distance is not None for hp in prediction.heads.values()
                                                 if hp.head.level == "graph") else [])
    if prediction.in_domain is not None:
        domain_header += ["in_domain", "domain_reasons"]
    with open(tmp, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(list(LEADING_COLUMNS) + [c[0] for c in cols] + [c[0] for c in refs] + domain_header)
        for row, item in enumerate(items):
            writer.writerow([item.source, item.index, item.name, item.formula, item.num_nodes] +
                            [f"{_value(prediction, h, f, row, c):.6g}" for _, h, f, c in cols] +
                            [_reference_cell(item, prediction, row, h, f, c) for _, h, f, c in refs] +
                            _domain_cells(prediction, row))
    os.replace(tmp, path)
    return path


def write_node_extxyz(items: list[InputItem], prediction: EnsemblePrediction,
                      path: str | os.PathLike) -> Path | None:
    """Per-atom node-head means and stds as extxyz arrays; None when there is no node head."""
    import ase.io

    node_heads = [n for n, hp in prediction.heads.items() if hp.head.level == "node"]
    if not node_heads:
        return None
    path = Path(path)
    frames = []
    for row, item in enumerate(items):
        if item.atoms is None:
            continue
        atoms = item.atoms.copy()
        atoms.calc = None
        atoms.info = {"source": item.source, "index": item.index, "name": item.name}
        if prediction.in_domain is not None:
            atoms.info["in_domain"] = bool(prediction.in_domain[row])
        for head in node_heads:
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
        frames.append(atoms)
    tmp = path.with_name(path.name + ".tmp")
    ase.io.write(tmp, frames, format="extxyz")
    os.replace(tmp, path)
    return path
