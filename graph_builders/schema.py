"""The one graph schema shared by atoms, grains and FEM meshes.

Every builder returns a ``torch_geometric.data.Data`` with these fields (N nodes, E directed edges):

==============  ===============  =====================================================================
field           shape / dtype    meaning
==============  ===============  =====================================================================
``pos``         [N, 3] float32   node positions (atoms, grain centroids, mesh vertices); 2-D meshes
                                 get z = 0
``x``           [N, F] float32   node features (atoms: atomic number as one float column)
``z``           [N] int64        atomic numbers (atomic graphs only; the models' embedding input)
``edge_index``  [2, E] int64     **row 0 = neighbour j (source), row 1 = centre i (target)**;
                                 PyG's default ``source_to_target`` flow, so messages go j -> i.
                                 Every edge is present in both directions.
``edge_attr``   [E, D] float32   edge features (atoms: length; grains: face area, vector,
                                 misorientation; meshes: vector, length)
``cell``        [1, 3, 3] f32    lattice vectors as rows (periodic graphs, and every atomic graph:
                                 zeros for a molecule so that batches mix)
``pbc``         [1, 3] bool      periodic directions
``edge_shift``  [E, 3] float32   integer cell offsets (stored as float for matmul) such that
                                 ``vector_ij = pos[j] + edge_shift @ cell - pos[i]``
``y_<head>``    graph: [1, d]    one target tensor per head, named after the head; graph-level heads
                node:  [N, d]    have one row per graph, node-level heads one row per node
==============  ===============  =====================================================================

The head registry (:class:`HeadRegistry`) records each head's name, level, dimension and unit; it is
stored next to the graphs in the dataset file and is what the trainer, ensemble and store rely on.
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data

# heads (name, level, dim, unit) and energy units live in torch-free modules; re-exported here
from graph_builders.heads import TARGET_PREFIX, HeadLevel, HeadRegistry, HeadSpec  # noqa: F401
from graph_builders.units import (  # noqa: F401
    ENERGY_UNITS_IN_EV,
    MEV_PER_ATOM,
    PER_ATOM_SUFFIX,
    EnergyUnit,
    energy_is_total,
    energy_unit,
    in_mev_per_atom,
)


class GraphSchemaError(ValueError):
    """A graph does not follow the schema; the message names the sample and the problem."""


def validate_graph(data: Data, heads: HeadRegistry | None = None, name: str = "graph") -> None:
    """Check ``data`` against the schema (shapes, dtypes, finite values, heads); raise GraphSchemaError."""

    def fail(msg: str) -> None:
        raise GraphSchemaError(f"{name}: {msg}")

    if data.pos is None or data.pos.dim() != 2 or data.pos.shape[1] != 3:
        fail(f"pos must be [N, 3], got {None if data.pos is None else tuple(data.pos.shape)}")
    n = data.pos.shape[0]
    if n == 0:
        fail("graph has no nodes")
    if not torch.isfinite(data.pos).all():
        fail("pos contains NaN or inf")
    if data.x is None or data.x.dim() != 2 or data.x.shape[0] != n:
        fail(f"x must be [N={n}, F]")
    ei = data.edge_index
    if ei is None or ei.dim() != 2 or ei.shape[0] != 2 or ei.dtype != torch.long:
        fail("edge_index must be an int64 tensor of shape [2, E]")
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        fail(f"edge_index refers to nodes outside 0..{n - 1}")
    if data.edge_attr is not None and data.edge_attr.shape[0] != ei.shape[1]:
        fail("edge_attr must have one row per edge")
    if getattr(data, "edge_shift", None) is not None:
        if tuple(data.edge_shift.shape) != (ei.shape[1], 3):
            fail("edge_shift must be [E, 3]")
        if getattr(data, "cell", None) is None or tuple(data.cell.shape) != (1, 3, 3):
            fail("a graph with edge_shift needs cell of shape [1, 3, 3]")
    for head in heads or ():
        y = getattr(data, head.key, None)
        if y is None:
            fail(f"missing target {head.key!r} for head {head.name!r}")
        rows = 1 if head.level == "graph" else n
        if tuple(y.shape) != (rows, head.dim):
            fail(f"target {head.key!r} must be [{rows}, {head.dim}], got {tuple(y.shape)}")
        if not torch.isfinite(y).all():
            fail(f"target {head.key!r} contains NaN or inf")


def edge_vectors(data: Data) -> torch.Tensor:
    """Edge vectors ``pos[j] + edge_shift @ cell - pos[i]`` for a graph or a PyG batch.

    Differentiable in ``pos`` (and ``cell``), so models use it for autograd forces and stress.
    """
    j, i = data.edge_index
    vec = data.pos[j] - data.pos[i]
    shift = getattr(data, "edge_shift", None)
    if shift is not None:
        cell = data.cell  # [B, 3, 3] in a batch, [1, 3, 3] for one graph
        if cell.shape[0] == 1:
            vec = vec + shift @ cell[0]
        else:
            vec = vec + _shift_times_cell(shift, cell, data.batch[i])
    return vec


def _shift_times_cell(shift: torch.Tensor, cell: torch.Tensor, graph_of_edge: torch.Tensor) -> torch.Tensor:
    """``shift[e] @ cell[graph_of_edge[e]]`` for a batch: on CPU, when the edges come graph after
    graph (as PyG batches them), one small product per graph (4x faster than gathering a
    ``[E, 3, 3]`` cell per edge: 36 ms against 142 ms for 1.8 M edges of 900 cells); else the gather."""
    if shift.device.type == "cpu" and not bool((graph_of_edge[1:] < graph_of_edge[:-1]).any()):
        counts = torch.bincount(graph_of_edge, minlength=cell.shape[0]).tolist()
        return torch.cat([s @ c for s, c in zip(torch.split(shift, counts), cell)])
    return torch.bmm(shift.unsqueeze(1), cell[graph_of_edge]).squeeze(1)
