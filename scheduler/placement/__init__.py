"""Placement policies behind one interface (:class:`PlacementPolicy`)."""

from scheduler.placement.base import Decision, PlacementPolicy, TrialRequest
from scheduler.placement.fifo import FifoPolicy, FifoSkipPolicy
from scheduler.placement.fixed_block import FixedBlockPolicy
from scheduler.placement.load_aware import LoadAwarePolicy, Reservation
from scheduler.placement.registry import (
    DEFAULT_POLICY,
    POLICY_FACTORIES,
    POLICY_NAMES,
    UnknownPolicyError,
    make_policy,
)

__all__ = [
    "DEFAULT_POLICY", "POLICY_FACTORIES", "POLICY_NAMES", "Decision", "FifoPolicy", "FifoSkipPolicy",
    "FixedBlockPolicy", "LoadAwarePolicy", "PlacementPolicy", "Reservation",
    "TrialRequest", "UnknownPolicyError", "make_policy",
]
