"""Build an ensemble directory from a campaign directory (``hydragnn-ensemble select``).

``build_ensemble`` chooses the members (top-K by objective, or greedy selection on the validation
predictions of the best M completed trials: one weight per member (``greedy``), one per member
and head (``greedy-per-head``, optionally bagged), or K equally weighted members whose errors
differ (``diverse``)), copies their checkpoints into
``ENSEMBLE_DIR/members/``, and writes ``manifest.json`` (see :mod:`ensemble.manifest`). The
directory is written under a temporary name and renamed into place when complete.

The ensemble directory may not be, contain or lie inside the campaign directory or the dataset,
and an existing one is replaced (``overwrite``, the CLI's ``--force``) only when it is an ensemble
directory (:func:`hydragnn_ensemble.path_guard.check_replaceable`): never an arbitrary directory.
Trials that would have ranked among the candidates by their reported objective but cannot join
(checkpoint missing, result.json unreadable, ...) are recorded in the manifest's
``selection.excluded`` with the reason.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from graph_builders.schema import HeadRegistry
from hydragnn_ensemble.path_guard import PathGuardError, check_no_overlap, check_replaceable
from ensemble.campaign import CampaignInfo, CampaignTrial, read_campaign
from ensemble.manifest import (
    MEMBERS_DIR,
    ExcludedTrial,
    Manifest,
    MemberEntry,
    SelectionInfo,
    is_ensemble_dir,
    sha256_of,
    write_manifest,
)
from ensemble.members import MemberModel, read_split, run_members, split_targets
from ensemble.selection import (
    Selection,
    SelectionError,
    diverse_selection,
    greedy_per_head,
    greedy_selection,
    inference_ms,
    select_topk,
    within_budget,
)

METHODS: tuple[str, ...] = ("topk", "greedy", "greedy-per-head", "diverse")
#: the methods that choose within a budget on the members' summed inference time
COST_AWARE_METHODS: tuple[str, ...] = ("topk", "greedy")


class EnsembleBuildError(ValueError):
    """The ensemble directory cannot be built (output exists, no dataset for greedy, ...)."""


@dataclass
class BuildOptions:
    """What ``select`` was asked."""

    top_k: int = 5
    method: str = "topk"
    candidates: int = 10  # greedy: the best M completed trials are candidates
    rounds: int | None = None  # greedy-per-head: picks per head (default top_k)
    bags: int = 1  # greedy-per-head: bootstrap resamples of the valset (Caruana's bagging)
    seed: int = 0  # greedy-per-head: seed of the resampling
    dataset: Path | None = None  # default: the campaign's dataset
    batch_size: int = 32
    overwrite: bool = False
    progress: bool = False
    include_stopped: bool = False  # trials the campaign's stopper ended early may be members
    max_inference_ms: float | None = None  # topk / greedy: the members' summed ms per graph stay within


def _load(trial: CampaignTrial):
    from hydragnn_ensemble.inference import load_checkpoint

    return load_checkpoint(trial.checkpoint_path)


def _dataset_of(info: CampaignInfo, options: BuildOptions) -> Path | None:
    return Path(options.dataset) if options.dataset is not None else info.dataset


def greedy_from_campaign(info: CampaignInfo, options: BuildOptions) -> Selection:
    """Greedy selection (joint, or per head for ``greedy-per-head``) over the best
    ``options.candidates`` trials on the dataset's valset."""
    dataset = _dataset_of(info, options)
    if dataset is None:
        raise EnsembleBuildError(f"{info.root}: greedy selection needs the dataset (pass --dataset)")
    ranked = within_budget(info.ranked(), options.max_inference_ms)[: max(options.candidates, 1)]
    if not ranked:
        raise SelectionError(f"{info.root}: no completed trial with a checkpoint"
                             + ("" if options.max_inference_ms is None else
                                f" that runs within {options.max_inference_ms:g} ms per graph"))
    members = []
    for trial in ranked:
        loaded = _load(trial)
        members.append(MemberModel(trial.trial_id, 1.0, loaded, float(loaded.spec.radius)))
    cutoff = max(m.radius for m in members)
    graphs = read_split(dataset, "valset")
    preds = [o.preds for o in run_members(members, graphs, cutoff=cutoff, batch_size=options.batch_size,
                                          progress=options.progress, desc="validation predictions")]
    heads = [h for h in members[0].loaded.heads.names if all(h in p for p in preds)]
    targets = split_targets(graphs, members[0].loaded.heads)
    heads = [h for h in heads if h in targets]
    if not heads:
        raise EnsembleBuildError(f"{dataset}: the valset has no targets of the members' heads")
    stacked = {h: np.stack([p[h] for p in preds]) for h in heads}
    if options.method == "greedy-per-head":
        return greedy_per_head(stacked, {h: targets[h] for h in heads}, options.top_k,
                               [t.trial_id for t in ranked], rounds=options.rounds,
                               bags=options.bags, seed=options.seed)
    if options.method == "diverse":
        return diverse_selection(stacked, {h: targets[h] for h in heads}, options.top_k,
                                 [t.trial_id for t in ranked])
    return greedy_selection(stacked, {h: targets[h] for h in heads}, options.top_k,
                            [t.trial_id for t in ranked], costs=[inference_ms(t) for t in ranked],
                            budget=options.max_inference_ms)


