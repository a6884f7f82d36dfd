"""Choosing ensemble members: top-K by objective, or greedy ensemble selection (Caruana et al. 2004).

Greedy selection works on validation predictions: starting from an empty ensemble it adds, K
times, the candidate (with replacement: the same model may be added again) whose addition gives
the lowest validation loss of the ensemble mean. A member's weight is the number of times it was
picked divided by K, so the weights sum to 1.

The loss of an ensemble prediction is the mean over heads of the head's mean squared error divided
by the variance of the head's validation targets (so heads in different units weigh the same).

Per-head greedy selection (:func:`greedy_per_head`) runs the same procedure for every head on that
head's own loss, so each head gets its own weights (a member far better on one head can carry that
head alone). The heads pick in turns and share one member set of at most K distinct models: once K
distinct models are in, later picks choose among them.

Cost-aware selection (``max_inference_ms``, for top-K and greedy): the members' summed inference
time per graph (each trial's ``inference_ms_per_graph``, what running the ensemble costs) stays
within a budget. Top-K walks the trials best first and skips one that would exceed the budget;
greedy picks, at each step, the best candidate among those whose addition keeps the distinct
members within it (a member picked again costs nothing more) and stops early when none fits.

Diverse selection (:func:`diverse_selection`, in the spirit of AutoDEUQ and hyper-deep
ensembles) is Caruana's greedy selection with replacement on another loss: the validation NLL of
the ensemble's Gaussian (weighted mean of the members, std their weighted spread times its
NLL-optimal factor). A member that lowers the NLL errs where the others do not, or spreads where
the mean errs, so members whose errors differ are preferred over near-copies of the best one,
while a good member picked several times keeps the mean accurate.
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
    #: per-head greedy: ``{head: [weight of each of trial_ids]}``, each list summing to 1
    head_weights: dict[str, list[float]] = field(default_factory=dict)


def inference_ms(trial: CampaignTrial) -> float | None:
    """What running ``trial``'s model costs (ms per graph, from its result), or None."""
    return None if trial.result is None else trial.result.inference_ms_per_graph


def within_budget(ranked: Sequence[CampaignTrial], max_inference_ms: float | None) -> list[CampaignTrial]:
    """``ranked`` without the trials that alone exceed ``max_inference_ms`` or never measured their
    inference time (all of ``ranked`` when there is no budget)."""
    if max_inference_ms is None:
        return list(ranked)
    return [t for t in ranked if (cost := inference_ms(t)) is not None and cost <= max_inference_ms]


def select_topk(campaign: CampaignInfo, k: int, max_inference_ms: float | None = None) -> Selection:
    """The ``k`` best eligible trials by objective, equally weighted; with ``max_inference_ms``,
    the best trials that fit in that summed inference time (fewer than ``k`` when no more fit).

    Raises :class:`SelectionError` when ``k < 1`` or fewer than ``k`` trials are eligible
    (the message lists why the others were excluded), or no trial fits the budget."""
    if k < 1:
        raise SelectionError(f"top-k must be >= 1, got {k}")
    ranked = campaign.ranked()
    if max_inference_ms is not None:
        chosen, spent = [], 0.0
        for trial in within_budget(ranked, max_inference_ms):
            if len(chosen) < k and spent + inference_ms(trial) <= max_inference_ms:
                chosen.append(trial)
                spent += inference_ms(trial)
        if not chosen:
            raise SelectionError(f"{campaign.root}: no trial runs within {max_inference_ms:g} ms per graph "
                                 f"(of {len(ranked)} eligible, the cheapest: {_cheapest(ranked)})")
        return Selection([t.trial_id for t in chosen], [1.0 / len(chosen)] * len(chosen), "topk",
                         candidates=[t.trial_id for t in ranked])
    if len(ranked) < k:
        raise SelectionError(
            f"{campaign.root}: only {len(ranked)} completed trial(s) with a checkpoint, {k} asked; "
            f"excluded: {_describe_excluded(campaign.excluded())}")
    chosen = ranked[:k]
    return Selection([t.trial_id for t in chosen], [1.0 / k] * k, "topk",
                     candidates=[t.trial_id for t in ranked])


