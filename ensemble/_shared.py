"""Per-edge work done once per batch for all members: edge vectors and the radial geometry.

Every member with a geometric layer family (SchNet, CGCNN, PaiNN, EGNN, ...) starts its forward
pass by turning the batch's edge vectors into an
:class:`~hydragnn_ensemble.model.geometry.EdgeGeometry` (distances, unit vectors, a Gaussian radial
basis ``[E, num_gaussians]`` and the cosine cutoff). That is about a quarter of a SchNet forward
pass, and it depends only on the batch, the radius and the number of Gaussians, not on the
member's weights. :func:`share_geometry` replaces a loaded member's ``model.geometry`` with a
:class:`SharedGeometry` that reads the result from the batch's :class:`EdgeWork` (computed by the
first member that needs it, reused by the others). Outside :func:`EdgeWork.active` it computes as
the original encoder does, so the model stays usable on its own.

Potential-mode members (forces by autograd through the edge vectors) are left alone: their
geometry must be differentiable in their own strained vectors.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Iterator

import torch
from torch import Tensor, nn

from graph_builders.schema import edge_vectors
from hydragnn_ensemble.model.geometry import EdgeGeometry, GeometryEncoder


@dataclass
class EdgeWork:
    """Per-batch cache: the batch's edge vectors and one geometry per (radius, num_gaussians)."""

    batch: object
    vectors: Tensor | None = None
    geometry: dict[tuple[float, int], EdgeGeometry] = field(default_factory=dict)
    hits: int = 0  # members that reused a cached geometry (for tests and profiling)

    def geometry_for(self, encoder: GeometryEncoder) -> EdgeGeometry:
        """The geometry of this batch for ``encoder``'s radius and basis, computed once."""
        key = (float(encoder.cutoff), int(encoder.basis.centres.numel()))
        cached = self.geometry.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        if self.vectors is None:
            self.vectors = edge_vectors(self.batch)
        cached = encoder(self.vectors)
        self.geometry[key] = cached
        return cached


class SharedGeometry(nn.Module):
    """Drop-in for a model's ``GeometryEncoder`` that uses the active :class:`EdgeWork`.

    ``work`` is set for the duration of one member's forward pass by :func:`active_work`; with
    none set (or for vectors of another edge count) it is exactly the wrapped encoder."""

    def __init__(self, encoder: GeometryEncoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.work: EdgeWork | None = None

    @property
    def cutoff(self) -> float:
        return self.encoder.cutoff

    @property
    def basis(self) -> nn.Module:
        return self.encoder.basis

    def forward(self, vector: Tensor, edge_attr: Tensor | None = None) -> EdgeGeometry:
        work = self.work
        if work is None or vector.shape[0] != getattr(work.batch, "edge_index").shape[1]:
            return self.encoder(vector, edge_attr)
        geom = work.geometry_for(self.encoder)
        return replace(geom, edge_attr=edge_attr) if edge_attr is not None else geom


def share_geometry(model: nn.Module) -> SharedGeometry | None:
    """Give ``model`` (a HydraModel) a :class:`SharedGeometry`; None when it has no geometry to
    share (no geometric layers, or potential mode)."""
    encoder = getattr(model, "geometry", None)
    if isinstance(encoder, SharedGeometry):
        return encoder
    if not isinstance(encoder, GeometryEncoder) or getattr(model, "potential_mode", False):
        return None
    shared = SharedGeometry(encoder)
    model.geometry = shared
    return shared


@contextmanager
def active_work(shared: SharedGeometry | None, work: EdgeWork) -> Iterator[None]:
    """Let ``shared`` read from ``work`` inside the block."""
    if shared is None:
        yield
        return
    shared.work = work
    try:
        yield
    finally:
        shared.work = None


def inference_context(potential_mode: bool):
    """``torch.inference_mode()`` for direct-head members; potential-mode members need autograd."""
    return torch.inference_mode(False) if potential_mode else torch.inference_mode()
