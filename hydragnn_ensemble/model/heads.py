"""Output heads in HydraGNN's shape.

Graph heads: pool node features per graph (``mean``/``add``/``max``), a shared MLP
(``num_sharedlayers`` x ``dim_sharedlayers``), then one MLP per graph head (``dim_headlayers``) to the
head's ``dim``. Node heads: one per-node MLP per head. With ``predict_variance`` every head's last layer
has twice the outputs; the second half goes through softplus (+1e-6) as a variance. Heads whose mean
comes from autograd (forces, stress in potential mode) get an MLP only for their variance.
"""

from __future__ import annotations

from typing import Callable

import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import global_add_pool, global_max_pool, global_mean_pool

from hydragnn_ensemble.model.layers.base import make_activation
from hydragnn_ensemble.model.spec import GraphHeadSpec, NodeHeadSpec

POOLINGS: dict[str, Callable[..., Tensor]] = {
    "mean": global_mean_pool,
    "add": global_add_pool,
    "sum": global_add_pool,
    "max": global_max_pool,
}
VARIANCE_FLOOR = 1e-6
#: a head's variance in the model's output is the entry ``<head>__var`` (with ``predict_variance``)
VARIANCE_SUFFIX = "__var"


def mlp(dims: list[int], activation: str) -> nn.Sequential:
    """Linear layers through ``dims`` with the activation between them (none after the last)."""
    layers: list[nn.Module] = []
    for k in range(len(dims) - 1):
        layers.append(nn.Linear(dims[k], dims[k + 1]))
        if k < len(dims) - 2:
            layers.append(make_activation(activation))
    return nn.Sequential(*layers)


def head_layer_dims(num_layers: int, dims: tuple[int, ...], what: str) -> list[int]:
    """The hidden widths of a head: ``dims[:num_layers]`` (ValueError when too few are given)."""
    if num_layers < 0:
        raise ValueError(f"{what}: num_headlayers must be >= 0, got {num_layers}")
    if len(dims) < num_layers:
        raise ValueError(f"{what}: num_headlayers={num_layers} but dim_headlayers has {len(dims)} entries")
    return list(dims[:num_layers])


def split_mean_variance(out: Tensor, dim: int, with_variance: bool) -> tuple[Tensor | None, Tensor | None]:
    """Split a head's raw output into ``(mean, variance)``; either part may be absent."""
    if not with_variance:
        return out, None
    if out.shape[-1] == dim:  # variance-only head
        return None, F.softplus(out) + VARIANCE_FLOOR
    return out[..., :dim], F.softplus(out[..., dim:]) + VARIANCE_FLOOR


class GraphHeads(nn.Module):
    """Pooling, shared MLP, one MLP per graph head. ``outputs[name]`` is the raw width of each head."""

    def __init__(
        self, hidden_dim: int, spec: GraphHeadSpec, outputs: dict[str, int], pooling: str, activation: str
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"unknown graph_pooling {pooling!r}; valid names: {', '.join(POOLINGS)}")
        self.pool = POOLINGS[pooling]
        shared_dims = [hidden_dim] + [spec.dim_sharedlayers] * spec.num_sharedlayers
        self.shared = mlp(shared_dims, activation)
        self.shared_act = make_activation(activation) if spec.num_sharedlayers > 0 else nn.Identity()
        hidden = head_layer_dims(spec.num_headlayers, spec.dim_headlayers, "graph head")
        self.heads = nn.ModuleDict(
            {name: mlp([shared_dims[-1]] + hidden + [width], activation) for name, width in outputs.items()}
        )

    def forward(self, h: Tensor, batch: Tensor, num_graphs: int) -> dict[str, Tensor]:
        pooled = self.shared_act(self.shared(self.pool(h, batch, num_graphs)))
        return {name: head(pooled) for name, head in self.heads.items()}


class NodeHeads(nn.Module):
    """One per-node MLP per node head."""

    def __init__(self, hidden_dim: int, spec: NodeHeadSpec, outputs: dict[str, int], activation: str) -> None:
        super().__init__()
        hidden = head_layer_dims(spec.num_headlayers, spec.dim_headlayers, "node head")
        self.heads = nn.ModuleDict(
            {name: mlp([hidden_dim] + hidden + [width], activation) for name, width in outputs.items()}
        )

    def forward(self, h: Tensor) -> dict[str, Tensor]:
        return {name: head(h) for name, head in self.heads.items()}
