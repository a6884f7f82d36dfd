"""Fit the ensemble's uncertainty model on the training and validation splits, report on the test split.

:func:`calibrate` (``select --calibrate``):

1. runs the members on the training split (``reference_split``) and fits, per member, where the
   training data lies in its representation (:class:`~ensemble.latent.LatentReference`), and the
   input domain of the training inputs (:class:`~ensemble.domain.InputDomain`);
2. runs them on the calibration split (``fit_split``: the dataset's ``calset`` when it has one,
   structures no training, early stopping or member selection saw; else the validation split,
   with a warning that it was already used) and fits each head's uncertainty model
   (:func:`~ensemble.uncertainty.fit_head`: term weights by NLL, the distance limit);
3. reports the test split (``eval_split``) before (the members' raw mixture std) and after, and
   the ensemble's errors beside the baselines it must beat (:mod:`ensemble.accuracy`: energies
   also per atom), writes ``calibration/calibration.json`` and PNG plots (calibration curve,
   parity plot with MAE and R²), and stores the model in the ensemble directory
   (``uncertainty.npz`` and the manifest's ``uncertainty``).

Nothing is fitted on the test split; the reported test metrics are honest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ensemble.accuracy import AccuracyReport, accuracy_report, split_baselines
from ensemble.combine import head_inputs
from ensemble.domain import InputDomain, composition_features
from ensemble.latent import LatentReference
from ensemble.manifest import UncertaintyInfo, read_manifest, sha256_of, write_manifest
from ensemble.metrics import (  # re-exported: the calibration API of earlier versions
    HeadCalibration,
    calibration_metrics,
    coverage_curve,
    fit_std_scale,
    spearman,
)
from ensemble.predictor import (
    EnsemblePredictor,
    graph_index,
    member_prefix,
    node_elements,
    node_offsets,
    read_split,
    split_targets,
)
from ensemble.uncertainty import HeadUncertainty, fit_head, fit_strain_response

UNCERTAINTY_FILE = "uncertainty.npz"
#: fewer structures than this in a split that fits or reports the uncertainty model get a warning:
#: a 95% coverage moves in steps of 1/n, and a percentile limit or a term weight fitted on a handful
#: of structures is noise
MIN_SPLIT_GRAPHS = 30


def small_split_warning(split: str, count: int, use: str) -> str | None:
    """A warning naming ``split`` when its ``count`` structures are too few for ``use``."""
    if count >= MIN_SPLIT_GRAPHS:
        return None
    return (f"the {split} has {count} structure(s), too few to {use} (at least {MIN_SPLIT_GRAPHS} are needed "
            f"for figures that mean something: a coverage moves in steps of 1/{max(count, 1)}); give that split "
            "more structures (build-graphs --fractions, e.g. 0.6,0.2,0.2, or more data)")

__all__ = ["CalibrationReport", "HeadCalibration", "calibrate", "calibration_metrics", "coverage_curve",
           "fit_std_scale", "spearman"]


@dataclass
class CalibrationReport:
    """Models fitted on ``fit_split`` and the metrics on ``eval_split`` before/after."""

    models: dict[str, HeadUncertainty]
    before: dict[str, HeadCalibration]
    after: dict[str, HeadCalibration]
    fit_split: str = "valset"
    eval_split: str = "testset"
    in_domain: float | None = None  # fraction of eval graphs in the applicability domain
    plots: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # head -> why it was not calibrated
    warnings: list[str] = field(default_factory=list)  # splits too small, no test structure in the domain
    accuracy: AccuracyReport | None = None  # the ensemble's errors on eval_split beside the baselines

    def to_dict(self) -> dict:
        return {"models": {h: m.model_dump() for h, m in self.models.items()}, "fit_split": self.fit_split,
                "eval_split": self.eval_split, "in_domain": self.in_domain,
                "before": {h: asdict(m) for h, m in self.before.items()},
                "after": {h: asdict(m) for h, m in self.after.items()}, "plots": self.plots,
                "skipped": self.skipped, "warnings": self.warnings,
                "accuracy": None if self.accuracy is None else self.accuracy.to_dict()}

    def format_table(self) -> str:
        """A plain-text table, one line per head (after calibration)."""
        lines = [f"{'head':<18}{'MAE':>10}{'RMSE':>10}{'mean std':>10}{'NLL':>8}{'cov68':>7}{'cov95':>7}"
                 f"{'ZMS':>7}{'spearman':>9}  weights"]
        for head, m in self.after.items():
            rho = "-" if m.spearman is None else f"{m.spearman:.2f}"
            model = self.models[head]
            weights = " ".join(f"{k} {v:.3g}" for k, v in model.weights.items())
            if model.groups is not None:
                weights += f"; std x {'/'.join(f'{v:.2f}' for v in model.groups.scales)} by {model.groups.score}"
            lines.append(f"{head:<18}{m.mae:>10.4g}{m.rmse:>10.4g}{m.mean_std:>10.4g}{m.nll:>8.3f}"
                         f"{m.coverage_68:>7.2f}{m.coverage_95:>7.2f}{m.zms:>7.2f}{rho:>9}  {weights}")
        for head, why in self.skipped.items():
            lines.append(f"{head:<18}not calibrated: {why}")
        if self.in_domain is not None:
            lines.append(f"in the applicability domain: {100 * self.in_domain:.0f}% of the {self.eval_split}")
        return "\n".join(lines)


def _fit_references(predictor: EnsemblePredictor, graphs: list) -> tuple[dict[int, LatentReference], InputDomain]:
    outputs = predictor.member_outputs(graphs)
    ptr = np.concatenate([[0], np.cumsum([g.num_nodes for g in graphs])])
    z, index = node_elements(graphs), graph_index(ptr)
    latent = {tid: LatentReference.fit(out.features, z, index, len(graphs), seed=tid)
              for tid, out in zip(predictor.member_ids, outputs)}
    return latent, InputDomain.fit(graphs, predictor.cutoff)


def _warnings(split_warning: str | None, report: CalibrationReport, fit_count: int, eval_count: int,
              reference_count: int, reference_split: str) -> list[str]:
    """What the user should know about the splits the model was fitted and reported on."""
    warnings = [w for w in (
        split_warning, small_split_warning(report.fit_split, fit_count, "fit the uncertainty model on"),
        small_split_warning(report.eval_split, eval_count, "report calibration on")) if w]
    if report.in_domain == 0.0:
        warnings.append(
            f"none of the {eval_count} {report.eval_split} structure(s) lies in the applicability domain fitted on "
            f"{reference_count} {reference_split} structure(s): every prediction carries the out-of-domain term "
            "(see each structure's domain_reasons in predict's CSV); more training structures widen the domain")
    return warnings


def _graph_head_fits(predictor: EnsemblePredictor, train_targets: dict[str, np.ndarray],
                     fit: Callable[[np.ndarray], tuple | None]) -> dict[str, tuple]:
    """``fit(training targets)`` per graph head that has them, where it gives a model."""
    out = {}
    for head in predictor.heads:
        if head.level == "graph" and head.name in train_targets:
            response = fit(train_targets[head.name])
            if response is not None:
                out[head.name] = response
    return out


def _responses(predictor: EnsemblePredictor, reference: list,
               train_targets: dict[str, np.ndarray]) -> dict[str, tuple]:
    """Per graph head, from the training split (checked once): how its targets move with the strain
    descriptors (:func:`~ensemble.uncertainty.fit_strain_response`, composition as covariates)."""
    domain = predictor.domain
    if domain is None or not domain.scale_coef:
        return {}
    check = domain.check(reference)
    ptr = node_offsets(reference)
    strain = check.graph_strain(ptr)
    if strain is None:
        return {}
    covariates = composition_features(node_elements(reference), graph_index(ptr), len(reference), domain.elements)
    return _graph_head_fits(predictor, train_targets, lambda y: fit_strain_response(strain, covariates, y))


def _fit_models(predictor: EnsemblePredictor, reference: list,
                fit_graphs: list) -> tuple[dict[str, HeadUncertainty], dict[str, str]]:
    """Each head's uncertainty model fitted on ``fit_graphs`` (responses on the ``reference``
    training graphs), and the heads skipped with the reason."""
    train_targets = split_targets(reference, predictor.heads)
    responses = _responses(predictor, reference, train_targets)
    fit_y = split_targets(fit_graphs, predictor.heads)
    fit_inputs = head_inputs(predictor.heads, predictor.member_ids, predictor.weights,
                             predictor.observe(fit_graphs), predictor.head_weights)
    models: dict[str, HeadUncertainty] = {}
    skipped: dict[str, str] = {}
    for head, hi in fit_inputs.items():
        if head not in fit_y:
            skipped[head] = "no targets in the dataset"
            continue
        try:
            models[head] = fit_head(hi.terms, hi.mean - fit_y[head], train_targets.get(head), responses.get(head))
        except ValueError as exc:
            skipped[head] = str(exc)
    return models, skipped


def _store(root: Path, latent: dict[int, LatentReference], domain: InputDomain,
           models: dict[str, HeadUncertainty], fit_split: str, reference_split: str) -> None:
    arrays: dict[str, np.ndarray] = {}
    for tid, ref in latent.items():
        arrays.update(ref.to_arrays(member_prefix(tid)))
    tmp = root / (UNCERTAINTY_FILE + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, root / UNCERTAINTY_FILE)
    manifest = read_manifest(root, verify=False)
    manifest.calibration = {}
    manifest.uncertainty = UncertaintyInfo(
        file=UNCERTAINTY_FILE, sha256=sha256_of(root / UNCERTAINTY_FILE), fit_split=fit_split,
        reference_split=reference_split, domain=asdict(domain),
        heads={h: m.model_dump() for h, m in models.items()})
    write_manifest(root, manifest)


def default_fit_split(dataset: str | os.PathLike) -> tuple[str, str | None]:
    """The split to fit the uncertainty model on and, when it is not a split of its own, a warning."""
    from graph_builders.store import CALIBRATION_SPLIT, open_dataset

    with open_dataset(dataset) as store:
        if CALIBRATION_SPLIT in store.split_names and store.num_graphs(CALIBRATION_SPLIT) > 0:
            return CALIBRATION_SPLIT, None
    return "valset", (f"{dataset} has no calibration split: the uncertainty model is fitted on the valset, which "
                      "already chose the epochs and the members, so its coverage is optimistic; build the data "
                      "with a fourth fraction (build-graphs/demo-data --fractions 0.7,0.1,0.1,0.1)")


def calibrate(ensemble_dir: str | os.PathLike, dataset: str | os.PathLike | None = None, *,
              fit_split: str | None = None, eval_split: str = "testset", reference_split: str = "trainset",
              store: bool = True, plots: bool = True, progress: bool = False) -> CalibrationReport:
    """Fit and store the uncertainty model (see the module docstring); ``dataset`` defaults to
    the manifest's, ``fit_split`` to :func:`default_fit_split`'s choice."""
    root = Path(ensemble_dir)
    manifest = read_manifest(root)
    dataset = dataset or manifest.dataset
    if dataset is None:
        raise ValueError(f"{root}: the manifest records no dataset; pass one to calibrate on")
    fit_split, split_warning = (fit_split, None) if fit_split is not None else default_fit_split(dataset)
    predictor = EnsemblePredictor(root, progress=progress, verify=False)
    predictor.domain, predictor.latent, predictor.models = None, {}, {}  # start from the raw members
    reference = read_split(dataset, reference_split)
    predictor.latent, predictor.domain = _fit_references(predictor, reference)
    fit_graphs = read_split(dataset, fit_split)
    models, skipped = _fit_models(predictor, reference, fit_graphs)
    eval_graphs = read_split(dataset, eval_split)
    eval_y = split_targets(eval_graphs, predictor.heads)
    observed = predictor.observe(eval_graphs)
    raw = predictor.combine(observed, {})
    calibrated = predictor.combine(observed, models)
    before = {h: calibration_metrics(eval_y[h], raw.heads[h].mean, raw.heads[h].std) for h in models if h in eval_y}
    after = {h: calibration_metrics(eval_y[h], calibrated.heads[h].mean, calibrated.heads[h].std) for h in before}
    in_domain = float(np.mean(calibrated.in_domain)) if calibrated.in_domain is not None else None
    report = CalibrationReport(models, before, after, fit_split, eval_split, in_domain, skipped=skipped)
    atoms = np.array([g.num_nodes for g in eval_graphs])
    report.accuracy = accuracy_report(list(predictor.heads), eval_y, {h: p.mean for h, p in calibrated.heads.items()},
                                      atoms, eval_split, *split_baselines(dataset, eval_split, reference_split))
    report.warnings = _warnings(split_warning, report, len(fit_graphs), len(eval_graphs), len(reference),
                                reference_split)
    out = root / "calibration"
    out.mkdir(exist_ok=True)
    if plots:
        from ensemble.plots import calibration_curve_plot, parity_plot

        for head in after:
            hp, hr = calibrated.heads[head], raw.heads[head]
            report.plots.append(str(calibration_curve_plot(
                eval_y[head], hp.mean, hr.std, hp.std, out / f"calibration_{head}.png", head)))
            report.plots.append(str(parity_plot(
                eval_y[head], hp.mean, hp.std, out / f"parity_{head}.png", hp.head, atoms)))
    tmp = out / "calibration.json.tmp"
    tmp.write_text(json.dumps(report.to_dict(), indent=2))
    os.replace(tmp, out / "calibration.json")
    if store:
        _store(root, predictor.latent, predictor.domain, models, fit_split, reference_split)
    return report
