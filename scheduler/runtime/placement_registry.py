"""Placement policies by the name a campaign gives in ``placement:``.

The runtime builds its policy with :func:`make_policy`; a module that adds a policy registers it with
:func:`register_policy` (or is listed in :data:`POLICIES` here)."""

from __future__ import annotations

from typing import Callable

from scheduler.placement.base import PlacementPolicy
from scheduler.placement.registry import DEFAULT_POLICY, POLICY_FACTORIES

# "load-aware" (default), "fifo", "fifo-skip", "fixed-block" (1-node blocks), "first-fit"
POLICIES: dict[str, Callable[[], PlacementPolicy]] = dict(POLICY_FACTORIES)


class UnknownPolicyError(ValueError):
    """A ``placement`` name that no policy is registered under."""


def register_policy(name: str, factory: Callable[[], PlacementPolicy]) -> None:
    """Make ``factory`` available as ``placement: <name>``."""
    POLICIES[name] = factory


def make_policy(name: str = DEFAULT_POLICY) -> PlacementPolicy:
    """A fresh policy for ``placement: <name>``."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise UnknownPolicyError(
            f"placement {name!r} is not available; choose one of {sorted(POLICIES)}") from None
