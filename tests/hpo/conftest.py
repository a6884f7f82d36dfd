"""Fixtures of the hpo tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hpo_testdata import BASE_CONFIG, SPACE


@pytest.fixture
def campaign_files(tmp_path: Path):
    """Write base_config.json, a dataset folder and a campaign.yaml; returns a writer that takes
    overrides of the campaign dict and returns the yaml path."""
    (tmp_path / "base.json").write_text(json.dumps(BASE_CONFIG))
    (tmp_path / "data.bp").mkdir()

    def write(**overrides):
        campaign = {
            "dataset": "data.bp",
            "base_config": "base.json",
            "search_space": SPACE,
            "max_trials": 12,
            "seed": 3,
        }
        campaign.update(overrides)
        campaign = {k: v for k, v in campaign.items() if v is not None}
        path = tmp_path / "campaign.yaml"
        path.write_text(yaml.safe_dump(campaign, sort_keys=False))
        return path

    return write

