"""The journal's event vocabulary: names and the fields each event must carry."""

from __future__ import annotations

from typing import Any, Mapping

# required fields; optional ones: trial_started.predicted_slot_s / queued_after (sent ahead behind
# that trial), trial_finished|failed.started_at / ended_at (when the processes ran, agents' clocks),
# trial_failed.will_retry / retry_size, trial_finished|failed.stop ("obeyed" or "ignored": the trial
# was asked to stop, and ended by itself or was terminated after the grace period)
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "campaign_started": ("campaign", "resume", "ranks", "slots"),
    "trial_suggested": ("trial_id", "params", "attempt"),
    "trial_started": ("trial_id", "attempt", "slots", "hosts", "size"),
    "trial_progress": ("trial_id", "attempt", "epoch", "objective"),
    "trial_stop_requested": ("trial_id", "attempt", "reason"),
    "trial_finished": ("trial_id", "attempt", "result"),
    "trial_failed": ("trial_id", "attempt", "reason", "log_tail", "result"),
    "campaign_finished": ("reason",),
}
TRIAL_EVENTS = frozenset(name for name in EVENT_FIELDS if name.startswith("trial_"))


class JournalEventError(ValueError):
    """An event that does not follow the journal's vocabulary."""


def check_event(event: Mapping[str, Any]) -> None:
    """Raise :class:`JournalEventError` for an unknown event name or a missing field."""
    name = event.get("event")
    if name not in EVENT_FIELDS:
        raise JournalEventError(f"unknown journal event {name!r}; known: {sorted(EVENT_FIELDS)}")
    missing = [f for f in EVENT_FIELDS[name] if f not in event]
    if missing:
        raise JournalEventError(f"journal event {name!r} is missing fields {missing}")
    if name in TRIAL_EVENTS:
        for f in ("trial_id", "attempt"):
            value = event[f]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise JournalEventError(f"journal event {name!r}: {f} must be an integer >= 0, got {value!r}")
