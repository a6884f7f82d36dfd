"""Task-weighted multi-head loss on normalised targets, and per-head error sums for metrics.

Per head ``h`` the residual is ``r = pred - (y - mean_h) / std_h`` (the model predicts normalised
values), or ``r = (pred - y) / std_h`` for heads the model reports in physical units (potential
mode). The element loss is ``r**2`` (mse, rmse), ``|r|`` (mae) or
``0.5 * (log var + r**2 / var)`` (GaussianNLLLoss, ``var`` = the model's ``<head>__var`` in
normalised units). A head's loss is the mean over its elements (graphs x dim, or nodes x dim) of
the batch (the square root of it for rmse); the batch loss is the sum over heads weighted by
``task_weights`` normalised to sum 1 (as HydraGNN does).

All per-batch work stays on the device: no ``.item()``, no Python-side dicts beyond the model's
output; the precomputed mean/std tensors are built once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from graph_builders.schema import HeadRegistry, energy_is_total
from hydragnn_ensemble.model.heads import VARIANCE_SUFFIX
from hydragnn_ensemble.train.normalisation import Normaliser

# rows of the evaluation accumulator (PER_ATOM: graph heads of dim 1, sum over graphs of |error| / nodes)
LOSS, ABS, SQ, COUNT, PER_ATOM = 0, 1, 2, 3, 4


@dataclass
class HeadTerm:
    """One head's precomputed loss ingredients."""

    name: str
    key: str
    node_level: bool
    dim: int
    weight: float
    mean: Tensor  # [1, dim]
    std: Tensor  # [1, dim]
    inv_std: Tensor  # [1, dim]
    physical: bool  # the model outputs physical units for this head
    total_energy: bool = False  # a structure's total energy: its error is also reported per atom


class MultiHeadLoss:
    """The training loss and the evaluation accumulators (see the module docstring)."""

    def __init__(self, heads: HeadRegistry, normaliser: Normaliser, task_weights: list[float],
                 loss_type: str, physical_heads: tuple[str, ...], device: torch.device) -> None:
        total = float(sum(abs(w) for w in task_weights))
        self.loss_type = loss_type
        self.terms: list[HeadTerm] = []
        for head, w in zip(heads, task_weights):
            s = normaliser[head.name]
            mean = s.mean.reshape(1, -1).to(device)
            std = s.std.reshape(1, -1).to(device)
            self.terms.append(HeadTerm(head.name, head.key, head.level == "node", head.dim,
                                       float(w) / total, mean, std, 1.0 / std,
                                       head.name in physical_heads,
                                       head.level == "graph" and head.dim == 1 and energy_is_total(head.unit)))
        self.weights = torch.tensor([t.weight for t in self.terms], dtype=torch.float64)

    @property
    def num_heads(self) -> int:
        return len(self.terms)

    def residual(self, term: HeadTerm, pred: Tensor, y: Tensor) -> Tensor:
        """Residual in normalised units."""
        if term.physical:
            return (pred - y) * term.inv_std
        return pred - (y - term.mean) * term.inv_std

    def _elementwise(self, term: HeadTerm, r: Tensor, out: dict[str, Tensor]) -> Tensor:
        if self.loss_type == "mae":
            return r.abs()
        if self.loss_type == "GaussianNLLLoss":
            var = out[term.name + VARIANCE_SUFFIX]
            return 0.5 * (torch.log(var) + r * r / var)
        return r * r

    def local_counts(self, batch) -> list[int]:
        """Number of loss elements of each head in this (local) batch."""
        n_nodes, n_graphs = batch.num_nodes, batch.num_graphs
        return [(n_nodes if t.node_level else n_graphs) * t.dim for t in self.terms]

    def train_loss(self, out: dict[str, Tensor], batch, counts: list[int] | Tensor) -> Tensor:
        """Weighted loss of one batch; ``counts`` (per head, a list or a device tensor) are the
        element counts of the *global* batch."""
        total = None
        for term, n in zip(self.terms, counts):
            y = batch[term.key]
            pred = out[term.name]
            r = self.residual(term, pred, y.to(pred.dtype))
            s = self._elementwise(term, r, out).sum() / n
            if self.loss_type == "rmse":
                s = torch.sqrt(s + 1e-12)
            s = s * term.weight
            total = s if total is None else total + s
        return total

    def new_accumulator(self, device: torch.device) -> Tensor:
        """[5, heads] float64: loss sum, physical |error| sum, physical error^2 sum, count, and for a
        total energy the sum of |error| / atoms over the graphs."""
        return torch.zeros(5, self.num_heads, dtype=torch.float64, device=device)

    @torch.no_grad()
    def accumulate(self, acc: Tensor, out: dict[str, Tensor], batch) -> None:
        """Add one evaluation batch's sums to ``acc``."""
        for j, term in enumerate(self.terms):
            pred = out[term.name].detach()
            y = batch[term.key].to(pred.dtype)
            r = self.residual(term, pred, y)
            err = (pred - y) if term.physical else r * term.std
            acc[LOSS, j] += self._elementwise(term, r, out).sum().to(torch.float64)
            acc[ABS, j] += err.abs().sum().to(torch.float64)
            acc[SQ, j] += (err * err).sum().to(torch.float64)
            acc[COUNT, j] += err.numel()
            if term.total_energy:
                atoms = (batch.ptr[1:] - batch.ptr[:-1]).to(err.device, torch.float64).clamp(min=1)
                acc[PER_ATOM, j] += (err.reshape(-1).abs().to(torch.float64) / atoms).sum()

    def objective(self, acc: Tensor) -> float:
        """Task-weighted loss of a whole split from its (all-reduced) accumulator."""
        per_head = acc[LOSS] / acc[COUNT]
        if self.loss_type == "rmse":
            per_head = per_head.sqrt()
        return float((per_head.cpu() * self.weights).sum())

    def head_errors(self, acc: Tensor) -> dict[str, tuple[float, float]]:
        """``{head: (mae, rmse)}`` in physical units from an (all-reduced) accumulator."""
        a = acc.cpu()
        return {t.name: (float(a[ABS, j] / a[COUNT, j]), float((a[SQ, j] / a[COUNT, j]).sqrt()))
                for j, t in enumerate(self.terms)}

    def per_atom_errors(self, acc: Tensor) -> dict[str, float]:
        """``{head: mean over graphs of |error| / atoms}`` of the total-energy heads, in the head's
        unit per atom, from an (all-reduced) accumulator."""
        a = acc.cpu()
        return {t.name: float(a[PER_ATOM, j] / a[COUNT, j]) for j, t in enumerate(self.terms) if t.total_energy}
