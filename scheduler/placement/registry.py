"""Placement policies by name: ``load-aware`` (default), ``fifo``, ``fifo-skip``, ``fixed-block``;
``first-fit`` is another name of ``fifo-skip`` (arrival order, skipping what does not fit)."""

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
POLICY_NAMES: tuple[str, ...] = tuple(POLICY_FACTORIES)


class UnknownPolicyError(ValueError):
    """A placement name no policy is registered under."""


def make_policy(name: str = DEFAULT_POLICY, *, block_nodes: int = 1) -> PlacementPolicy:
    """A fresh policy; ``block_nodes`` is the block of ``fixed-block`` (ignored by the others)."""
    if name not in POLICY_FACTORIES:
        raise UnknownPolicyError(f"placement {name!r} is not available; choose one of {sorted(POLICY_FACTORIES)}")
    if name == "fixed-block":
        return FixedBlockPolicy(block_nodes=block_nodes)
    return POLICY_FACTORIES[name]()