def choose_members(info: CampaignInfo, options: BuildOptions) -> Selection:
    """Run the selection method of ``options``."""
    if options.max_inference_ms is not None and options.method not in COST_AWARE_METHODS:
        raise SelectionError(f"a budget on the inference time works with the methods {COST_AWARE_METHODS}, "
                             f"not {options.method!r}")
    if options.method == "topk":
        return select_topk(info, options.top_k, options.max_inference_ms)
    if options.method in ("greedy", "greedy-per-head", "diverse"):
        if options.top_k < 1:
            raise SelectionError(f"top-k must be >= 1, got {options.top_k}")
        return greedy_from_campaign(info, options)
    raise EnsembleBuildError(f"unknown selection method {options.method!r}; use one of {METHODS}")


def _pool_size(options: BuildOptions) -> int:
    """How many of the best trials the method considers (top-K, or the greedy candidates)."""
    return options.top_k if options.method == "topk" else max(options.candidates, options.top_k)


def _union_heads(registries: list[HeadRegistry]) -> HeadRegistry:
    seen: dict[str, object] = {}
    for reg in registries:
        for head in reg:
            seen.setdefault(head.name, head)
    return HeadRegistry.of(seen.values())


def check_output(out: Path, inputs: list[Path], overwrite: bool) -> None:
    """Refuse an ensemble directory that overlaps the inputs or would replace something else."""
    try:
        check_no_overlap(out, inputs, "ensemble directory")
        check_replaceable(out, is_ensemble_dir, "ensemble directory", force=overwrite, needs_force=True)
    except PathGuardError as exc:
        raise EnsembleBuildError(str(exc)) from None


def _prepare_output(out: Path) -> Path:
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / MEMBERS_DIR).mkdir(parents=True)
    return tmp


def write_ensemble(info: CampaignInfo, selection: Selection, out: str | os.PathLike,
                   options: BuildOptions) -> Manifest:
    """Copy the selected members' checkpoints into ``out`` and write its manifest."""
    out = Path(out)
    _check_output_of(info, out, options)
    return _write(info, selection, out, options)


def _check_output_of(info: CampaignInfo, out: Path, options: BuildOptions) -> None:
    dataset = _dataset_of(info, options)
    check_output(out, [info.root] + ([dataset] if dataset is not None else []), options.overwrite)


def _write(info: CampaignInfo, selection: Selection, out: Path, options: BuildOptions) -> Manifest:
    dataset = _dataset_of(info, options)
    excluded = [ExcludedTrial(trial_id=t.trial_id, objective=t.reported_objective, reason=t.excluded_because)
                for t in info.excluded_among_best(_pool_size(options))]
    tmp = _prepare_output(out)
    try:
        entries: list[MemberEntry] = []
        registries: list[HeadRegistry] = []
        for j, (trial_id, weight) in enumerate(zip(selection.trial_ids, selection.weights)):
            trial = info.trials[trial_id]
            loaded = _load(trial)
            name = f"{MEMBERS_DIR}/trial_{trial_id}.pt"
            shutil.copyfile(trial.checkpoint_path, tmp / name)
            config = trial.config_dict() if trial.config_path.exists() else loaded.config.to_dict()
            registries.append(loaded.heads)
            entries.append(MemberEntry(
                trial_id=trial_id, checkpoint=name, sha256=sha256_of(tmp / name), weight=weight,
                objective=trial.objective, config=config, params=trial.params,
                metrics={h: vars(m) for h, m in trial.result.heads.items()},
                normalisation=loaded.normaliser.to_dict(), radius=float(loaded.spec.radius),
                potential_mode=loaded.spec.energy_head is not None,
                predicts_variance=bool(loaded.spec.predict_variance),
                head_weights={h: w[j] for h, w in selection.head_weights.items()}, lineage=trial.lineage))
        manifest = Manifest(
            campaign_dir=str(info.root.resolve()), dataset=str(dataset) if dataset else None,
            heads=_union_heads(registries).to_json(), graph_cutoff=max(e.radius for e in entries),
            members=entries,
            selection=SelectionInfo(method=selection.method, top_k=options.top_k,
                                    candidates=selection.candidates, history=selection.history,
                                    per_head=bool(selection.head_weights), excluded=excluded,
                                    max_inference_ms=options.max_inference_ms,
                                    inference_ms=_summed_inference_ms(info, selection)))
        write_manifest(tmp, manifest)
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _summed_inference_ms(info: CampaignInfo, selection: Selection) -> float | None:
    """The members' summed inference time per graph (None: a member never measured it)."""
    costs = [inference_ms(info.trials[t]) for t in selection.trial_ids]
    return None if any(c is None for c in costs) else float(sum(costs))


def build_ensemble(campaign_dir: str | os.PathLike, out: str | os.PathLike,
                   options: BuildOptions | None = None) -> Manifest:
    """Select members from ``campaign_dir`` and write the ensemble directory ``out``."""
    options = options or BuildOptions()
    info = read_campaign(campaign_dir, include_stopped=options.include_stopped)
    out = Path(out)
    _check_output_of(info, out, options)  # before the (greedy: costly) selection
    selection = choose_members(info, options)
    return _write(info, selection, out, options)
