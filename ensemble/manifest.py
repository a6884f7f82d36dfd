"""The ensemble directory's ``manifest.json``: members, weights, checksums, heads, calibration.

An ensemble directory is self-contained and portable::

    ENSEMBLE_DIR/manifest.json
    ENSEMBLE_DIR/members/trial_<id>.pt     the members' checkpoints, copied from the campaign
    ENSEMBLE_DIR/uncertainty.npz           latent references of the members (after calibration)

Each member entry records its trial id, its HydraGNN config, the checkpoint file name (relative to
the ensemble directory, which it may not leave: no ``..``, no absolute path, no link out) and that
file's sha256, its weight, its validation/test metrics and its
normalisation (read from its checkpoint). :func:`read_manifest` checks every checkpoint's presence
and checksum; a problem raises :class:`EnsembleIntegrityError` naming the member and the file.

Per-head greedy selection adds ``head_weights`` to each member (``{head: weight}``; a head's
weights sum to 1 over the members, a member may have 0 for a head): the predictor's mean of that
head uses them, its spread uses ``weight``. Heads without them use ``weight``; manifests written
before this field existed read unchanged (same format version).

Calibration (``select --calibrate``) adds ``uncertainty`` (:class:`UncertaintyInfo`): the input
domain and per-head term weights, plus the array file of the members' latent references. Older
manifests with only ``calibration`` (one std scale per head) read unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hydragnn_ensemble.manifest_members import MANIFEST_NAME
from hydragnn_ensemble.path_guard import PathGuardError, contained_path

MEMBERS_DIR = "members"
FORMAT = "hydragnn-ensemble-manifest"
VERSION = 1
WEIGHT_SUM_TOLERANCE = 1e-6  # member weights (and each head's) sum to 1 within this


class EnsembleIntegrityError(ValueError):
    """An ensemble directory whose manifest or member checkpoints are missing, changed or invalid."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MemberEntry(_Model):
    """One ensemble member."""

    trial_id: int
    checkpoint: str  # file name relative to the ensemble directory
    sha256: str
    weight: float = Field(gt=0.0)
    objective: float | None = None
    config: dict[str, Any]
    params: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, dict[str, Any]] = Field(default_factory=dict)  # result.json "heads"
    normalisation: dict[str, dict[str, list[float]]] = Field(default_factory=dict)
    radius: float  # graph radius the member reads (edges longer than this are dropped for it)
    potential_mode: bool = False
    predicts_variance: bool = False
    #: per-head weights (``greedy-per-head``); heads not listed use ``weight``
    head_weights: dict[str, float] = Field(default_factory=dict)
    #: population-based training: the member's exploits, ``<epoch>:<donor trial>@<donor's epoch>``
    #: oldest first (:class:`hpo.state.Lineage`); empty otherwise and in manifests written before it
    lineage: list[str] = Field(default_factory=list)

    def weight_for(self, head: str) -> float:
        """This member's weight for ``head`` (its per-head weight, else ``weight``)."""
        return float(self.head_weights.get(head, self.weight))


class ExcludedTrial(_Model):
    """A trial that would have ranked among the candidates by its reported objective but cannot
    be a member (checkpoint missing, result.json unreadable, ...)."""

    trial_id: int
    objective: float | None = None  # as the journal or result.json reported it
    reason: str


class SelectionInfo(_Model):
    """How the members were chosen."""

    method: str
    top_k: int
    candidates: list[int] = Field(default_factory=list)
    history: list[float] = Field(default_factory=list)
    per_head: bool = False  # members carry per-head weights
    #: trials that would have been candidates by objective but were left out, with the reason
    excluded: list[ExcludedTrial] = Field(default_factory=list)
    max_inference_ms: float | None = None  # the budget the members were chosen within (None: none)
    inference_ms: float | None = None  # the members' summed inference ms per graph (None: not measured)


class UncertaintyInfo(_Model):
    """The fitted uncertainty model (see :mod:`ensemble.uncertainty`): per head its term weights,
    the input domain of the training split, and the members' latent references, stored as plain
    arrays in ``file`` (numpy ``.npz``, read without pickle; sha256 checked like the checkpoints)."""

    file: str  # relative to the ensemble directory
    sha256: str
    fit_split: str = "valset"
    reference_split: str = "trainset"
    domain: dict[str, Any]  # ensemble.domain.InputDomain fields
    heads: dict[str, Any]  # head -> ensemble.uncertainty.HeadUncertainty fields


class Manifest(_Model):
    """``manifest.json`` (see the module docstring)."""

    format: str = FORMAT
    version: int = VERSION
    campaign_dir: str | None = None
    dataset: str | None = None  # the dataset the members were trained on (as recorded)
    heads: str  # the head registry JSON the ensemble predicts (union of the members' heads)
    graph_cutoff: float  # radius at which input graphs are built (the largest member radius)
    members: list[MemberEntry]
    selection: SelectionInfo
    calibration: dict[str, float] = Field(default_factory=dict)  # head -> std scale (before `uncertainty`)
    uncertainty: UncertaintyInfo | None = None  # the calibrated, distance-aware uncertainty model


