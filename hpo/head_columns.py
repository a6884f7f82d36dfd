"""The per-head error columns of the report's trials table: each head's validation MAE in the
trials' results, in the head's unit, and an energy per atom in meV/atom.

A graph head (or one whose level is not known) in an energy unit is an energy: per atom
(``eV/atom``), its MAE is shown in :data:`~graph_builders.schema.MEV_PER_ATOM`; a total (``eV``,
``Ha`` ...) is a structure's energy, whose MAE grows with the structure's size. Its column shows
the trial's ``val_mae_per_atom`` (the trainer's mean over the validation structures of
``|error| / atoms``) in meV/atom. A result without it (written before the trainer kept it) is
shown per atom too where every validation structure has the same number of atoms (the MAE divided
by that number is then exactly the per-atom MAE); where the sizes differ, or the dataset cannot be
read (a campaign directory copied without it), the column stays per structure and says so:
``eV per structure``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from graph_builders.units import MEV_PER_ATOM, energy_unit
from hpo.state import TrialRecord

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
    """One head's validation-MAE column: ``unit`` as shown. An energy per atom (``per_atom``): the
    trial's per-atom MAE (a total's ``val_mae_per_atom``, else its MAE divided by ``atoms`` when
    set; a per-atom head's MAE), times ``scale`` (to meV/atom)."""

    head: str
    unit: str
    atoms: int | None = None
    per_atom: bool = False
    total: bool = False  # the head is a structure's total energy
    scale: float = 1.0

    @property
    def header(self) -> str:
        return f"{self.head} MAE ({self.unit})" if self.unit else f"{self.head} MAE"

    def value(self, record: TrialRecord) -> float | None:
        """The trial's validation MAE of this head in the column's unit (None: not reported)."""
        if record.result is None:
            return None
        mae = record.result.metric(self.head, "val_mae")
        if self.per_atom and self.total:
            per_atom = record.result.metric(self.head, "val_mae_per_atom")
            if per_atom is None and mae is not None and self.atoms:
                per_atom = mae / self.atoms
            return None if per_atom is None else per_atom * self.scale
        if mae is None:
            return None
        return mae / self.atoms if self.atoms else mae * self.scale

    def of_baseline(self, mae: float, mae_per_atom: float | None) -> float | None:
        """A baseline's MAE (and per atom, for an energy) in the column's unit."""
        if self.per_atom:
            return None if mae_per_atom is None else mae_per_atom * self.scale
        return mae


def _unit_of(records: list[TrialRecord], head: str) -> str:
    for record in records:
        metrics = record.result.heads.get(head) if record.result is not None else None
        if metrics is not None and metrics.unit:
            return metrics.unit
    return ""


def _has_per_atom(records: list[TrialRecord], head: str) -> bool:
    return any(r.result is not None and r.result.metric(head, "val_mae_per_atom") is not None for r in records)


def head_columns(records: list[TrialRecord], shape: DatasetShape | None) -> list[HeadColumn]:
    """A column per head the trials' results report (first-seen order), energies per atom where the
    results or the dataset allow (see the module docstring)."""
    heads: dict[str, None] = {}
    for record in records:
        if record.result is not None:
            heads.update(dict.fromkeys(record.result.heads))
    columns = []
    for head in heads:
        unit = _unit_of(records, head)
        level = shape.levels.get(head, "graph") if shape is not None else "graph"
        energy = energy_unit(unit) if level == "graph" else None
        if energy is None:
            columns.append(HeadColumn(head, unit))
        elif energy.per_atom:
            columns.append(HeadColumn(head, MEV_PER_ATOM, per_atom=True, scale=energy.to_ev * 1000.0))
        elif _has_per_atom(records, head) or (shape is not None and shape.atoms is not None):
            columns.append(HeadColumn(head, MEV_PER_ATOM, shape.atoms if shape is not None else None,
                                      per_atom=True, total=True, scale=energy.to_ev * 1000.0))
        else:
            columns.append(HeadColumn(head, f"{unit} per structure"))
    return columns


def columns_note(columns: list[HeadColumn], shape: DatasetShape | None) -> str:
    """One sentence on how the MAE columns were made, for under the table ("" without columns)."""
    if not columns:
        return ""
    parts = ["MAE: the validation split's mean absolute error of each head, in its unit"]
    totals = [c for c in columns if c.per_atom and c.total]
    per_atom = [c for c in columns if c.per_atom and not c.total]
    per_structure = [c for c in columns if c.unit.endswith("per structure")]
    if totals:
        how = (f"divided by its {totals[0].atoms} atoms where a trial did not report it (every validation "
               "structure has that many)" if totals[0].atoms else "as the trials reported it")
        parts.append(f"{', '.join(c.head for c in totals)}: the mean over the validation structures of the total "
                     f"energy's |error| / atoms, in {MEV_PER_ATOM} ({how})")
    if per_atom:
        parts.append(f"{', '.join(c.head for c in per_atom)}: an energy per atom, in {MEV_PER_ATOM}")
    if per_structure:
        why = ("the validation structures have from {} to {} atoms".format(*shape.atom_counts)
               if shape is not None and shape.atom_counts is not None
               else "the dataset's atom counts are not known here")
        parts.append(f"{', '.join(c.head for c in per_structure)}: the structure's total energy, per structure "
                     f"({why}, and the trials did not report it per atom)")
    return "; ".join(parts) + "."
