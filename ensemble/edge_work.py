"""Per-edge work done once per batch for all members: edge vectors and the radial geometry.

Every member with a geometric layer family (SchNet, CGCNN, PaiNN, EGNN, ...) starts its forward
pass by turning the batch's edge vectors into an
:class:`~hydragnn_ensemble.model.geometry.EdgeGeometry` (distances, unit vectors, a Gaussian radial
basis ``[E, num_gaussians]`` and the cosine cutoff). That is about a quarter of a SchNet forward
pass, and it depends only on the batch, the radius and the number of Gaussians, not on the
member's weights. :class:`EdgeWork` computes it once per batch and (radius, basis) and hands it to
each member's forward pass as an argument (``HydraModel.forward(data, geometry)``).

Families that read a radial table (SchNet, PaiNN on large batches) leave the per-edge basis out;
a member of another family sharing that geometry gets it added (``GeometryEncoder.complete``), and
the other way round. Potential-mode members (forces by autograd through the edge vectors) take none:
their geometry must be differentiable in their own strained vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from graph_builders.schema import edge_vectors
from hydragnn_ensemble.model.geometry import EdgeGeometry, GeometryEncoder


@dataclass
class EdgeWork:
    """Per-batch cache: the batch's edge vectors and one geometry per (radius, basis, its size)."""

    batch: object
    vectors: Tensor | None = None
    geometry: dict[tuple[float, str, int], EdgeGeometry] = field(default_factory=dict)
    hits: int = 0  # members that reused a cached geometry (for tests and profiling)

    def geometry_for(self, encoder: GeometryEncoder | None) -> EdgeGeometry | None:
        """The geometry of this batch for ``encoder``'s radius and basis, computed once; None for
        a member that takes no shared geometry (``encoder`` None)."""
        if encoder is None:
            return None
        key = encoder.basis_key
        cached = self.geometry.get(key)
        if cached is not None:
            self.hits += 1
            return encoder.complete(cached)  # e.g. the per-edge basis a table-reading member left out
        if self.vectors is None:
            self.vectors = edge_vectors(self.batch)
        cached = encoder(self.vectors)
        self.geometry[key] = cached
        return cached


def inference_context(potential_mode: bool):
    """``torch.inference_mode()`` for direct-head members; potential-mode members need autograd."""
    return torch.inference_mode(False) if potential_mode else torch.inference_mode()