def sha256_of(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def is_ensemble_dir(path: str | os.PathLike) -> bool:
    """True when ``path`` holds a manifest of this format (what ``select`` wrote and may replace)."""
    try:
        data = json.loads((Path(path) / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def member_checkpoint(root: str | os.PathLike, member: MemberEntry) -> Path:
    """The member's checkpoint file, which must lie inside the ensemble directory ``root``."""
    try:
        return contained_path(root, member.checkpoint, f"member trial {member.trial_id}: checkpoint")
    except PathGuardError as exc:
        raise EnsembleIntegrityError(f"{Path(root) / MANIFEST_NAME}: {exc}") from None


def write_manifest(ensemble_dir: str | os.PathLike, manifest: Manifest) -> Path:
    """Write ``manifest.json`` atomically (temporary file, fsync, rename); returns its path."""
    path = Path(ensemble_dir) / MANIFEST_NAME
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(manifest.model_dump(mode="json"), fh, indent=2, allow_nan=False)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def read_manifest(ensemble_dir: str | os.PathLike, verify: bool = True) -> Manifest:
    """Read and validate ``manifest.json``; with ``verify`` check each member's checkpoint
    (exists, sha256 matches). Raises :class:`EnsembleIntegrityError` naming what is wrong."""
    root = Path(ensemble_dir)
    path = root / MANIFEST_NAME
    if not path.is_file():
        raise EnsembleIntegrityError(f"{root}: not an ensemble directory (no {MANIFEST_NAME})")
    try:
        manifest = Manifest.model_validate(json.loads(path.read_text()))
    except RecursionError:
        raise EnsembleIntegrityError(f"{path}: invalid manifest: nested deeper than a manifest ever is") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        raise EnsembleIntegrityError(f"{path}: invalid manifest: {exc}") from exc
    if manifest.format != FORMAT or manifest.version != VERSION:
        raise EnsembleIntegrityError(
            f"{path}: format {manifest.format!r} version {manifest.version} is not {FORMAT!r} {VERSION}")
    if not manifest.members:
        raise EnsembleIntegrityError(f"{path}: the ensemble has no members")
    _check_weights(path, manifest)
    for member in manifest.members:
        member_checkpoint(root, member)
    if verify:
        verify_members(root, manifest)
    return manifest


def _check_weights(path: Path, manifest: Manifest) -> None:
    """Each member's weight finite and positive, its head weights finite and >= 0, and every head's
    weights summing to 1 over the members (as ``select`` writes them); an error names the member."""
    for member in manifest.members:
        if not (math.isfinite(member.weight) and member.weight > 0.0):
            raise EnsembleIntegrityError(
                f"{path}: member trial {member.trial_id}: weight {member.weight!r} is not finite and positive")
        bad = {h: w for h, w in member.head_weights.items() if not (math.isfinite(w) and w >= 0.0)}
        if bad:
            raise EnsembleIntegrityError(
                f"{path}: member trial {member.trial_id}: head weights {bad} are not finite and >= 0")
    heads = {h for m in manifest.members for h in m.head_weights}
    for head, total in [(None, sum(m.weight for m in manifest.members)),
                        *((h, sum(m.weight_for(h) for m in manifest.members)) for h in sorted(heads))]:
        if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
            what = "the members' weights" if head is None else f"head {head!r}'s weights"
            raise EnsembleIntegrityError(f"{path}: {what} sum to {total:.6g}, not 1")


def uncertainty_file(root: str | os.PathLike, manifest: Manifest) -> Path | None:
    """The uncertainty model's array file (inside the ensemble directory), None without one."""
    if manifest.uncertainty is None:
        return None
    try:
        return contained_path(root, manifest.uncertainty.file, "uncertainty file")
    except PathGuardError as exc:
        raise EnsembleIntegrityError(f"{Path(root) / MANIFEST_NAME}: {exc}") from None


def verify_members(root: Path, manifest: Manifest) -> None:
    """Check that every member checkpoint (and the uncertainty file) exists with its sha256."""
    path = uncertainty_file(root, manifest)
    if path is not None:
        if not path.is_file():
            raise EnsembleIntegrityError(f"{root}: the uncertainty file {manifest.uncertainty.file} is missing")
        if sha256_of(path) != manifest.uncertainty.sha256:
            raise EnsembleIntegrityError(f"{root}: checksum mismatch for {manifest.uncertainty.file}")
    for member in manifest.members:
        ckpt = member_checkpoint(root, member)
        if not ckpt.is_file():
            raise EnsembleIntegrityError(
                f"{root}: member trial {member.trial_id} is missing its checkpoint {member.checkpoint}")
        actual = sha256_of(ckpt)
        if actual != member.sha256:
            raise EnsembleIntegrityError(
                f"{root}: member trial {member.trial_id}: checksum mismatch for {member.checkpoint} "
                f"(manifest sha256 {member.sha256[:12]}..., file {actual[:12]}...)")
