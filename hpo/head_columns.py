"""The per-head error columns of the report's trials table: each head's validation MAE in the
trials' results, in the head's unit, and per atom for a total energy.

A head in ``eV`` (:data:`TOTAL_ENERGY_UNIT`; a graph-level head, or one whose level is not known)
is a structure's total energy, and its MAE grows with the structure's size. Where every structure of
the validation split (the MAE is over it) has the same number of atoms, the MAE divided by that
number is exactly the per-atom MAE, and the column shows it in ``eV/atom``. Where the sizes differ,
or the dataset cannot be read (a campaign directory copied without it), the column stays per
structure and says so: ``eV per structure``. A mean over the validation structures of
``|error| / atoms`` needs each structure's error, which the results do not keep.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hpo.state import TrialRecord

#: the unit of a head that is a structure's total energy
TOTAL_ENERGY_UNIT = "eV"
#: the split the trials' validation MAE is computed over
VALIDATION_SPLIT = "valset"


@dataclass(frozen=True)
class DatasetShape:
    """What the dataset says about the heads' MAE: each head's level (``graph``/``node``) and the
    atom count of every validation structure, when they all have the same (None: they differ, or
    the graphs have no atoms)."""

    levels: dict[str, str]
    atoms: int | None
    atom_counts: tuple[int, int] | None = None  # (fewest, most) atoms of a validation structure


def read_dataset_shape(path: str | os.PathLike | None) -> DatasetShape | None:
    """The shape of the dataset at ``path`` (None: no path, or not a dataset this machine can read)."""
    if path is None or not Path(path).exists():
        return None
    from graph_builders.store import open_dataset

    try:
        with open_dataset(path) as store:
            levels = {head.name: head.level for head in store.heads}
            if VALIDATION_SPLIT not in store.split_names or store.num_graphs(VALIDATION_SPLIT) == 0 \
                    or "z" not in store.keys(VALIDATION_SPLIT):
                return DatasetShape(levels, None)
            counts = store.sizes(VALIDATION_SPLIT, "z")
    except Exception:  # noqa: BLE001 - a missing or foreign dataset only makes the column per structure
        return None
    fewest, most = int(counts.min()), int(counts.max())
    return DatasetShape(levels, fewest if fewest == most and fewest > 0 else None, (fewest, most))


@dataclass(frozen=True)
class HeadColumn:
    """One head's validation-MAE column: ``unit`` as shown, the MAE divided by ``atoms`` when set."""

    head: str
    unit: str
    atoms: int | None = None

    @property
    def header(self) -> str:
        return f"{self.head} MAE ({self.unit})" if self.unit else f"{self.head} MAE"

    def value(self, record: TrialRecord) -> float | None:
        """The trial's validation MAE of this head in the column's unit (None: not reported)."""
        mae = None if record.result is None else record.result.metric(self.head, "val_mae")
        if mae is None:
            return None
        return mae / self.atoms if self.atoms else mae


def _unit_of(records: list[TrialRecord], head: str) -> str:
    for record in records:
        metrics = record.result.heads.get(head) if record.result is not None else None
        if metrics is not None and metrics.unit:
            return metrics.unit
    return ""


def head_columns(records: list[TrialRecord], shape: DatasetShape | None) -> list[HeadColumn]:
    """A column per head the trials' results report (first-seen order), energies per atom where the
    dataset allows (see the module docstring)."""
    heads: dict[str, None] = {}
    for record in records:
        if record.result is not None:
            heads.update(dict.fromkeys(record.result.heads))
    columns = []
    for head in heads:
        unit = _unit_of(records, head)
        level = shape.levels.get(head, "graph") if shape is not None else "graph"
        if unit != TOTAL_ENERGY_UNIT or level != "graph":
            columns.append(HeadColumn(head, unit))
        elif shape is not None and shape.atoms is not None:
            columns.append(HeadColumn(head, f"{TOTAL_ENERGY_UNIT}/atom", shape.atoms))
        else:
            columns.append(HeadColumn(head, f"{TOTAL_ENERGY_UNIT} per structure"))
    return columns


def columns_note(columns: list[HeadColumn], shape: DatasetShape | None) -> str:
    """One sentence on how the MAE columns were made, for under the table ("" without columns)."""
    if not columns:
        return ""
    parts = ["MAE: the validation split's mean absolute error of each head, in its unit"]
    per_atom = [c for c in columns if c.atoms]
    per_structure = [c for c in columns if c.unit.endswith("per structure")]
    if per_atom:
        parts.append(f"{', '.join(c.head for c in per_atom)}: the structure's total energy, divided by its "
                     f"{per_atom[0].atoms} atoms (every validation structure has that many)")
    if per_structure:
        why = ("the validation structures have from {} to {} atoms".format(*shape.atom_counts)
               if shape is not None and shape.atom_counts is not None
               else "the dataset's atom counts are not known here")
        parts.append(f"{', '.join(c.head for c in per_structure)}: the structure's total energy, per structure "
                     f"({why})")
    return "; ".join(parts) + "."
