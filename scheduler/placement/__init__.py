"""Placement policies behind one interface (:class:`PlacementPolicy`)."""

from scheduler.placement.base import Decision, PlacementPolicy, TrialRequest, pick_slots
from scheduler.placement.first_fit import FirstFitPolicy

__all__ = ["Decision", "FirstFitPolicy", "PlacementPolicy", "TrialRequest", "pick_slots"]
