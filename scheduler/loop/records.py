"""The journal events (:mod:`hpo.events`) the campaign loop's decisions imply, made in one place
for the MPI runtime and the simulator alike.

What only the world knows of an attempt's end (when its processes ran, whether it ignored a stop
request) arrives as an :class:`AttemptEnd`; everything else is the loop's own state."""

from __future__ import annotations

from dataclasses import dataclass

from hpo.events import TrialEnded, TrialFailed, TrialFinished, TrialStarted
from hydragnn_ensemble.result import TrialResult, TrialStatus
from scheduler.loop.trials import RunningTrial
from scheduler.resources import ResourcePool


@dataclass(frozen=True)
class AttemptEnd:
    """How an attempt's processes ended, as its agents saw it: when they ran (their clocks) and
    whether the attempt ignored a stop request and was terminated after the grace period."""

    started_at: float
    ended_at: float
    stop_ignored: bool = False


def started_event(rt: RunningTrial, pool: ResourcePool, now: float, queued_after: int | None = None) -> TrialStarted:
    """``rt`` holds its slots from ``now`` (sent ahead behind trial ``queued_after``: it began when
    that one exited), with the cost model's prediction there."""
    spec, slots, sized = rt.spec, rt.slots, rt.spec.sized
    predicted = sized.seconds_at(len(slots)) * len(slots) if sized is not None else None
    return TrialStarted(time=now, trial_id=spec.trial_id, attempt=spec.attempt, slots=tuple(slots),
                        hosts=_hosts(pool, slots), size=len(slots),
                        predicted_slot_s=predicted, queued_after=queued_after,
                        predicted_startup_s=sized.startup_s if sized is not None else None,
                        predicted_epoch_s=sized.epoch_s_at(len(slots)) if sized is not None else None)


def _hosts(pool: ResourcePool, slots: tuple[int, ...]) -> tuple[str, ...]:
    """The hostname of each slot (each node's name made once)."""
    names: dict[int, str] = {}
    return tuple(names[n] if n in names else names.setdefault(n, pool.hostname(n)) for n in map(pool.node_of, slots))


def ended_event(rt: RunningTrial, result: TrialResult, retry_size: int | None, end: AttemptEnd,
                now: float) -> TrialEnded:
    """``rt`` ended with ``result`` (re-run on ``retry_size`` slots, or None: its last attempt)."""
    spec = rt.spec
    stop = None if rt.stopping is None else ("ignored" if end.stop_ignored else "obeyed")
    if result.status == TrialStatus.FAILED:
        return TrialFailed(time=now, trial_id=spec.trial_id, attempt=spec.attempt, result=result,
                           started_at=end.started_at, ended_at=end.ended_at, stop=stop,
                           reason=result.failure_reason, log_tail=result.log_tail or "",
                           will_retry=retry_size is not None, retry_size=retry_size)
    return TrialFinished(time=now, trial_id=spec.trial_id, attempt=spec.attempt, result=result,
                         started_at=end.started_at, ended_at=end.ended_at, stop=stop)
