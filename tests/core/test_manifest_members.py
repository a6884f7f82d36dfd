"""The members an ensemble's manifest.json lists, read below the ensemble package (the report)."""

from __future__ import annotations

import json

import pytest

from hydragnn_ensemble.manifest_members import MANIFEST_NAME, ManifestMember, read_manifest_members


def test_members_read_typed_whatever_else_the_manifest_holds(tmp_path):
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"format": "anything", "members": [
        {"trial_id": 3, "weight": 1, "objective": 0.25, "checkpoint": "members/trial_3.pt"},
        {"trial_id": 7, "weight": 0.5}]}))
    assert read_manifest_members(tmp_path) == [ManifestMember(3, 1.0, 0.25), ManifestMember(7, 0.5, None)]
    assert isinstance(read_manifest_members(tmp_path)[0].weight, float)


@pytest.mark.parametrize("manifest, message", [
    (None, "no manifest.json (not an ensemble directory)"),
    ("not json", "manifest.json: not a readable ensemble manifest (JSONDecodeError"),
    ({"members": {"trial_id": 1}}, "manifest.json: not an ensemble manifest (no list of members)"),
    ({"members": [{"trial_id": "3"}]}, "manifest.json: not an ensemble manifest (member 0: trial_id '3' is not an integer)"),
    ({"members": [{"trial_id": 3, "weight": True}]}, "(member 0: weight True is not a number)"),
])
def test_what_is_no_ensemble_manifest_is_named(tmp_path, manifest, message):
    if manifest is not None:
        (tmp_path / MANIFEST_NAME).write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_manifest_members(tmp_path)
