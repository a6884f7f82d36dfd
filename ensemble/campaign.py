"""Read a campaign directory: which trials exist, which may join an ensemble, and why not.

A trial is an ensemble *candidate* only when all of these hold:

* the journal (``journal.jsonl``, when present) says its last attempt ended ``completed`` or
  ``timeout`` (``failed``, ``diverged``, ``running``, ``interrupted`` and ``suggested`` trials are
  never members);
* ``trials/<id>/result.json`` reads, has status ``completed`` (or ``timeout`` with a checkpoint:
  the trainer keeps the best epoch reached within the budget) and a finite objective;
* the checkpoint named in ``result.json`` exists inside its trial directory (a path leading out of
  it, ``../x`` or absolute, is refused: the ensemble directory copies only what the trial made).

Trials are ranked by the campaign's objective key (``objective`` by default; lower is better),
ties broken by trial id. :meth:`CampaignInfo.excluded_among_best` names the trials that would have
ranked among the best by the objective they reported (journal or result.json) but cannot join,
so that ``select`` never leaves out a good trial without saying so.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpo.campaign_reader import CampaignReadError, read_campaign_dir
from hpo.objective import objective_value
from hydragnn_ensemble.path_guard import PathGuardError, contained_path
from hydragnn_ensemble.result import STATUSES_WITH_OBJECTIVE, TrialResult, TrialStatus
from hydragnn_ensemble.run_dir import RunDir


@dataclass
class CampaignTrial:
    """One trial directory of a campaign and what is known about it."""

    trial_id: int
    run_dir: Path
    status: str  # final status, or running / interrupted / suggested / missing
    objective: float | None
    params: dict[str, Any] = field(default_factory=dict)
    result: TrialResult | None = None
    excluded_because: str | None = None  # None for a candidate
    reported_objective: float | None = None  # what the journal (else result.json) reported
    lineage: list[str] = field(default_factory=list)  # PBT: its exploits (hpo.state.Lineage.text)

    @property
    def eligible(self) -> bool:
        """True when the trial may join an ensemble."""
        return self.excluded_because is None

    @property
    def checkpoint_path(self) -> Path:
        if self.result is None or self.result.checkpoint is None:
            raise CampaignReadError(f"trial {self.trial_id}: has no checkpoint")
        try:
            return contained_path(self.run_dir, self.result.checkpoint, f"trial {self.trial_id}: checkpoint")
        except PathGuardError as exc:
            raise CampaignReadError(str(exc)) from None

    @property
    def config_path(self) -> Path:
        return RunDir(self.run_dir).config

    def config_dict(self) -> dict[str, Any]:
        """The trial's own HydraGNN config (``trials/<id>/config.json``)."""
        try:
            return json.loads(self.config_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CampaignReadError(f"trial {self.trial_id}: cannot read {self.config_path}: {exc}") from exc


@dataclass
class CampaignInfo:
    """A campaign directory: its trials (by id), the dataset it trained on, the objective key."""

    root: Path
    trials: dict[int, CampaignTrial]
    dataset: Path | None
    objective_key: str
    base_config: dict[str, Any] | None

    def ranked(self) -> list[CampaignTrial]:
        """Eligible trials, best objective first (ties: lower trial id)."""
        good = [t for t in self.trials.values() if t.eligible]
        return sorted(good, key=lambda t: (t.objective, t.trial_id))

    def excluded(self) -> list[CampaignTrial]:
        """Trials that can never be members, by trial id."""
        return [t for _, t in sorted(self.trials.items()) if not t.eligible]

    def excluded_among_best(self, n: int) -> list[CampaignTrial]:
        """Ineligible trials whose reported objective ranks them before the ``n``-th eligible one
        (they would have been among the best ``n``), best first."""
        scored = [t for t in self.trials.values()
                  if t.reported_objective is not None and math.isfinite(t.reported_objective)]
        out: list[CampaignTrial] = []
        eligible_seen = 0
        for trial in sorted(scored, key=lambda t: (t.reported_objective, t.trial_id)):
            if eligible_seen >= n:
                break
            if trial.eligible:
                eligible_seen += 1
            else:
                out.append(trial)
        return out


def _objective(result: TrialResult, key: str) -> float | None:
    """The campaign objective of a completed (or timed-out) trial's result."""
    return objective_value(result, key)


def read_campaign(campaign_dir: str | os.PathLike, include_stopped: bool = False) -> CampaignInfo:
    """Read every trial of ``campaign_dir`` and decide which are ensemble candidates. Trials the
    campaign's stopper ended early (``stopped``) are candidates only with ``include_stopped``: their
    best epoch is an early one, kept for the optimizer, not a finished model."""
    record = read_campaign_dir(campaign_dir)
    state, objective_key = record.state, record.objective_key
    trials: dict[int, CampaignTrial] = {}
    for trial_id in record.trial_ids():
        journal = state.trials.get(trial_id) if state is not None else None
        run = record.cdir.trial(trial_id)
        trial = CampaignTrial(trial_id, run.root, status="missing", objective=None,
                              params=dict(journal.params) if journal is not None else {},
                              lineage=[step.text() for step in journal.lineage] if journal is not None else [])
        journal_status = journal.status if journal is not None else None
        if run.result.exists():
            try:
                trial.result = TrialResult.read(run.result)
            except ValueError as exc:
                trial.excluded_because = str(exc)
        trial.status = journal_status or (trial.result.status if trial.result else "missing")
        if trial.excluded_because is None:
            trial.excluded_because = _exclusion(trial, journal_status, objective_key, include_stopped)
        if trial.excluded_because is None:
            trial.objective = _objective(trial.result, objective_key)
        trial.reported_objective = _reported_objective(trial, journal, objective_key)
        trials[trial_id] = trial
    if not trials:
        raise CampaignReadError(f"{record.cdir.root}: no trials (neither trials/<id>/ directories nor a journal)")
    return CampaignInfo(record.cdir.root, trials, record.dataset, objective_key, record.base_config)


def _reported_objective(trial: CampaignTrial, record, objective_key: str) -> float | None:
    """The trial's objective as the journal recorded it (None when the journal says it never finished);
    from result.json only for a campaign without a journal record of the trial."""
    if record is not None:
        return None if record.objective is None else float(record.objective)
    if trial.result is not None and trial.result.status in STATUSES_WITH_OBJECTIVE:
        return _objective(trial.result, objective_key)
    return None


#: Why a trial the campaign's stopper ended is not a member (unless ``include_stopped``).
STOPPED_EXCLUSION = "stopped early by the campaign's stopper (select --include-stopped to allow it)"


def _exclusion(trial: CampaignTrial, journal_status: str | None, objective_key: str,
               include_stopped: bool = False) -> str | None:
    """Why ``trial`` cannot be a member, or None."""
    if not include_stopped and TrialStatus.STOPPED in (journal_status, trial.result and trial.result.status):
        return STOPPED_EXCLUSION
    if journal_status is not None and journal_status not in STATUSES_WITH_OBJECTIVE:
        return f"journal status {journal_status}"
    result = trial.result
    if result is None:
        return "no result.json (unfinished)"
    if result.status not in STATUSES_WITH_OBJECTIVE:
        return f"status {result.status}" + (f": {result.failure_reason}" if result.failure_reason else "")
    if result.checkpoint is None:
        return f"status {result.status} without a checkpoint"
    try:
        checkpoint = trial.checkpoint_path
    except CampaignReadError as exc:
        return str(exc).removeprefix(f"trial {trial.trial_id}: ")
    if not checkpoint.is_file():
        return f"checkpoint {result.checkpoint} is missing"
    objective = _objective(result, objective_key)
    if objective is None or not math.isfinite(objective):
        return f"no finite {objective_key}"
    return None
