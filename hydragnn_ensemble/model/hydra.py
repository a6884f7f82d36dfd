"""HydraModel: input embedding, a trunk of one message-passing family, graph and node heads.

``forward(batch) -> dict[str, Tensor]`` with one entry per head of ``spec.heads`` (in that order):
graph heads ``[B, dim]``, node heads ``[N, dim]``; with ``spec.predict_variance`` then one
``"<head>__var"`` entry per head (same shape, positive). Between layers the model applies
``h <- h + act(LayerNorm(layer(h)))`` (LayerNorm, not BatchNorm: per-node statistics make outputs
independent of how graphs are batched and need no synchronisation under DDP). Layers marked
``self_contained`` (PaiNN) do their own residual update. With ``spec.hydragnn_shaped`` (GIN, PNA,
SchNet, EGNN, PaiNN) the model is built as HydraGNN builds it: no embedding, the first layer reads
the raw node features ``x``, the layer's internals are HydraGNN's (SchNet: its CFConv; PNA: PyG's
PNAConv; PaiNN: blocks at the width read, then maps to the hidden width, a sinc basis), and
``h <- act(BatchNorm(layer(h)))`` without a residual (EGNN, SchNet and PaiNN: no BatchNorm, as in
HydraGNN's stacks), so the parameter count is HydraGNN's for the same configuration (with
BatchNorm the outputs depend on the batch in training mode).

In potential mode (``spec.energy_head`` set) see :mod:`hydragnn_ensemble.model.potential` for the
units convention: energy, forces and stress are physical and forces are ``-dE/dpos``; the energy
head reports the energy per atom or the structure's total as ``spec.energy_per_atom`` says.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from graph_builders.schema import edge_vectors
from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.embedding import NodeEmbedding
from hydragnn_ensemble.model.geometry import EdgeGeometry, GeometryEncoder
from hydragnn_ensemble.model.heads import VARIANCE_SUFFIX, GraphHeads, NodeHeads, split_mean_variance
from hydragnn_ensemble.model.layers import MPNN_TYPES, layer_class
from hydragnn_ensemble.model.layers.base import LayerConfig, make_activation
from hydragnn_ensemble.model.potential import (
    EnergyScale,
    forces_and_stress,
    strained_edge_vectors,
    stress_unit_factor,
)
from hydragnn_ensemble.model.spec import ModelSpec


def _check_spec(spec: ModelSpec) -> None:
    """Raise ValueError for a spec the model cannot be built from."""
    if spec.hidden_dim < 1:
        raise ValueError(f"hidden_dim must be >= 1, got {spec.hidden_dim}")
    if spec.num_conv_layers < 1:
        raise ValueError(f"num_conv_layers must be >= 1, got {spec.num_conv_layers}")
    if len(spec.heads) == 0:
        raise ValueError("the model needs at least one head")
    if spec.edge_dim < 0:
        raise ValueError(f"edge_dim must be >= 0, got {spec.edge_dim}")
    expected = {"energy_head": ("graph", 1), "forces_head": ("node", 3), "stress_head": ("graph", 6)}
    for field_name, (level, dim) in expected.items():
        name = getattr(spec, field_name)
        if name is None:
            continue
        if name not in spec.heads:
            raise ValueError(f"{field_name}={name!r} is not one of the heads {spec.heads.names}")
        head = spec.heads[name]
        if head.level != level or head.dim != dim:
            raise ValueError(
                f"{field_name}={name!r} must be a {level} head of dim {dim}, got {head.level} dim {head.dim}"
            )
    if spec.stress_head is not None:
        stress_unit_factor(spec.heads[spec.stress_head].unit)
    if spec.energy_head is None and (spec.forces_head or spec.stress_head):
        raise ValueError("forces_head/stress_head need energy_head (they are derivatives of the energy)")
    if spec.hydragnn_shaped:
        _check_shaped(spec)
    if spec.energy_head is not None and not layer_class(spec.mpnn_type).needs_geometry:
        geometric = [n for n, c in MPNN_TYPES.items() if c.needs_geometry]
        raise ValueError(
            f"mpnn_type {spec.mpnn_type!r} ignores positions, so it cannot be an interatomic potential; "
            f"use one of {', '.join(geometric)}"
        )


def _norm(spec: ModelSpec, cls: type) -> nn.Module:
    """The normalisation after a layer: LayerNorm; in a HydraGNN-shaped model what HydraGNN's stack
    has, BatchNorm or none (``hydragnn_batch_norm``); its first layer reads one raw column, and
    LayerNorm over the features of a rank-one input is constant: the model could not tell nodes apart."""
    if not spec.hydragnn_shaped:
        return nn.LayerNorm(spec.hidden_dim)
    return nn.BatchNorm1d(spec.hidden_dim) if cls.hydragnn_batch_norm else nn.Identity()


def _check_shaped(spec: ModelSpec) -> None:
    """A HydraGNN-shaped model needs a layer family that reads raw input, and raw input to read."""
    if not layer_class(spec.mpnn_type).reads_raw_input:
        shaped = [n for n, c in MPNN_TYPES.items() if c.reads_raw_input]
        raise ValueError(
            f"hydragnn_shaped: not built for mpnn_type {spec.mpnn_type!r} (its layers differ from HydraGNN's "
            f"inside, not only at the input); available for {', '.join(shaped)}")
    if spec.node_feature_dim < 1:
        raise ValueError("hydragnn_shaped: the first layer reads the node features x, and the data has none "
                         "(Variables_of_interest.input_node_features is empty)")


def graph_index(data: object) -> tuple[Tensor, int]:
    """Each node's graph in the batch (all zeros for one graph without ``batch``) and the graph count."""
    batch = getattr(data, "batch", None)
    if batch is None:
        batch = torch.zeros(data.pos.shape[0], dtype=torch.long, device=data.pos.device)
    return batch, int(getattr(data, "num_graphs", 1) or 1)


