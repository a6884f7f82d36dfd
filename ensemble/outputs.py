"""Write ensemble predictions: one CSV row per structure (graph heads), node heads per atom in extxyz.

CSV columns: ``source, index, name, formula, num_atoms``, then per graph head ``<head>_mean``,
``<head>_std`` (total, calibrated) and ``<head>_epistemic_std`` (plus ``<head>_aleatoric_std``
where members predict a variance); heads of dim > 1 get one set per component,
``<head>_<c>_mean`` etc. (c = 0..dim-1; stress in Voigt order xx yy zz yz xz xy).

extxyz: one frame per atomic structure with per-atom arrays ``<head>_mean`` and ``<head>_std``
([N, dim]) for each node head, and the graph-head means and stds in the frame's info.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from ensemble.inputs import InputItem
from ensemble.predictor import EnsemblePrediction


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
        fields = ["mean", "std", "epistemic_std"] + (["aleatoric_std"] if hp.aleatoric_std is not None else [])
        for c in range(hp.head.dim):
            stem = name if hp.head.dim == 1 else f"{name}_{c}"
            cols.extend((f"{stem}_{f}", name, f, c) for f in fields)
    return cols


def _value(prediction: EnsemblePrediction, head: str, field: str, row: int, c: int) -> float:
    hp = prediction.heads[head]
    array = {"mean": hp.mean, "std": hp.std, "epistemic_std": hp.epistemic_std,
             "aleatoric_std": hp.aleatoric_std}[field]
    return float(array[row, c])


def write_predictions_csv(items: list[InputItem], prediction: EnsemblePrediction,
                          path: str | os.PathLike) -> Path:
    """The per-structure table (atomic write: temporary file + rename)."""
    path = Path(path)
    cols = _columns(prediction)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(list(LEADING_COLUMNS) + [c[0] for c in cols])
        for row, item in enumerate(items):
            writer.writerow([item.source, item.index, item.name, item.formula, item.num_nodes] +
                            [f"{_value(prediction, h, f, row, c):.6g}" for _, h, f, c in cols])
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
        for head in node_heads:
            hp = prediction.heads[head]
            rows = prediction.rows(head, row)
            atoms.set_array(f"{head}_mean", hp.mean[rows].astype(float))
            atoms.set_array(f"{head}_std", hp.std[rows].astype(float))
        for name, hp in prediction.heads.items():
            if hp.head.level == "graph":
                atoms.info[f"{name}_mean"] = hp.mean[row].tolist() if hp.head.dim > 1 else float(hp.mean[row, 0])
                atoms.info[f"{name}_std"] = hp.std[row].tolist() if hp.head.dim > 1 else float(hp.std[row, 0])
        frames.append(atoms)
    tmp = path.with_name(path.name + ".tmp")
    ase.io.write(tmp, frames, format="extxyz")
    os.replace(tmp, path)
    return path
