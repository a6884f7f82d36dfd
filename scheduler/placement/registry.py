"""Placement policies by name, the one registry: ``load-aware`` (default), ``fifo``, ``fifo-skip``,
``fixed-block``; ``first-fit`` is another name of ``fifo-skip`` (arrival order, skipping what does
not fit). The campaign's ``placement`` (checked with the rest of the campaign file by
:func:`scheduler.campaign_file.load_checked_campaign`, before anything starts),
the simulator's ``--policy`` and the runtime all go through :func:`make_policy`. A new policy is one
class (:class:`scheduler.placement.base.PlacementPolicy`) and one line in :data:`POLICY_FACTORIES`;
``tests/scheduler/test_policies.py`` runs every registered one through the simulator."""

from __future__ import annotations

from typing import Callable

from scheduler.placement.base import PlacementPolicy
from scheduler.placement.fifo import FifoPolicy, FifoSkipPolicy
from scheduler.placement.fixed_block import FixedBlockPolicy
from scheduler.placement.load_aware import LoadAwarePolicy

DEFAULT_POLICY = "load-aware"
POLICY_FACTORIES: dict[str, Callable[..., PlacementPolicy]] = {
    "load-aware": LoadAwarePolicy,
    "fifo": FifoPolicy,
    "fifo-skip": FifoSkipPolicy,
    "fixed-block": FixedBlockPolicy,
    "first-fit": FifoSkipPolicy,
}


class UnknownPolicyError(ValueError):
    """A placement name no policy is registered under."""


def policy_names() -> list[str]:
    """The registered names, sorted."""
    return sorted(POLICY_FACTORIES)


def check_policy_name(name: str) -> str:
    """``name`` if a policy is registered under it, else :class:`UnknownPolicyError`."""
    if name not in POLICY_FACTORIES:
        raise UnknownPolicyError(f"placement {name!r} is not available; choose one of {policy_names()}")
    return name


def make_policy(name: str = DEFAULT_POLICY, *, block_nodes: int = 1) -> PlacementPolicy:
    """A fresh policy; ``block_nodes`` is the block of ``fixed-block`` (ignored by the others)."""
    factory = POLICY_FACTORIES[check_policy_name(name)]
    if factory is FixedBlockPolicy:
        return FixedBlockPolicy(block_nodes=block_nodes)
    return factory()
