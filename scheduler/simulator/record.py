"""What a simulated campaign leaves: the campaign loop's journal events, folded into a
:class:`hpo.state.CampaignState` (the simulator's summary is derived from it, as ``report``
derives a real campaign's) and, given a directory, written there as a campaign directory
(``journal.jsonl``, ``results.csv``, ``sim.json``; no trial directories) that ``report`` reads like
a real one."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from hpo.campaign import FrozenCampaign
from hpo.campaign_dir import CampaignDir
from hpo.events import CampaignFinished, CampaignStarted, JournalEvent
from hpo.journal import Journal
from hpo.results_table import write_results_csv
from hpo.state import CampaignState
from hpo.status import PendingStatus, TrialStatus
from scheduler.simulator.results import SimAttempt, is_sim_json
from scheduler.simulator.workload import SimTrial

SIM_JSON = "sim.json"


def is_sim_campaign_dir(path: Path) -> bool:
    """True for a directory :class:`SimRecord` wrote (its ``sim.json``), which may be replaced."""
    return path.is_dir() and is_sim_json(path / SIM_JSON)


class SimRecord:
    """The loop's events of one simulation: folded into :attr:`state` as they come, and written to
    ``campaign_dir``'s journal when one is given (its earlier journal and results.csv replaced)."""

    def __init__(self, campaign: Mapping[str, Any], slots: int, campaign_dir: Path | None = None) -> None:
        self.state = CampaignState()
        self.cdir = CampaignDir.at(campaign_dir) if campaign_dir is not None else None
        self._journal: Journal | None = None
        if self.cdir is not None:
            self.cdir.root.mkdir(parents=True, exist_ok=True)
            for old in (self.cdir.journal, self.cdir.results_csv):
                old.unlink(missing_ok=True)
            self._journal = Journal(self.cdir.journal)
        self.take([CampaignStarted(time=0.0, campaign=FrozenCampaign.from_dict(campaign), resume=False,
                                   ranks=slots, slots=slots)])

    def take(self, events: list[JournalEvent]) -> None:
        """Fold ``events`` (and journal them)."""
        for event in events:
            self.state.apply(event)
        if self._journal is not None and events:
            self._journal.write_many(events)

    def close(self, reason: str, now: float) -> None:
        """The campaign ended at ``now`` for ``reason``: journal it, write results.csv."""
        self.take([CampaignFinished(time=now, reason=reason)])
        if self._journal is not None and self.cdir is not None:
            self._journal.fsync()
            self._journal.close()
            write_results_csv(self.state, self.cdir.results_csv)


def sim_attempts(state: CampaignState, by_id: Mapping[int, SimTrial], fixed_block: bool) -> list[SimAttempt]:
    """Every attempt that ended (or moved), by trial and attempt, with what the workload says it
    needed: the simulator's figures are computed from these."""
    attempts = []
    for tid, record in sorted(state.trials.items()):
        t = by_id[tid]
        for number, a in sorted(record.attempts.items()):
            moved = a.status == PendingStatus.MOVED
            if not (a.ended or moved) or a.start is None or a.end is None:
                continue
            held = tuple(a.slots)
            ok = moved or a.status != TrialStatus.FAILED  # a stopped trial did what was asked of it
            epochs = a.moved_after if moved else (a.result.epochs if ok and a.result is not None else None)
            objective = a.result.objective if t.curve is not None and a.result is not None and not moved else None
            attempts.append(SimAttempt(
                tid, number + 1, t.slots if fixed_block and len(held) > t.slots else len(held), held,
                record.suggested_time or 0.0, a.start, a.end, ok, objective=objective,
                stopped=a.status == TrialStatus.STOPPED, epochs=epochs, moved=moved,
                needed_slot_s=t.work_done(epochs) if ok and epochs is not None else 0.0))
    return attempts