def _cheapest(trials: Sequence[CampaignTrial]) -> str:
    costs = [c for t in trials if (c := inference_ms(t)) is not None]
    return f"{min(costs):.3g} ms" if costs else "none measured its inference time"


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
                     k: int, candidate_ids: Sequence[int], costs: Sequence[float] | None = None,
                     budget: float | None = None) -> Selection:
    """Caruana's greedy ensemble selection with replacement, ``k`` picks.

    ``predictions[head]``: ``[M, rows, dim]`` validation predictions of the M candidates (in
    ``candidate_ids`` order); ``targets[head]``: ``[rows, dim]``. Ties go to the earlier candidate
    (pass candidates best objective first). Returns the distinct picked trials with weights
    ``count / picks``. With ``costs`` (per candidate) and ``budget``, the distinct picked
    candidates' summed cost stays within ``budget`` (fewer than ``k`` picks when nothing fits)."""
    if k < 1:
        raise SelectionError(f"top-k must be >= 1, got {k}")
    m = len(candidate_ids)
    if m == 0:
        raise SelectionError("greedy selection needs at least one candidate")
    _check_shapes(predictions, targets, m)
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
        if costs is not None and budget is not None:
            losses += _over_budget(costs, budget, order)
        best = int(np.argmin(losses))  # argmin returns the first minimum: ties -> earlier candidate
        if not np.isfinite(losses[best]):
            break  # nothing more fits in the budget
        counts[best] += 1
        if best not in order:
            order.append(best)
        for head, pred in predictions.items():
            running[head] += pred[best]
        history.append(float(losses[best]))
    if not order:
        raise SelectionError(f"no candidate runs within the budget of {budget:g} ms per graph")
    picks = int(counts.sum())
    return Selection([int(candidate_ids[i]) for i in order], [float(counts[i]) / picks for i in order],
                     "greedy", candidates=[int(c) for c in candidate_ids], history=history)


def _over_budget(costs: Sequence[float], budget: float, order: list[int]) -> np.ndarray:
    """0 for the candidates that may be picked next within ``budget``, inf for the others."""
    spent = sum(costs[i] for i in order)
    extra = np.array([0.0 if i in order else float(c) for i, c in enumerate(costs)])
    return np.where(spent + extra <= budget, 0.0, np.inf)


def _check_shapes(predictions: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray], m: int) -> None:
    for head, pred in predictions.items():
        if pred.shape[0] != m:
            raise SelectionError(f"head {head!r}: predictions of {pred.shape[0]} models for {m} candidates")
        if pred.shape[1:] != targets[head].shape:
            raise SelectionError(f"head {head!r}: predictions {pred.shape[1:]} vs targets {targets[head].shape}")


def _greedy_counts(predictions: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray], k: int,
                   rounds: int, m: int) -> tuple[dict[str, np.ndarray], list[int], list[float]]:
    """One per-head greedy run: pick counts per head, first-pick order, loss after each round."""
    heads = list(predictions)
    scales = {h: (float(np.var(targets[h])) or 1.0) for h in heads}
    running = {h: np.zeros_like(targets[h], dtype=np.float64) for h in heads}
    counts = {h: np.zeros(m, dtype=np.int64) for h in heads}
    order: list[int] = []
    history: list[float] = []
    for step in range(1, rounds + 1):
        step_loss = 0.0
        for head in heads:
            pred = predictions[head]
            err = (running[head][None] + pred) / step - targets[head][None]  # [M, rows, dim]
            losses = (err ** 2).reshape(m, -1).mean(axis=1) / scales[head]
            if len(order) >= k:
                allowed = np.full(m, np.inf)
                allowed[order] = 0.0
                losses = losses + allowed
            best = int(np.argmin(losses))  # the first minimum: ties -> earlier candidate
            counts[head][best] += 1
            running[head] += pred[best]
            if best not in order:
                order.append(best)
            step_loss += float(losses[best])
        history.append(step_loss / len(heads))
    return counts, order, history


