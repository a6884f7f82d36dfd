"""Several models of one architecture run as one: parameters stacked along a member axis.

An ensemble's members often share a layer family and every shape (they differ in seeds and
learning rates). :class:`StackedModels` holds their parameters stacked (``[K, ...]``, buffers: it
only predicts) and runs one forward pass for all of them on one batch: node features are
``[N, K, F]`` and edge features ``[E, K, F]``; a linear layer is one batched product over the
members, and the batch's gathers and sums (:class:`~hydragnn_ensemble.model.edges.Edges`, built
once) act on all members' columns at once. On small inputs (molecular dynamics of a few dozen
atoms) a model's time is mostly the fixed cost of each operation, which K members then pay once.

In potential mode each member differentiates its own leaf copy of the positions (and of the
strain), ``[N, K, 3]``: member ``k``'s energy depends on its copy alone, so one backward pass of the
summed energies gives every member's ``-dE_k/dpos`` (and stress), as K passes would.

What it stacks (:func:`stack_key`): SchNet interatomic potentials in this package's shape (not
HydraGNN-shaped), without variance outputs, with parameter-free activations. Per member it gives
what ``HydraModel.forward_with_embedding`` gives, to float32 rounding. Other models run one after
another (the caller's fallback).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.embedding import check_atomic_numbers, check_node_features
from hydragnn_ensemble.model.hydra import HydraModel, checked_edge_attr, graph_index
from hydragnn_ensemble.model.potential import VOIGT_INDICES

#: the layer families :class:`StackedModels` runs
STACKED_FAMILIES: tuple[str, ...] = ("SchNet",)


def stack_key(model: nn.Module) -> Hashable | None:
    """What models must share to be stacked (their spec, dtype and device), or None for a model
    :class:`StackedModels` cannot run (see the module docstring)."""
    if not isinstance(model, HydraModel):
        return None
    spec = model.spec
    if (spec.mpnn_type not in STACKED_FAMILIES or spec.energy_head is None or spec.hydragnn_shaped
            or spec.predict_variance or model.embedding is None):
        return None
    if any(any(True for _ in act.parameters()) for act in model.activations):
        return None  # PReLU: a parameter per member
    parameter = next(model.parameters())
    return (spec, parameter.dtype, parameter.device)


class StackedLinear(nn.Module):
    """K linear maps: ``[R, K, in] -> [R, K, out]`` (or a shared input ``[R, in]``)."""

    def __init__(self, linears: Sequence[nn.Linear]) -> None:
        super().__init__()
        weight = torch.stack([lin.weight.detach().t() for lin in linears])  # [K, in, out]
        self.num, self.width_out = weight.shape[0], weight.shape[2]
        self.register_buffer("weight", weight.contiguous())
        # the shared input's form: one product with all members' columns side by side
        self.register_buffer("weight_flat", weight.permute(1, 0, 2).reshape(weight.shape[1], -1).contiguous())
        bias = None if linears[0].bias is None else torch.stack([lin.bias.detach() for lin in linears])
        self.register_buffer("bias", None if bias is None else bias.unsqueeze(1).contiguous())  # [K, 1, out]
        self.register_buffer("bias_flat", None if bias is None else bias.reshape(-1).contiguous())

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() == 2:  # the same input for every member
            out = x @ self.weight_flat if self.bias_flat is None else torch.addmm(self.bias_flat, x, self.weight_flat)
            return out.view(x.shape[0], self.num, self.width_out)
        per_member = x.transpose(0, 1)  # [K, R, in]
        out = (torch.bmm(per_member, self.weight) if self.bias is None
               else torch.baddbmm(self.bias, per_member, self.weight))
        return out.transpose(0, 1)


class StackedLayerNorm(nn.Module):
    """K LayerNorms over the last dimension of ``[R, K, F]``."""

    def __init__(self, norms: Sequence[nn.LayerNorm]) -> None:
        super().__init__()
        self.shape, self.eps = tuple(norms[0].normalized_shape), norms[0].eps
        self.register_buffer("weight", torch.stack([n.weight.detach() for n in norms]))  # [K, F]
        self.register_buffer("bias", torch.stack([n.bias.detach() for n in norms]))

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.shape, eps=self.eps) * self.weight + self.bias


def stack_modules(modules: Sequence[nn.Module]) -> nn.Module:
    """The stacked form of K modules of one structure: linear maps and LayerNorms stacked, a
    sequence stacked element by element, parameter-free modules (activations, identity) shared."""
    first = modules[0]
    if isinstance(first, nn.Linear):
        return StackedLinear(modules)
    if isinstance(first, nn.LayerNorm):
        return StackedLayerNorm(modules)
    if isinstance(first, nn.Sequential):
        return nn.Sequential(*(stack_modules(parts) for parts in zip(*modules)))
    if not any(True for _ in first.parameters()):
        return first
    raise ValueError(f"cannot stack {type(first).__name__} modules")


class StackedSchNetLayer(nn.Module):
    """K SchNet interactions (``SchNetLayer``) on ``[N, K, F]`` node features."""

    def __init__(self, layers: Sequence[nn.Module]) -> None:
        super().__init__()
        self.filter_net = stack_modules([layer.filter_net for layer in layers])
        self.lin_in = stack_modules([layer.lin_in for layer in layers])
        self.lin_out = stack_modules([layer.lin_out for layer in layers])

    def forward(self, h: Tensor, edges: Edges, rbf: Tensor, cutoff: Tensor) -> Tensor:
        weight = self.filter_net(rbf) * cutoff.unsqueeze(-1)  # [E, K, F]
        messages = edges.gather_source_times(self.lin_in(h), weight)
        return self.lin_out(edges.sum_at_target(messages))


class StackedHeads(nn.Module):
    """K models' graph heads (pooling, shared MLP, one MLP per head) and node heads."""

    def __init__(self, models: Sequence[HydraModel]) -> None:
        super().__init__()
        graph = [m.graph_heads for m in models]
        self.pool = graph[0].pool if graph[0] is not None else None
        self.shared = stack_modules([g.shared for g in graph]) if graph[0] is not None else None
        self.shared_act = graph[0].shared_act if graph[0] is not None else None
        self.graph = nn.ModuleDict({} if graph[0] is None else
                                   {name: stack_modules([g.heads[name] for g in graph]) for name in graph[0].heads})
        node = [m.node_heads for m in models]
        self.node = nn.ModuleDict({} if node[0] is None else
                                  {name: stack_modules([n.heads[name] for n in node]) for name in node[0].heads})

    def forward(self, h: Tensor, batch: Tensor, num_graphs: int) -> dict[str, Tensor]:
        raw: dict[str, Tensor] = {}
        if self.pool is not None:
            n, k, f = h.shape
            pooled = self.pool(h.reshape(n, k * f), batch, num_graphs).view(num_graphs, k, f)
            pooled = self.shared_act(self.shared(pooled))
            raw.update({name: head(pooled) for name, head in self.graph.items()})
        raw.update({name: head(h) for name, head in self.node.items()})
        return raw


