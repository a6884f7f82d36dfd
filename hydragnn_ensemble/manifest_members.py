"""The members an ensemble directory lists in its ``manifest.json``, read where the ensemble package
cannot be: the campaign report (:mod:`hpo.report_html`) and the ``report --ensemble`` check.

This is a view, not the manifest's validation: :mod:`ensemble.manifest` owns the format (its
pydantic ``Manifest``, checksums, weights summing to 1) and names the file with
:data:`MANIFEST_NAME` from here. The view asks only what a members table shows, so a manifest that
lists its members' trial ids, weights and objectives reads here whatever else it holds or lacks.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MANIFEST_NAME", "ManifestMember", "read_manifest_members"]

#: The manifest's file name inside an ensemble directory.
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class ManifestMember:
    """One member as the manifest lists it; a field the entry leaves out is None."""

    trial_id: int | None
    weight: float | None  # its share of the ensemble's mean
    objective: float | None  # its trial's objective, as the campaign reported it


def _field(entry: dict[str, Any], key: str, kind: type, what: str) -> Any:
    """``entry[key]`` as ``kind`` (a float field takes an int too), None when absent; ValueError
    starting with ``what`` for anything else (a bool is no number)."""
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else kind):
        wanted = "a number" if kind is float else "an integer"
        raise ValueError(f"{what}: {key} {value!r} is not {wanted})")
    return kind(value)


def read_manifest_members(ensemble_dir: str | os.PathLike) -> list[ManifestMember]:
    """The members listed in an ensemble directory's ``manifest.json`` (trial id, weight, objective);
    ValueError naming the file when it is missing or not an ensemble manifest."""
    ensemble_dir = Path(ensemble_dir)
    manifest_path = ensemble_dir / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{ensemble_dir}: no {MANIFEST_NAME} (not an ensemble directory)") from None
    except (OSError, UnicodeError, ValueError) as exc:
        raise ValueError(f"{manifest_path}: not a readable ensemble manifest ({type(exc).__name__}: {exc})") from None
    members = manifest.get("members") if isinstance(manifest, dict) else None
    if not isinstance(members, list) or not all(isinstance(m, dict) for m in members):
        raise ValueError(f"{manifest_path}: not an ensemble manifest (no list of members)")
    out = []
    for i, m in enumerate(members):
        what = f"{manifest_path}: not an ensemble manifest (member {i}"
        out.append(ManifestMember(_field(m, "trial_id", int, what), _field(m, "weight", float, what),
                                  _field(m, "objective", float, what)))
    return out
