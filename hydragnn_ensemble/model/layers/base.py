"""The small template every message-passing layer family fills.

A layer is a :class:`ConvLayer`: it is built from a :class:`LayerConfig` and maps
``(h, edges, geom, vec) -> (h_new, vec_new)`` where

* ``h`` [N, hidden] are scalar (rotation-invariant) node features;
* ``edges`` is the batch's :class:`~hydragnn_ensemble.model.edges.Edges`: ``edge_index`` [2, E]
  with row 0 = neighbour ``j`` (source) and row 1 = centre ``i`` (target), so messages flow
  ``j -> i`` and are summed at ``i``, and the gathers and sums over it (sparse operators built once
  per forward pass and shared by the layers);
* ``geom`` is the shared :class:`~hydragnn_ensemble.model.geometry.EdgeGeometry` (vectors, distances,
  radial basis, cutoff weights, builder edge features), computed once per forward pass;
* ``vec`` is the layer family's vector (equivariant) node state, ``None`` before the first layer and
  for families that carry none.

Class attributes tell the model what a family needs:

* ``needs_geometry``: the model must compute edge geometry (and the family responds to positions,
  which makes it usable as an interatomic potential);
* ``carries_vectors``: ``vec`` is meaningful and passed from layer to layer;
* ``filters_on_distance``: the family has filters of the edge distance alone, which it reads from
  ``geom.radial`` when the encoder tabulated them (a :class:`~hydragnn_ensemble.model.geometry.
  RadialTable`; ``None`` in potential mode and on small batches), else per edge;
* ``self_contained``: the layer returns the finished node state (its own residual update). Otherwise
  the model applies ``h <- h + act(norm(h_new))`` after the layer;
* ``reads_raw_input``: the family can be built HydraGNN-shaped: its first layer reads
  ``LayerConfig.input_dim`` raw node features instead of ``hidden_dim``, ``LayerConfig.hydragnn_shaped``
  asks for HydraGNN's internals where they differ, and the model applies ``h <- act(norm(h_new))``,
  no residual, after every layer (``self_contained`` families too: their own residual stays inside);
* ``hydragnn_batch_norm``: in a HydraGNN-shaped model, ``norm`` is a BatchNorm, as HydraGNN's stack
  of that family has it (its EGNN, SchNet and PaiNN stacks have none: then no normalisation);
* ``hydragnn_radial_basis``: in a HydraGNN-shaped model, the radial basis in ``geom.rbf`` and
  ``geom.radial`` (a name of :data:`~hydragnn_ensemble.model.geometry.RADIAL_BASES`; PaiNN: sinc);
* ``radial_filter_option``: the family multiplies its messages by :func:`radial_weight`, a linear
  filter of the radial basis, when ``LayerConfig.radial_filter`` (EGNN, CGCNN, whose messages
  otherwise read the distance only through a sum with the node terms; models saved before the
  option have none). SchNet and PaiNN filter their messages by construction.

Gathering and aggregation go through ``edges`` (``gather_source``, ``gather_target``,
``sum_at_target``, ``neighbour_sum``, ``extreme_at_target``, ``in_degree``), plain torch and
deterministic on CPU.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hydragnn_ensemble.model.edges import Edges
from hydragnn_ensemble.model.geometry import EdgeGeometry

_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU,
    "silu": nn.SiLU,
    "gelu": nn.GELU,
    "elu": nn.ELU,
    "selu": nn.SELU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "softplus": nn.Softplus,
    "prelu": nn.PReLU,
    "lrelu_01": lambda: nn.LeakyReLU(0.1),
    "lrelu_025": lambda: nn.LeakyReLU(0.25),
    "lrelu_05": lambda: nn.LeakyReLU(0.5),
    "leaky_relu": nn.LeakyReLU,
}

ACTIVATION_NAMES: tuple[str, ...] = tuple(_ACTIVATIONS)


def make_activation(name: str) -> nn.Module:
    """A fresh activation module by name (HydraGNN's names plus a few common ones)."""
    try:
        return _ACTIVATIONS[name]()
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; valid names: {', '.join(ACTIVATION_NAMES)}"
        ) from None


class ShiftedSoftplus(nn.Module):
    """``softplus(x) - log 2`` (SchNet's activation; zero at zero, smooth)."""

    def __init__(self) -> None:
        super().__init__()
        self.shift = float(torch.log(torch.tensor(2.0)))

    def forward(self, x: Tensor) -> Tensor:
        # in place: softplus's backward reads its input, not its output, so no second tensor is needed
        return F.softplus(x).sub_(self.shift)


def radial_weight(radial_filter: nn.Module | None, geom: EdgeGeometry) -> Tensor:
    """The per-edge weight of a message [E, F] (or [E, 1]): ``radial_filter(rbf) * cutoff``, or the
    cutoff alone without a filter.

    A message ``f(h_i, h_j, d)`` whose distance ``d`` is one more input of an MLP changes with ``d``
    in nearly the same way for every pair of species and every feature (only the slope of the
    activation differs). Times a filter ``W(d)`` of its own per feature, ``f * W`` gives each pair
    and feature a distance profile of its own, what forces (derivatives of the energy in the
    positions) are made of; without it such a layer as a potential trains its forces to zero."""
    cutoff = geom.require("cutoff").unsqueeze(-1)
    if radial_filter is None:
        return cutoff
    return radial_filter(geom.require("rbf")) * cutoff


@dataclass(frozen=True)
class LayerConfig:
    """Everything a layer constructor reads (taken from the ModelSpec by the builder)."""

    hidden_dim: int
    edge_dim: int = 0
    num_gaussians: int = 50
    radius: float = 5.0
    activation: str = "relu"
    layer_index: int = 0
    num_layers: int = 1
    pna_degree_histogram: tuple[int, ...] | None = None
    equivariance: bool = True  # EGNN: update coordinates between layers
    radial_filter: bool = True  # EGNN, CGCNN: messages times a linear filter of the radial basis
    input_dim: int | None = None  # the width of ``h`` the layer reads (None: hidden_dim)
    hydragnn_shaped: bool = False  # the family's internals as HydraGNN builds them (where they differ)

    @property
    def is_last(self) -> bool:
        return self.layer_index == self.num_layers - 1

    @property
    def width_in(self) -> int:
        """The width of the node features the layer reads."""
        return self.hidden_dim if self.input_dim is None else self.input_dim


class ConvLayer(nn.Module, ABC):
    """One message-passing layer; subclasses implement :meth:`forward`."""

    needs_geometry: ClassVar[bool] = False
    carries_vectors: ClassVar[bool] = False
    filters_on_distance: ClassVar[bool] = False
    self_contained: ClassVar[bool] = False
    reads_raw_input: ClassVar[bool] = False
    hydragnn_batch_norm: ClassVar[bool] = True
    hydragnn_radial_basis: ClassVar[str] = "gaussian"
    radial_filter_option: ClassVar[bool] = False

    def __init__(self, config: LayerConfig) -> None:
        super().__init__()
        self.config = config

    @abstractmethod
    def forward(
        self, h: Tensor, edges: Edges, geom: EdgeGeometry, vec: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """Return the new scalar node features [N, hidden] and the new vector state (or None)."""