def checked_edge_attr(data: object, edge_dim: int) -> Tensor | None:
    """``data.edge_attr`` for a model that reads ``edge_dim`` > 0 edge features (ValueError naming the
    shape it has), else None."""
    if edge_dim <= 0:
        return None
    edge_attr, num_edges = getattr(data, "edge_attr", None), data.edge_index.shape[1]
    if edge_attr is None or tuple(edge_attr.shape) != (num_edges, edge_dim):
        shape = None if edge_attr is None else tuple(edge_attr.shape)
        raise ValueError(f"edge_attr must be [E={num_edges}, {edge_dim}], got {shape}")
    return edge_attr


class HydraModel(nn.Module):
    """The multi-headed GNN in HydraGNN's shape (see the module docstring)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        _check_spec(spec)
        self.spec = spec
        cls = layer_class(spec.mpnn_type)
        self.embedding = (None if spec.hydragnn_shaped
                          else NodeEmbedding(spec.node_feature_dim, spec.hidden_dim, spec.use_atomic_numbers))
        self.potential_mode = spec.energy_head is not None
        self.needs_geometry = cls.needs_geometry or self.potential_mode
        # a HydraGNN-shaped layer with edge features filters on more than the distance: no table
        tabulate = cls.filters_on_distance and not (spec.hydragnn_shaped and spec.edge_dim > 0)
        basis = cls.hydragnn_radial_basis if spec.hydragnn_shaped else "gaussian"
        self.geometry = (GeometryEncoder(spec.radius, spec.num_gaussians, radial_table=tabulate, basis=basis)
                         if self.needs_geometry else None)
        self.layers = nn.ModuleList()
        self.norms = nn.ModuleList()
        self.activations = nn.ModuleList()
        for k in range(spec.num_conv_layers):
            config = LayerConfig(
                hidden_dim=spec.hidden_dim,
                edge_dim=spec.edge_dim,
                num_gaussians=spec.num_gaussians,
                radius=spec.radius,
                activation=spec.activation,
                layer_index=k,
                num_layers=spec.num_conv_layers,
                pna_degree_histogram=spec.pna_degree_histogram,
                equivariance=spec.equivariance,
                radial_filter=spec.radial_filter and not spec.hydragnn_shaped,
                input_dim=spec.node_feature_dim if spec.hydragnn_shaped and k == 0 else None,
                hydragnn_shaped=spec.hydragnn_shaped,
            )
            self.layers.append(cls(config))
            own = cls.self_contained and not spec.hydragnn_shaped
            self.norms.append(nn.Identity() if own else _norm(spec, cls))
            self.activations.append(nn.Identity() if own else make_activation(spec.activation))
        self.autograd_heads: tuple[str, ...] = tuple(
            n for n in (spec.forces_head, spec.stress_head) if n is not None
        )
        var = spec.predict_variance
        graph_out: dict[str, int] = {}
        node_out: dict[str, int] = {}
        for head in spec.heads:
            if head.name in self.autograd_heads:
                width = head.dim if var else 0
            else:
                width = head.dim * (2 if var else 1)
            if width:
                (graph_out if head.level == "graph" else node_out)[head.name] = width
        self.graph_heads = (
            GraphHeads(spec.hidden_dim, spec.graph_head, graph_out, spec.graph_pooling, spec.activation)
            if graph_out
            else None
        )
        self.node_heads = NodeHeads(spec.hidden_dim, spec.node_head, node_out, spec.activation) if node_out else None
        self.energy_scale = EnergyScale() if self.potential_mode else None
        self.stress_factor = (
            stress_unit_factor(spec.heads[spec.stress_head].unit) if spec.stress_head is not None else 1.0
        )

    def num_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    @property
    def physical_heads(self) -> tuple[str, ...]:
        """Heads whose outputs are in physical units (energy, forces, stress in potential mode)."""
        names = (self.spec.energy_head, self.spec.forces_head, self.spec.stress_head)
        return tuple(n for n in names if n is not None)

    def set_energy_normalisation(self, shift: float, scale: float) -> None:
        """Per-atom energy = raw * scale + shift (potential mode only)."""
        if self.energy_scale is None:
            raise ValueError("set_energy_normalisation needs a model with energy_head set")
        self.energy_scale.set(shift, scale)

    def forward(self, data: object, geometry: EdgeGeometry | None = None) -> dict[str, Tensor]:
        """Predict every head for a graph or a PyG batch (see the module docstring).

        ``geometry``: this batch's edge geometry for the model's radius and radial basis, computed
        once by the caller and shared (the members of an ensemble); None computes it here. A
        potential-mode model takes none (its forces need the geometry of its own strained vectors)."""
        return self.forward_with_embedding(data, geometry)[0]

    def forward_with_embedding(self, data: object, geometry: EdgeGeometry | None = None) -> tuple[dict[str, Tensor], Tensor]:
        """The predictions and the trunk's node features ``[N, num_conv_layers * hidden_dim]`` (every
        message-passing layer's output before its normalisation, concatenated), from one pass: what
        an uncertainty model that measures distances in the learned representation needs at no
        extra cost. The raw layer outputs keep what LayerNorm would divide away (how many
        neighbours a node has, how strong its messages are)."""
        if not self.potential_mode:
            return self._forward(data, geometry)
        if geometry is not None:
            raise ValueError("a potential-mode model computes its edge geometry from its own strained "
                             "edge vectors (forces by autograd): pass geometry=None")
        outer_grad = torch.is_grad_enabled()
        with torch.enable_grad():
            out, h = self._forward(data, None)
        if not outer_grad:
            out = {k: v.detach() for k, v in out.items()}
            h = h.detach()
        return out, h

    def _forward(self, data: object, geometry: EdgeGeometry | None) -> tuple[dict[str, Tensor], Tensor]:
        trunk = self._trunk(data, geometry)
        return self._readout(data, trunk), torch.cat(trunk.layer_outputs, dim=1)

    def _trunk(self, data: object, geometry: EdgeGeometry | None) -> "_Trunk":
        """Embedding and message passing: the node embeddings and what the readout needs."""
        spec = self.spec
        num_nodes = data.pos.shape[0]
        batch, num_graphs = graph_index(data)
        edge_index = data.edge_index
        edge_attr = checked_edge_attr(data, spec.edge_dim)

        strained = None
        if self.potential_mode:
            strained = strained_edge_vectors(data, batch, num_graphs, spec.stress_head is not None)
            geom = self.geometry(strained.vectors, edge_attr)
        elif self.geometry is not None and geometry is not None:
            geom = replace(geometry, edge_attr=edge_attr)
        elif self.geometry is not None:
            geom = self.geometry(edge_vectors(data), edge_attr)
        else:
            geom = EdgeGeometry(edge_attr=edge_attr)

        h = self._input(data)
        edges = Edges(edge_index, num_nodes)
        vec = None
        outputs: list[Tensor] = []
        for layer, norm, act in zip(self.layers, self.norms, self.activations):
            out, vec = layer(h, edges, geom, vec)
            outputs.append(out)
            if spec.hydragnn_shaped:  # no residual: HydraGNN's conv -> BatchNorm (or none) -> activation
                h = act(norm(out))
            elif layer.self_contained:
                h = out
            else:
                h = h + act(norm(out))
        return _Trunk(h, batch, num_graphs, strained, outputs)

    def _input(self, data: object) -> Tensor:
        """The first layer's input: the embedding, or (HydraGNN-shaped) the raw node features."""
        if self.embedding is not None:
            return self.embedding(getattr(data, "x", None), getattr(data, "z", None))
        x = getattr(data, "x", None)
        if x is None or x.dim() != 2 or x.shape[1] != self.spec.node_feature_dim:
            shape = None if x is None else tuple(x.shape)
            raise ValueError(f"node features x must be [N, {self.spec.node_feature_dim}], got {shape}")
        return x.to(next(self.parameters()).dtype)

    def _readout(self, data: object, trunk: "_Trunk") -> dict[str, Tensor]:
        """The heads (and in potential mode the forces and stress by autograd) from the trunk."""
        spec = self.spec
        h, batch, num_graphs = trunk.h, trunk.batch, trunk.num_graphs
        raw: dict[str, Tensor] = {}
        if self.graph_heads is not None:
            raw.update(self.graph_heads(h, batch, num_graphs))
        if self.node_heads is not None:
            raw.update(self.node_heads(h))

        means: dict[str, Tensor] = {}
        variances: dict[str, Tensor] = {}
        for head in spec.heads:
            if head.name in raw:
                mean, variance = split_mean_variance(raw[head.name], head.dim, spec.predict_variance)
                if mean is not None:
                    means[head.name] = mean
                if variance is not None:
                    variances[head.name] = variance

        if self.potential_mode:
            per_atom = self.energy_scale(means[spec.energy_head])
            atoms = torch.bincount(batch, minlength=num_graphs).to(per_atom.dtype)
            total = per_atom.squeeze(-1) * atoms
            # the head reports what its labels are: the energy per atom, or the structure's total
            means[spec.energy_head] = per_atom if spec.energy_per_atom else total.unsqueeze(-1)
            forces, stress = forces_and_stress(
                total, trunk.strained, getattr(data, "cell", None), create_graph=self.training
            )
            if spec.forces_head is not None:
                means[spec.forces_head] = forces
            if spec.stress_head is not None:
                means[spec.stress_head] = stress * self.stress_factor

        result = {head.name: means[head.name] for head in spec.heads}
        for head in spec.heads:
            if head.name in variances:
                result[head.name + VARIANCE_SUFFIX] = variances[head.name]
        return result


@dataclass
class _Trunk:
    """What message passing hands to the readout."""

    h: Tensor  # [N, hidden_dim] node embeddings
    batch: Tensor  # [N] graph of each node
    num_graphs: int
    strained: object | None  # potential mode: the strained edge vectors forces and stress derive from
    layer_outputs: list[Tensor]  # each layer's output before normalisation, [N, hidden_dim] each
