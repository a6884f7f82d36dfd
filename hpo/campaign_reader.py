"""Reading a campaign directory, running or finished, here or copied elsewhere: one way for every reader.

:func:`read_campaign_dir` returns what ``report``, ``select`` and ``export`` need: the state rebuilt
from the journal (or, for a directory that only has ``results.csv``, from that table), the frozen
campaign (its objective key and dataset), the frozen base config, and the run directory of every
trial. It never takes the lock: a running campaign can be read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpo.campaign import FrozenCampaign
from hpo.campaign_dir import CampaignDir
from hpo.journal import read_journal
from hpo.state import CampaignState

class CampaignReadError(ValueError):
    """A campaign directory that cannot be read (missing, unreadable journal or frozen files)."""


@dataclass
class CampaignRecord:
    """A campaign directory as read (see the module docstring)."""

    cdir: CampaignDir
    state: CampaignState | None  # None: no journal (and no results.csv)
    frozen: FrozenCampaign  # the frozen campaign.yaml (or the journal's campaign_started copy)
    base_config: dict[str, Any] | None

    @property
    def objective_key(self) -> str:
        return self.frozen.objective.text

    @property
    def dataset(self) -> Path | None:
        return self.frozen.dataset

    def trial_ids(self) -> list[int]:
        """Every trial the journal knows or that has a directory, ascending."""
        ids = set(self.state.trials) if self.state is not None else set()
        return sorted(ids | set(self.cdir.trial_ids_on_disk()))


def _state(cdir: CampaignDir) -> CampaignState | None:
    if not cdir.journal.exists():
        if cdir.results_csv.exists():
            from hpo.results_table import state_from_results_csv

            return state_from_results_csv(cdir.results_csv)
        return None
    try:
        contents = read_journal(cdir.journal)  # a torn last line (a running campaign's) is left out
        return CampaignState.replay(contents.events, contents.where(cdir.journal))
    except ValueError as exc:
        detail = str(exc).removeprefix(f"{cdir.journal}: ")
        raise CampaignReadError(f"{cdir.journal}: cannot replay the journal: {detail}") from exc


def read_campaign_dir(campaign_dir: str | os.PathLike) -> CampaignRecord:
    """Read ``campaign_dir`` (see the module docstring)."""
    from hpo.campaign import load_frozen_dict

    cdir = CampaignDir.at(campaign_dir)
    if not cdir.root.is_dir():
        raise CampaignReadError(f"{cdir.root}: campaign directory does not exist")
    state = _state(cdir)
    frozen = FrozenCampaign.from_dict({})
    if cdir.campaign_yaml.exists():
        try:
            frozen = FrozenCampaign.from_dict(load_frozen_dict(cdir.root))
        except ValueError as exc:
            raise CampaignReadError(str(exc)) from exc
    elif state is not None and state.campaign is not None:
        frozen = state.campaign
    base = None
    if cdir.base_config.exists():
        try:
            base = json.loads(cdir.base_config.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CampaignReadError(f"{cdir.base_config}: cannot read the frozen base config ({exc})") from exc
    return CampaignRecord(cdir, state, frozen, base)