@dataclass
class _Strained:
    """Each member's leaf copy of the positions and strain, and the edge vectors ``[E, K, 3]``."""

    pos: Tensor  # [N, K, 3]
    strain: Tensor | None  # [B, K, 3, 3]
    vectors: Tensor


class StackedModels(nn.Module):
    """K models with one :func:`stack_key` run as one (see the module docstring)."""

    def __init__(self, models: Sequence[HydraModel]) -> None:
        super().__init__()
        keys = {stack_key(m) for m in models}
        if None in keys or len(keys) != 1:
            raise ValueError("StackedModels needs models of one stackable architecture (stack_key)")
        first = models[0]
        self.spec = first.spec
        self.num = len(models)
        self.geometry = first.geometry  # no parameters: the radius and radial basis
        atom_table = first.embedding.atom_table
        self.register_buffer("atom_table", None if atom_table is None else torch.stack(
            [m.embedding.atom_table.weight.detach() for m in models], dim=1).flatten(1))  # [Z, K * F]
        self.feature_map = (None if first.embedding.feature_map is None
                            else StackedLinear([m.embedding.feature_map for m in models]))
        self.layers = nn.ModuleList(StackedSchNetLayer(layers) for layers in zip(*(m.layers for m in models)))
        self.norms = nn.ModuleList(stack_modules(norms) for norms in zip(*(m.norms for m in models)))
        self.activations = first.activations
        self.heads = StackedHeads(models)
        self.register_buffer("energy_shift", torch.stack([m.energy_scale.shift.detach() for m in models]))
        self.register_buffer("energy_scale", torch.stack([m.energy_scale.scale.detach() for m in models]))
        self.stress_factor = first.stress_factor

    def forward_with_embedding(self, data: object, x: Tensor | None) -> tuple[list[dict[str, Tensor]], Tensor]:
        """Each member's predictions (``HydraModel.forward_with_embedding``'s, detached) and the
        node features ``[N, K, num_conv_layers * hidden_dim]``; ``x``: the node features each
        member reads, ``[N, D]`` when they read the same, else ``[N, K, D]`` (None: no ``x``)."""
        with torch.enable_grad():
            means, layer_outputs = self._forward(data, x)
        per_member = [{name: value[:, k].detach() for name, value in means.items()} for k in range(self.num)]
        return per_member, torch.cat(layer_outputs, dim=-1).detach()

    def _forward(self, data: object, x: Tensor | None) -> tuple[dict[str, Tensor], list[Tensor]]:
        spec = self.spec
        num_nodes = data.pos.shape[0]
        batch, num_graphs = graph_index(data)
        checked_edge_attr(data, spec.edge_dim)  # the model's own check (this SchNet reads none, but requires them)
        strained = self._strained(data, batch, num_graphs)
        geom = self.geometry(strained.vectors)
        h = self._embed(x, getattr(data, "z", None))
        edges = Edges(data.edge_index, num_nodes)
        rbf, cutoff = geom.require("rbf"), geom.require("cutoff")
        outputs: list[Tensor] = []
        for layer, norm, act in zip(self.layers, self.norms, self.activations):
            out = layer(h, edges, rbf, cutoff)
            outputs.append(out)
            h = h + act(norm(out))
        means = self.heads(h, batch, num_graphs)
        self._potential(means, strained, batch, num_graphs, getattr(data, "cell", None))
        return {head.name: means[head.name] for head in spec.heads}, outputs

    def _embed(self, x: Tensor | None, z: Tensor | None) -> Tensor:
        """``NodeEmbedding`` of every member: ``[N, K, F]``."""
        h = None
        if self.feature_map is not None:
            h = self.feature_map(check_node_features(x, self.spec.node_feature_dim, dims=(2, 3)))
        if self.atom_table is not None and z is not None:
            emb = F.embedding(check_atomic_numbers(z), self.atom_table).view(z.shape[0], self.num, -1)
            h = emb if h is None else h + emb
        if h is None:
            raise ValueError("the batch has no z and the model reads no x: nothing to embed")
        return h

    def _strained(self, data: object, batch: Tensor, num_graphs: int) -> _Strained:
        """``strained_edge_vectors`` with a leaf copy of the positions (and strain) per member."""
        pos = data.pos.detach()[:, None, :].expand(-1, self.num, -1).clone().requires_grad_(True)
        edge_shift, cell = getattr(data, "edge_shift", None), getattr(data, "cell", None)
        strain, pos_used, cell_used = None, pos, None if cell is None else cell[:, None]  # cell [B, 1, 3, 3]
        if self.spec.stress_head is not None:
            if cell is None or edge_shift is None:
                raise ValueError("stress needs periodic graphs with cell and edge_shift")
            strain = torch.zeros(num_graphs, self.num, 3, 3, dtype=pos.dtype, device=pos.device, requires_grad=True)
            sym = 0.5 * (strain + strain.transpose(2, 3))
            pos_used = pos + torch.einsum("nki,nkij->nkj", pos, sym.index_select(0, batch))
            cell_used = cell[:, None] + torch.einsum("bij,bkjl->bkil", cell, sym)
        j, i = data.edge_index
        vectors = pos_used.index_select(0, j) - pos_used.index_select(0, i)
        if edge_shift is not None:
            vectors = vectors + _shift_times_cells(edge_shift.to(pos.dtype), cell_used, batch.index_select(0, i))
        return _Strained(pos, strain, vectors)

    def _potential(self, means: dict[str, Tensor], strained: _Strained, batch: Tensor, num_graphs: int,
                   cell: Tensor | None) -> None:
        """Energies (per atom or total), ``-dE/dpos`` and the stress of every member, in place."""
        spec = self.spec
        raw = means[spec.energy_head]  # [B, K, 1]
        per_atom = raw * self.energy_scale.to(raw.dtype)[:, None] + self.energy_shift.to(raw.dtype)[:, None]
        atoms = torch.bincount(batch, minlength=num_graphs).to(per_atom.dtype)
        total = per_atom.squeeze(-1) * atoms[:, None]  # [B, K]
        means[spec.energy_head] = per_atom if spec.energy_per_atom else total.unsqueeze(-1)
        wrt = [strained.pos] + ([strained.strain] if strained.strain is not None else [])
        grads = torch.autograd.grad(total.sum(), wrt, allow_unused=True, materialize_grads=True)
        if spec.forces_head is not None:
            means[spec.forces_head] = -grads[0]
        if spec.stress_head is not None:
            volume = torch.linalg.det(cell).abs()  # [B]
            safe = torch.where(volume > 0, volume, torch.ones_like(volume)).view(-1, 1, 1, 1)
            matrix = torch.where((volume > 0).view(-1, 1, 1, 1), grads[1] / safe, torch.zeros_like(grads[1]))
            rows = torch.tensor([a for a, _ in VOIGT_INDICES], device=matrix.device)
            cols = torch.tensor([b for _, b in VOIGT_INDICES], device=matrix.device)
            means[spec.stress_head] = matrix[:, :, rows, cols] * self.stress_factor


def _shift_times_cells(shift: Tensor, cells: Tensor, graph_of_edge: Tensor) -> Tensor:
    """``shift[e] @ cells[graph_of_edge[e], k]`` for every member ``k``: ``[E, K, 3]`` (``cells``
    ``[B, K or 1, 3, 3]``); one product when the batch holds one graph."""
    num, members = cells.shape[0], cells.shape[1]
    if num == 1:  # [E, 3] @ [3, K * 3]
        return (shift @ cells[0].permute(1, 0, 2).reshape(3, members * 3)).view(-1, members, 3)
    return torch.einsum("ei,ekij->ekj", shift, cells.index_select(0, graph_of_edge))
