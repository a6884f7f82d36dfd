"""Why a campaign ran past ``max_time_s``: the budget stops new trials from starting, and the trials
running at that moment finish within their own time limit (``trial_time_limit_s``, which the trainer
keeps; the runtime kills a trial a margin after it). A campaign's closing lines and its report say
so whenever its campaign time went past ``max_time_s``."""

from __future__ import annotations


def overrun_note(max_time_s: float | None, campaign_time_s: float, trial_time_limit_s: float | None,
                 running_at_limit: int | None = None) -> str | None:
    """One line on why ``campaign_time_s`` (over all runs) exceeds ``max_time_s``; None when it does
    not or there is no such budget. ``running_at_limit``: how many trials were running when the
    budget stopped new starts (None: not known, e.g. from a journal)."""
    if max_time_s is None or not campaign_time_s > max_time_s:
        return None
    over = campaign_time_s - max_time_s
    head = (f"campaign time {campaign_time_s:.0f} s, {over:.0f} s past max_time_s ({max_time_s:g} s): "
            "max_time_s stops new trials from starting")
    if running_at_limit == 0:
        return f"{head}; no trial was running then (the rest is the campaign winding down)"
    if running_at_limit is None:
        who = "the trials running then were"
    elif running_at_limit == 1:
        who = "the 1 trial running then was"
    else:
        who = f"the {running_at_limit} trials running then were"
    own = "its own" if running_at_limit == 1 else "their own"
    limit = (f"{own} time limit" if trial_time_limit_s is None
             else f"{own} time limit (trial_time_limit_s {trial_time_limit_s:g} s)")
    return f"{head}; {who} left to finish within {limit}"


def budget_moment(segments: list[list[float]] | list[tuple[float, float, int]], max_time_s: float) -> float | None:
    """The clock time at which the campaign's runs (``[start, end, slots]`` each, as
    :class:`hpo.state.CampaignState` keeps them) had used ``max_time_s`` of campaign time, or None
    when they never did."""
    used = 0.0
    for start, end, _ in segments:
        if used + (end - start) >= max_time_s:
            return start + (max_time_s - used)
        used += end - start
    return None


def cut_short_note(timeouts: int, improving: int, trial_time_limit_s: float | None) -> str | None:
    """One line on the trials that ended by their time limit (``timeout``) and, of them, those whose
    best epoch was their last (``improving``: still improving when the limit ended them); None when
    no trial timed out."""
    if timeouts == 0:
        return None
    limit = "" if trial_time_limit_s is None else f" (trial_time_limit_s {trial_time_limit_s:g} s)"
    line = f"{timeouts} trial(s) ended at their time limit{limit}"
    if improving == 0:
        return f"{line}, none of them still improving"
    return (f"{line}, {improving} of them still improving (best epoch = last epoch): the limit cut their "
            "training short; a longer trial_time_limit_s (or fewer epochs) would let them finish")


def still_improving(epochs: int, best_epoch: int | None) -> bool:
    """A trial's best epoch (counted from 0, as result.json has it) was the last of the ``epochs``
    it trained: its validation loss was still falling."""
    return best_epoch is not None and epochs > 0 and best_epoch >= epochs - 1
