"""Early discarding: stoppers decide from learning curves which trials to stop (see
:class:`Stopper` for the contract) and :func:`make_stopper` builds the one a campaign names
(``none``, the default, is the stopper that never stops a trial)."""

from __future__ import annotations

from typing import Any, Callable

from hpo.stoppers.asha import AshaStopper
from hpo.stoppers.base import Stopper
from hpo.stoppers.i_epoch import IEpochStopper
from hpo.stoppers.median import MedianStopper
from hpo.stoppers.none import NoStopper
from hpo.stoppers.pareto import ParetoAshaStopper, dominates, front_index

STOPPERS: dict[str, Callable[..., Stopper]] = {
    "asha": AshaStopper, "i-epoch": IEpochStopper, "median": MedianStopper, "none": NoStopper,
    "pareto-asha": ParetoAshaStopper,
}


def make_stopper(method: str, options: dict[str, Any]) -> Stopper:
    """The stopper ``method`` with ``options`` (its constructor's keyword arguments); ValueError
    naming the method or the option that is not accepted."""
    if method not in STOPPERS:
        raise ValueError(f"early_stopping.method {method!r}: choose one of {sorted(STOPPERS)}")
    try:
        return STOPPERS[method](**options)
    except TypeError as exc:
        raise ValueError(f"early_stopping: {method} does not accept these options ({exc})") from None


def discarding_stopper(method: str, options: dict[str, Any]) -> Stopper | None:
    """:func:`make_stopper`, or None when that stopper never stops a trial (``none``): the campaign
    then runs as without a stopper (no learning-curve bookkeeping, no verdict waits)."""
    stopper = make_stopper(method, options)
    return stopper if stopper.discards else None


__all__ = ["STOPPERS", "AshaStopper", "IEpochStopper", "MedianStopper", "NoStopper", "ParetoAshaStopper", "Stopper",
           "discarding_stopper", "dominates", "front_index", "make_stopper"]
