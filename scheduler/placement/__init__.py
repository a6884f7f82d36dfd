"""Placement policies behind one interface (:class:`PlacementPolicy`)."""

from scheduler.placement.base import Decision, PlacementPolicy, TrialRequest
from scheduler.placement.fifo import FifoPolicy, FifoSkipPolicy
from scheduler.placement.fixed_block import FixedBlockPolicy
from scheduler.placement.load_aware import LoadAwarePolicy, Reservation
from scheduler.placement.registry import (
    DEFAULT_POLICY,
    POLICY_FACTORIES,
    UnknownPolicyError,
    check_policy_name,
    make_policy,
    policy_names,
)

__all__ = [
    "DEFAULT_POLICY", "POLICY_FACTORIES", "Decision", "FifoPolicy", "FifoSkipPolicy",
    "FixedBlockPolicy", "LoadAwarePolicy", "PlacementPolicy", "Reservation",
    "TrialRequest", "UnknownPolicyError", "check_policy_name", "make_policy", "policy_names"
]