def greedy_per_head(predictions: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray],
                    k: int, candidate_ids: Sequence[int], rounds: int | None = None,
                    bags: int = 1, seed: int = 0) -> Selection:
    """Caruana's greedy selection with replacement run per head, sharing at most ``k`` members.

    ``rounds`` picks per head (default ``k``): in each round every head (in ``predictions`` order)
    adds the candidate that most lowers its own validation MSE; once ``k`` distinct candidates are
    members, only members may be picked. A head's weight of a member is its pick count divided by
    ``rounds`` (0 for members that head never picked).

    ``bags > 1`` is Caruana's bagged selection: the greedy run is repeated on ``bags`` bootstrap
    resamples of each head's validation rows (``numpy`` generator seeded with ``seed``) and the
    pick counts are summed, so near-equal candidates share a head's weight instead of the one that
    happens to win on this validation set. If the bags together pick more than ``k`` distinct
    candidates, the ``k`` with the largest total weight are kept and each head's weights are
    renormalised over them (a head left with none gets its best kept candidate).

    ``weights`` (the fallback for heads without their own, and the weights of the spread) are the
    mean of the per-head weights; ``history`` is the first bag's mean normalised loss per round."""
    if k < 1:
        raise SelectionError(f"top-k must be >= 1, got {k}")
    rounds = k if rounds is None else int(rounds)
    if rounds < 1:
        raise SelectionError(f"rounds must be >= 1, got {rounds}")
    if bags < 1:
        raise SelectionError(f"bags must be >= 1, got {bags}")
    m = len(candidate_ids)
    if m == 0:
        raise SelectionError("greedy selection needs at least one candidate")
    if not predictions:
        raise SelectionError("greedy selection needs predictions of at least one head")
    _check_shapes(predictions, targets, m)
    heads = list(predictions)
    rng = np.random.default_rng(seed)
    total = {h: np.zeros(m, dtype=np.float64) for h in heads}
    order: list[int] = []
    history: list[float] = []
    for bag in range(bags):
        if bag == 0 and bags == 1:
            preds, ys = predictions, targets
        else:
            rows = {h: rng.integers(0, targets[h].shape[0], targets[h].shape[0]) for h in heads}
            preds = {h: predictions[h][:, rows[h]] for h in heads}
            ys = {h: targets[h][rows[h]] for h in heads}
        counts, bag_order, bag_history = _greedy_counts(preds, ys, k, rounds, m)
        for h in heads:
            total[h] += counts[h]
        order += [i for i in bag_order if i not in order]
        if bag == 0:
            history = bag_history
    if len(order) > k:
        mass = sum(total[h] / total[h].sum() for h in heads)
        keep = sorted(sorted(order, key=lambda i: -mass[i])[:k], key=order.index)
        for h in heads:
            dropped = np.ones(m, dtype=bool)
            dropped[keep] = False
            total[h][dropped] = 0.0
            if total[h].sum() == 0.0:  # its picks were all dropped: its best kept candidate alone
                mse = ((predictions[h][keep] - targets[h][None]) ** 2).reshape(len(keep), -1).mean(axis=1)
                total[h][keep[int(np.argmin(mse))]] = 1.0
        order = keep
    head_weights = {h: [float(total[h][i] / total[h].sum()) for i in order] for h in heads}
    weights = [float(np.mean([head_weights[h][j] for h in heads])) for j in range(len(order))]
    return Selection([int(candidate_ids[i]) for i in order], weights, "greedy-per-head",
                     candidates=[int(c) for c in candidate_ids], history=history,
                     head_weights=head_weights)


def _spread_nll(predictions: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray],
                counts: np.ndarray) -> float:
    """Validation NLL (summed over heads) of the ensemble weighted by ``counts`` with its spread
    scaled by the NLL-optimal factor; the normalised MSE while it has a single distinct member."""
    w = counts / counts.sum()
    used = np.flatnonzero(counts)
    total = 0.0
    for head, pred in predictions.items():
        mean = np.tensordot(w[used], pred[used], axes=1)
        err = mean - targets[head]
        scale = float(np.var(targets[head])) or 1.0
        if len(used) == 1:
            total += float(np.mean(err ** 2)) / scale
            continue
        spread2 = np.maximum(np.tensordot(w[used], (pred[used] - mean[None]) ** 2, axes=1), 1e-12 * scale)
        s2 = float(np.mean(err ** 2 / spread2))
        total += float(np.mean(0.5 * np.log(2 * np.pi * s2 * spread2 / scale) + 0.5))
    return total


def diverse_selection(predictions: Mapping[str, np.ndarray], targets: Mapping[str, np.ndarray],
                      k: int, candidate_ids: Sequence[int]) -> Selection:
    """``k`` greedy picks with replacement for the lowest validation NLL of the ensemble's spread
    (see the module docstring); the first pick is the lowest normalised MSE, and once two distinct
    members are in, the NLL decides. Weights are pick counts / ``k``; ``history`` holds the loss
    after each pick; ties go to the earlier candidate."""
    if k < 1:
        raise SelectionError(f"top-k must be >= 1, got {k}")
    m = len(candidate_ids)
    if m == 0:
        raise SelectionError("diverse selection needs at least one candidate")
    _check_shapes(predictions, targets, m)
    counts = np.zeros(m, dtype=np.float64)
    order: list[int] = []
    history: list[float] = []
    for step in range(k):
        scores = []
        for c in range(m):
            trial = counts.copy()
            trial[c] += 1
            if step == 1 and np.count_nonzero(trial) == 1:
                scores.append((np.inf, c))  # the second pick makes the spread: another member
                continue
            scores.append((_spread_nll(predictions, targets, trial), c))
        best_score, best = min(scores)
        counts[best] += 1
        if best not in order:
            order.append(best)
        history.append(best_score)
    return Selection([int(candidate_ids[i]) for i in order], [float(counts[i]) / k for i in order], "diverse",
                     candidates=[int(c) for c in candidate_ids], history=history)
