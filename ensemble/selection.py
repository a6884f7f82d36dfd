"""Choosing ensemble members: top-K by objective, or greedy ensemble selection (Caruana et al. 2004).

Greedy selection works on validation predictions: starting from an empty ensemble it adds, K
times, the candidate (with replacement: the same model may be added again) whose addition gives
the lowest validation loss of the ensemble mean. A member's weight is the number of times it was
picked divided by K, so the weights sum to 1.

The loss of an ensemble prediction is the mean over heads of the head's mean squared error divided
by the variance of the head's validation targets (so heads in different units weigh the same).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ensemble.campaign import CampaignInfo, CampaignTrial


class SelectionError(ValueError):
    """Selection cannot be done as asked (too few candidates, bad K, mismatched predictions)."""


@dataclass
class Selection:
    """Chosen trials and their weights (summing to 1), in order of first pick."""

    trial_ids: list[int]
    weights: list[float]
    method: str
    candidates: list[int] = field(default_factory=list)  # the trial ids considered
    history: list[float] = field(default_factory=list)  # greedy: validation loss after each pick


def select_topk(campaign: CampaignInfo, k: int) -> Selection:
    """The ``k`` best eligible trials by objective, equally weighted.

    Raises :class:`SelectionError` when ``k < 1`` or fewer than ``k`` trials are eligible
    (the message lists why the others were excluded)."""
    if k < 1:
        raise SelectionError(f"top-k must be >= 1, got {k}")
    ranked = campaign.ranked()
    if len(ranked) < k:
        raise SelectionError(
            f"{campaign.root}: only {len(ranked)} completed trial(s) with a checkpoint, {k} asked; "
            f"excluded: {_describe_excluded(campaign.excluded())}")
    chosen = ranked[:k]
    return Selection([t.trial_id for t in chosen], [1.0 / k] * k, "topk",
                     candidates=[t.trial_id for t in ranked])


def _describe_excluded(trials: Sequence[CampaignTrial]) -> str:
    if not trials:
        return "none"
    return "; ".join(f"trial {t.trial_id} ({t.excluded_because})" for t in trials[:20])


def ensemble_loss(predictions: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray],
                  weights: np.ndarray) -> float:
    """Validation loss of the weighted ensemble mean (see the module docstring).

    ``predictions[head]`` is ``[M, rows, dim]`` (M candidates), ``targets[head]`` ``[rows, dim]``,
    ``weights`` ``[M]`` summing to 1."""
    total = 0.0
    for head, pred in predictions.items():
        y = targets[head]
        mean = np.tensordot(weights, pred, axes=1)
        scale = float(np.var(y)) or 1.0
        total += float(np.mean((mean - y) ** 2)) / scale
    return total / max(len(predictions), 1)


def greedy_selection(predictions: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray],
                     k: int, candidate_ids: Sequence[int]) -> Selection:
    """Caruana's greedy ensemble selection with replacement, ``k`` picks.

    ``predictions[head]``: ``[M, rows, dim]`` validation predictions of the M candidates (in
    ``candidate_ids`` order); ``targets[head]``: ``[rows, dim]``. Ties go to the earlier candidate
    (pass candidates best objective first). Returns the distinct picked trials with weights
    ``count / k``."""
    if k < 1:
        raise SelectionError(f"top-k must be >= 1, got {k}")
    m = len(candidate_ids)
    if m == 0:
        raise SelectionError("greedy selection needs at least one candidate")
    for head, pred in predictions.items():
        if pred.shape[0] != m:
            raise SelectionError(f"head {head!r}: predictions of {pred.shape[0]} models for {m} candidates")
        if pred.shape[1:] != targets[head].shape:
            raise SelectionError(f"head {head!r}: predictions {pred.shape[1:]} vs targets {targets[head].shape}")
    # the running sum of picked predictions; each step evaluates all M candidates at once
    scales = {h: (float(np.var(targets[h])) or 1.0) for h in predictions}
    running = {h: np.zeros_like(targets[h], dtype=np.float64) for h in predictions}
    counts = np.zeros(m, dtype=np.int64)
    order: list[int] = []
    history: list[float] = []
    for step in range(1, k + 1):
        losses = np.zeros(m)
        for head, pred in predictions.items():
            trial_mean = (running[head][None] + pred) / step  # [M, rows, dim]
            err = trial_mean - targets[head][None]
            losses += (err ** 2).reshape(m, -1).mean(axis=1) / scales[head]
        losses /= max(len(predictions), 1)
        best = int(np.argmin(losses))  # argmin returns the first minimum: ties -> earlier candidate
        counts[best] += 1
        if best not in order:
            order.append(best)
        for head, pred in predictions.items():
            running[head] += pred[best]
        history.append(float(losses[best]))
    return Selection([int(candidate_ids[i]) for i in order], [float(counts[i]) / k for i in order],
                     "greedy", candidates=[int(c) for c in candidate_ids], history=history)
