"""The one place a campaign file is validated, by every command that runs or plans a campaign.

:func:`hpo.campaign.load_campaign` checks the schema, the files and the stopper (its registry,
:data:`hpo.stoppers.STOPPERS`, lives in the same layer). What only the scheduler's layer knows is
checked here, right after, before anything starts: the placement policy's name (its registry,
:data:`scheduler.placement.registry.POLICY_FACTORIES`) and the GPU-sharing rule against its measured
co-location curve (read once). A bad value is a :class:`hpo.campaign.CampaignConfigError` naming
the file and the key."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from hpo.campaign import CampaignConfig, CampaignConfigError, load_campaign
from scheduler.placement.registry import UnknownPolicyError, check_policy_name
from scheduler.sharing import ColocationCurve, GpuSharing, SharingError


@dataclass(frozen=True)
class CheckedCampaign:
    """A campaign file every check passed, with its co-location curve (None: no sharing)."""

    config: CampaignConfig
    curve: ColocationCurve | None

    def sharing(self, device_memory_gb: float) -> GpuSharing:
        """The campaign's GPU-sharing rule on devices of ``device_memory_gb`` (the layout says)."""
        return GpuSharing.parse(self.config.resources.gpu_sharing, device_memory_gb, self.curve,
                                self.config.trial_time_limit_s)


def load_checked_campaign(path: str | os.PathLike, overrides: Mapping[str, Any] | None = None) -> CheckedCampaign:
    """The campaign at ``path`` (``overrides`` replace its keys before validation), checked whole."""
    cfg = load_campaign(path, overrides)
    try:
        check_policy_name(cfg.placement)
    except UnknownPolicyError as exc:
        raise CampaignConfigError(f"{path}: placement: {exc}") from None
    res = cfg.resources
    try:
        curve = ColocationCurve.read(res.colocation_curve) if res.colocation_curve is not None else None
        checked = CheckedCampaign(cfg, curve)
        checked.sharing(res.device_memory_gb or 1.0)  # the rule against the curve: refused now, not at launch
    except SharingError as exc:
        raise CampaignConfigError(f"{path}: resources.gpu_sharing: {exc}") from None
    return checked
