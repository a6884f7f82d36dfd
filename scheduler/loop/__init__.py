"""Rank 0's decisions, shared by the MPI runtime (:mod:`scheduler.runtime`) and the simulator
(:mod:`scheduler.simulator`): the trial book (waiting / running / sent ahead), the loop's rules
(top-up, starts, prefetch, retries, failure threshold, stop) and the outcome counts."""

from scheduler.loop.book import TrialBook
from scheduler.loop.campaign_loop import CampaignLoop, LoopActions, LoopRules, PlacementStuckError
from scheduler.loop.outcomes import Outcomes
from scheduler.loop.records import AttemptEnd
from scheduler.loop.trials import Candidate, CandidateSource, QueuedTrial, RunningTrial, TrialSpec

__all__ = [
    "AttemptEnd", "CampaignLoop", "Candidate", "CandidateSource", "LoopActions", "LoopRules", "Outcomes",
    "PlacementStuckError", "QueuedTrial", "RunningTrial", "TrialBook", "TrialSpec",
]
