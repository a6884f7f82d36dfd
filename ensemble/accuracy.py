"""An ensemble's errors on a split beside the baselines it must beat (``select``'s accuracy table).

Per head: MAE, RMSE and R² of the ensemble mean in the head's unit, and for an energy (a graph head
of dim 1 in an energy unit) the MAE per atom, ``mean(|error| / atoms)`` over the structures for a
total (``eV``) and the MAE itself for an energy per atom (``eV/atom``); the table shows it in
:data:`~graph_builders.schema.MEV_PER_ATOM`. Beside them, the baseline of the head
(:mod:`hydragnn_ensemble.baseline`: composition-linear energies fitted on the training split, zero
forces and stress) on the same split, and the ensemble's MAE as a fraction of the baseline's.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

from graph_builders.schema import MEV_PER_ATOM, HeadSpec, energy_unit, in_mev_per_atom
from hydragnn_ensemble.baseline import Baselines, HeadBaseline


#: how the table names an energy's per-atom row (after the head's name)
PER_ATOM_ROW = " per atom"


@dataclass(frozen=True)
class ErrorStats:
    """MAE, RMSE and R² of predictions against targets (every component of every row counts once),
    and for an energy head the MAE per atom (in the head's unit per atom; None for other heads)."""

    count: int
    mae: float
    rmse: float
    r2: float | None  # None when the targets do not vary
    mae_per_atom: float | None = None


def is_energy(head: HeadSpec) -> bool:
    """A graph head of dim 1 whose unit is an energy (total or per atom)."""
    return head.level == "graph" and head.dim == 1 and energy_unit(head.unit) is not None


def error_stats(head: HeadSpec, y: np.ndarray, mean: np.ndarray, atoms: np.ndarray | None = None) -> ErrorStats:
    """The errors of ``mean`` against ``y`` (``[rows, dim]`` each); ``atoms`` (per structure) gives a
    total energy's MAE per atom."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    mean = np.asarray(mean, dtype=np.float64).reshape(-1)
    if y.shape != mean.shape or y.size == 0:
        raise ValueError(f"head {head.name!r}: {y.size} targets for {mean.size} predictions")
    err = mean - y
    spread = float(np.sum((y - y.mean()) ** 2))
    r2 = None if spread <= 0 else 1.0 - float(np.sum(err * err)) / spread
    per_atom = None
    if is_energy(head):
        if energy_unit(head.unit).per_atom:
            per_atom = float(np.mean(np.abs(err)))
        elif atoms is not None:
            per_atom = float(np.mean(np.abs(err) / np.maximum(np.asarray(atoms, dtype=np.float64), 1.0)))
    return ErrorStats(int(y.size), float(np.mean(np.abs(err))), float(np.sqrt(np.mean(err * err))), r2, per_atom)


@dataclass(frozen=True)
class HeadAccuracy:
    """One head's errors on the split and its baseline's (None: no baseline for it)."""

    head: HeadSpec
    stats: ErrorStats
    baseline: HeadBaseline | None = None

    @property
    def ratio(self) -> float | None:
        """The ensemble's MAE over the baseline's (below 1: better than the baseline)."""
        if self.baseline is None or not self.baseline.mae > 0:
            return None
        return self.stats.mae / self.baseline.mae


@dataclass
class AccuracyReport:
    """Every head's :class:`HeadAccuracy` on ``split`` (``structures`` of them); ``baseline_note``
    says why there are no baselines, when there are none."""

    split: str
    structures: int
    heads: dict[str, HeadAccuracy]
    baseline_fit_split: str | None = None
    baseline_note: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"split": self.split, "structures": self.structures, "baseline_fit_split": self.baseline_fit_split,
                "baseline_note": self.baseline_note,
                "heads": {h: {"unit": a.head.unit, **asdict(a.stats), "ratio_to_baseline": a.ratio,
                              "baseline": None if a.baseline is None else asdict(a.baseline)}
                          for h, a in self.heads.items()}}

    def format_table(self) -> str:
        """One line per head (and one per atom for an energy) with the baseline beside it."""
        fit = f"; baselines fitted on the {self.baseline_fit_split}" if self.baseline_fit_split else ""
        w = max([len("head")] + [len(n) + (len(PER_ATOM_ROW) if a.stats.mae_per_atom is not None else 0)
                                 for n, a in self.heads.items()]) + 2
        lines = [f"accuracy on the {self.split} ({self.structures} structures){fit}:",
                 f"  {'head':<{w}}{'unit':<10}{'MAE':>10}{'RMSE':>10}{'R2':>7}{'baseline MAE':>14}{'MAE/baseline':>14}"
                 "  baseline"]
        for name, acc in self.heads.items():
            s, b = acc.stats, acc.baseline
            r2 = "-" if s.r2 is None else f"{s.r2:.3f}"
            ratio = "-" if acc.ratio is None else f"{acc.ratio:.3g}"
            lines.append(f"  {name:<{w}}{acc.head.unit or '-':<10}{s.mae:>10.4g}{s.rmse:>10.4g}{r2:>7}"
                         f"{'-' if b is None else format(b.mae, '.4g'):>14}{ratio:>14}"
                         f"  {'-' if b is None else b.description}")
            if s.mae_per_atom is not None:
                mine = in_mev_per_atom(s.mae_per_atom, acc.head.unit)
                theirs = None if b is None or b.mae_per_atom is None else in_mev_per_atom(b.mae_per_atom, acc.head.unit)
                per_ratio = "-" if not theirs else f"{mine / theirs:.3g}"
                lines.append(f"  {name + PER_ATOM_ROW:<{w}}{MEV_PER_ATOM:<10}{mine:>10.4g}{'':>10}{'':>7}"
                             f"{'-' if theirs is None else format(theirs, '.4g'):>14}{per_ratio:>14}")
        if self.baseline_note:
            lines.append(f"  no baselines: {self.baseline_note}")
        lines.extend(f"  {note}" for note in self.notes)
        return "\n".join(lines)


def accuracy_report(heads: Sequence[HeadSpec], targets: dict[str, np.ndarray], means: dict[str, np.ndarray],
                    atoms: np.ndarray, split: str, baselines: Baselines | None = None,
                    baseline_note: str | None = None) -> AccuracyReport:
    """The report of ``means`` against ``targets`` (``{head: [rows, dim]}``) of the structures with
    ``atoms`` atoms each, for the heads with both, beside ``baselines``."""
    out = {}
    for head in heads:
        if head.name in targets and head.name in means:
            stats = error_stats(head, targets[head.name], means[head.name], atoms)
            out[head.name] = HeadAccuracy(head, stats, None if baselines is None else baselines.get(head.name))
    return AccuracyReport(split, len(atoms), out, baselines.fit_split if baselines is not None else None,
                          baseline_note)


def split_baselines(dataset: str | os.PathLike, split: str,
                    fit_split: str = "trainset") -> tuple[Baselines | None, str | None]:
    """The dataset's baselines scored on ``split``, or None and why not (a missing training split)."""
    from hydragnn_ensemble.baseline import fit_baselines

    try:
        return fit_baselines(dataset, split, fit_split), None
    except ValueError as exc:
        return None, str(exc)


def evaluate_split(ensemble_dir: str | os.PathLike, dataset: str | os.PathLike, split: str = "testset",
                   batch_size: int = 32, progress: bool = False) -> AccuracyReport:
    """Run the ensemble on ``split`` of ``dataset`` and report it beside the baselines."""
    from ensemble.predictor import EnsemblePredictor, read_split, split_targets

    predictor = EnsemblePredictor(ensemble_dir, batch_size=batch_size, progress=progress, verify=False)
    graphs = read_split(dataset, split)
    if not graphs:
        raise ValueError(f"{dataset}: the {split} is empty")
    prediction = predictor.predict_graphs(graphs)
    baselines, why = split_baselines(dataset, split)
    atoms = np.array([g.num_nodes for g in graphs])
    return accuracy_report(list(predictor.heads), split_targets(graphs, predictor.heads),
                           {h: p.mean for h, p in prediction.heads.items()}, atoms, split, baselines, why)
