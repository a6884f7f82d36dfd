"""One place validates a campaign file (:func:`scheduler.campaign_file.load_checked_campaign`):
the schema and the stopper, then the placement policy's name and the GPU-sharing rule against its
curve; every list of names in an error or a --help is read from its registry, so a policy or a
stopper registered for a test is offered everywhere with no other edit."""

from __future__ import annotations

import json

import pytest
from campaign_testkit import write_campaign

from hpo.campaign import CampaignConfigError
from hpo.stoppers import STOPPERS, NoStopper
from hydragnn_ensemble.cli import build_parser
from scheduler.campaign_file import load_checked_campaign
from scheduler.placement import registry


def _help_of(command: str) -> str:
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return "".join(sub.choices[command].format_help().split())


def test_an_unknown_placement_is_refused_when_the_file_is_loaded(tmp_path, monkeypatch):
    with pytest.raises(CampaignConfigError, match=r"campaign.yaml: placement: placement 'best-fit' is not available; "
                                                  r"choose one of \['fifo', 'fifo-skip'"):
        load_checked_campaign(write_campaign(tmp_path / "a", placement="best-fit"))
    monkeypatch.setitem(registry.POLICY_FACTORIES, "newest-policy", registry.FifoPolicy)
    assert load_checked_campaign(write_campaign(tmp_path / "b", placement="newest-policy")).config.placement == \
        "newest-policy"
    with pytest.raises(CampaignConfigError, match="'load-aware', 'newest-policy'"):
        load_checked_campaign(write_campaign(tmp_path / "c", placement="best-fit"))
    assert "newest-policy" in _help_of("simulate")


def test_a_registered_stopper_is_accepted_and_named_in_the_error(tmp_path, monkeypatch):
    class Patient(NoStopper):
        name = "patient"

    monkeypatch.setitem(STOPPERS, "patient", Patient)
    loaded = load_checked_campaign(write_campaign(tmp_path / "a", early_stopping={"method": "patient"}))
    assert loaded.config.early_stopping.method == "patient"
    with pytest.raises(CampaignConfigError, match=r"'none', 'pareto-asha', 'patient'\]"):
        load_checked_campaign(write_campaign(tmp_path / "b", early_stopping={"method": "hyperband"}))


def test_gpu_sharing_is_checked_against_its_curve_at_load_time(tmp_path):
    curve = tmp_path / "curve.json"
    curve.write_text(json.dumps({"aggregate": {"1": 1.0, "2": 1.6}, "source": "measured"}))
    ok = write_campaign(tmp_path / "a", resources={"gpu_sharing": "2", "colocation_curve": str(curve)})
    assert load_checked_campaign(ok).sharing(64.0).per_gpu == 2
    wide = write_campaign(tmp_path / "b", resources={"gpu_sharing": "4", "colocation_curve": str(curve)})
    with pytest.raises(CampaignConfigError, match="campaign.yaml: resources.gpu_sharing: .*4"):
        load_checked_campaign(wide)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(CampaignConfigError, match="resources.gpu_sharing: .*bad.json"):
        load_checked_campaign(write_campaign(tmp_path / "c", resources={"gpu_sharing": "2", "colocation_curve": str(bad)}))
