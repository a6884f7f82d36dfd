"""The edges of a batch as message passing uses them, with the sparse operators built once per
forward pass and shared by every layer.

Message passing does three things with edges: copy node rows onto edges (``x[j]``, ``x[i]``), sum
edge rows into their target nodes, and sum neighbours' node rows (``sum_j x_j``). Done with
``index_select`` / ``index_add_`` each costs a pass over an ``[E, F]`` temporary, and the backward
of ``index_select`` is a scattered ``index_add_`` (the slowest of them on CPU). :class:`Edges`
replaces the sums by products with compressed sparse row (CSR) matrices:

* ``sum_at_target(m)  = T @ m`` with ``T`` [N, E] (row ``i``: the edges into ``i``); its backward is
  ``grad[i]``, and the backward of ``gather_target`` is ``T @ grad``;
* ``neighbour_sum(x) = A @ x`` with ``A`` [N, N] (row ``i``: the sources of the edges into ``i``, a
  repeated source counted as often as it appears), no ``[E, F]`` temporary at all; its backward
  ``A^T @ grad`` uses ``A^T`` built on first use.

and two products whose autograd form held or computed more than needed: ``gather_source_times(x, w)``
(``x[j] * w``, a continuous filter, keeping ``x`` rather than ``x[j]`` for backward) and
``extreme_at_target`` (per-target max/min, with a backward of one comparison and one sparse sum).

Building ``T`` needs the edges grouped by target: free when ``edge_index[1]`` is already sorted
(the trainer sorts each graph once, :func:`sort_edges_by_target`), one ``argsort`` otherwise.
Results do not depend on the edge order. The CSR path is used for float32 tensors (CPU and CUDA);
other dtypes (float64 in gradient checks, bf16/fp16 under autocast) take ``index_select`` /
``index_add_``. All but the max/min are differentiable twice (forces by autograd are trained with
``create_graph=True``; the max/min serve PNA, which is never a potential).
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import torch
from torch import Tensor
from torch_geometric.data import Data


def _csr(rows: Tensor, cols: Tensor, num_rows: int, num_cols: int) -> Tensor:
    """CSR matrix of ones with one entry per element of ``rows`` (sorted) at ``cols``."""
    return csr_matrix(rows, cols, torch.ones(rows.shape[0], dtype=torch.float32, device=rows.device),
                      num_rows, num_cols)


def csr_matrix(rows: Tensor, cols: Tensor, values: Tensor, num_rows: int, num_cols: int) -> Tensor:
    """CSR matrix with ``values`` at (``rows``, ``cols``), any order (sorted by row here)."""
    if not _is_sorted(rows):
        order = torch.argsort(rows, stable=True)
        rows, cols, values = rows[order], cols[order], values[order]
    crow = torch.zeros(num_rows + 1, dtype=torch.long, device=rows.device)
    torch.cumsum(torch.bincount(rows, minlength=num_rows), 0, out=crow[1:])
    with warnings.catch_warnings():  # "sparse CSR support is in beta", once per process
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, cols, values, (num_rows, num_cols), check_invariants=False)


def sparse_times(matrix: Tensor, x: Tensor, transpose: Callable[[], Tensor]) -> Tensor:
    """``matrix @ x`` for a float32 CSR ``matrix`` and dense ``x``, differentiable (twice) in ``x``:
    its gradient multiplies by ``transpose()``, a CSR built on first use."""
    return _SumRows.apply(x, matrix, _Transpose(build=transpose))


def _grouped(index: Tensor) -> tuple[Tensor, Tensor]:
    """``index`` sorted and the edge ids in that order (``arange`` when it was sorted already)."""
    if _is_sorted(index):
        return index, torch.arange(index.shape[0], device=index.device)
    order = torch.argsort(index, stable=True)
    return index[order], order


def _is_sorted(index: Tensor) -> bool:
    return index.numel() < 2 or bool((index[1:] >= index[:-1]).all())


def _rows(x: Tensor) -> Tensor:
    """``x`` as a matrix [rows, features] (also when it has no rows)."""
    return x.reshape(x.shape[0], math.prod(x.shape[1:]))


def _fast(x: Tensor) -> bool:
    return x.dtype == torch.float32 and x.layout == torch.strided and x.device.type in ("cpu", "cuda")


class _SumRows(torch.autograd.Function):
    """``matrix @ x`` (sparse [R, C] times dense [C, F]); its gradient is ``matrix^T @ grad``,
    given as ``index_select`` (``transpose`` an index [C] into R rows) or as the CSR ``transpose``."""

    @staticmethod
    def forward(ctx, x: Tensor, matrix: Tensor, transpose: "_Transpose") -> Tensor:  # type: ignore[override]
        ctx.matrix, ctx.transpose = matrix, transpose
        with torch.autocast(x.device.type, enabled=False):  # float32 in, float32 out, also under autocast
            return matrix @ x

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        return ctx.transpose.apply(grad.contiguous(), ctx.matrix), None, None


class _Transpose:
    """How to multiply by a sparse matrix's transpose: an index (each column has one entry, in
    row ``index[c]``) or a CSR matrix of its own (built on first use)."""

    def __init__(self, index: Tensor | None = None, build: Callable[[], Tensor] | None = None) -> None:
        self.index, self._build, self._matrix = index, build, None

    def apply(self, grad: Tensor, matrix: Tensor) -> Tensor:
        if self.index is not None:
            return _GatherRows.apply(grad, self.index, matrix)
        if self._matrix is None:
            assert self._build is not None
            self._matrix = self._build()
        return _SumRows.apply(grad, self._matrix, _Transpose(build=lambda: matrix))


class _GatherRows(torch.autograd.Function):
    """``x[index]``; its gradient is ``matrix @ grad`` with ``matrix`` the CSR [N, E] summing each
    edge into row ``index[e]``."""

    @staticmethod
    def forward(ctx, x: Tensor, index: Tensor, matrix: Tensor) -> Tensor:  # type: ignore[override]
        ctx.index, ctx.matrix = index, matrix
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        return _SumRows.apply(grad.contiguous(), ctx.matrix, _Transpose(index=ctx.index)), None, None


class _GatherTimes(torch.autograd.Function):
    """``x[j] * weight`` saving ``x`` [N, ...] instead of ``x[j]`` [E, ...] for backward, where the
    gather is done again; backward is made of differentiable operations (second order for forces)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, edges: "Edges") -> Tensor:  # type: ignore[override]
        ctx.edges = edges
        ctx.save_for_backward(x, weight)
        return x.index_select(0, edges.source) * weight

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        x, weight = ctx.saved_tensors
        edges = ctx.edges
        grad_x = grad_weight = None
        if ctx.needs_input_grad[0]:  # (dtypes differ under autocast: each gradient in its input's)
            grad_x = x.new_zeros(x.shape).index_add(0, edges.source, (grad * weight).to(x.dtype))
        if ctx.needs_input_grad[1]:
            grad_weight = (grad * edges.gather_source(x)).to(weight.dtype)
        return grad_x, grad_weight, None


class _Extreme(torch.autograd.Function):
    """Per-target max/min of edge rows; backward: ``grad[i] * (m == out[i]) / ties`` (first order:
    the layers using it are not trained through forces)."""

    @staticmethod
    def forward(ctx, messages: Tensor, edges: "Edges", reduce: str) -> Tensor:  # type: ignore[override]
        index = edges.target.unsqueeze(-1).expand_as(messages)
        out = messages.new_zeros((edges.num_nodes,) + tuple(messages.shape[1:]))
        out = out.scatter_reduce(0, index, messages, "a" + reduce, include_self=False)
        ctx.edges = edges
        ctx.save_for_backward(messages, out)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        messages, out = ctx.saved_tensors
        edges = ctx.edges
        hit = (messages == edges.gather_target(out)).to(messages.dtype)
        share = grad / edges.sum_at_target(hit).clamp_min(1.0)
        return hit.mul_(edges.gather_target(share)), None, None


class Edges:
    """``edge_index`` [2, E] (row 0 source ``j``, row 1 target ``i``) of a graph or batch of
    ``num_nodes`` nodes, and the gathers and sums of message passing over it (module docstring)."""

    def __init__(self, edge_index: Tensor, num_nodes: int) -> None:
        self.index = edge_index
        self.source, self.target = edge_index[0], edge_index[1]
        self.num_nodes = num_nodes
        self._by_target: tuple[Tensor, Tensor] | None = None  # targets sorted, edge ids in that order
        self._to_target: Tensor | None = None
        self._adjacency: Tensor | None = None
        self._adjacency_t: Tensor | None = None
        self._degree: Tensor | None = None

    @property
    def num_edges(self) -> int:
        return int(self.index.shape[1])

    def gather_source(self, x: Tensor) -> Tensor:
        """``x[j]`` per edge [E, ...]."""
        return x.index_select(0, self.source)

    def gather_source_times(self, x: Tensor, weight: Tensor) -> Tensor:
        """``x[j] * weight`` per edge (``weight`` [E, ...], a continuous filter), keeping only ``x``
        and ``weight`` for backward (one [E, ...] tensor less held per layer)."""
        return _GatherTimes.apply(x, weight, self)

    def gather_target(self, x: Tensor) -> Tensor:
        """``x[i]`` per edge [E, ...]."""
        if not _fast(x):
            return x.index_select(0, self.target)
        flat = _rows(x)
        return _GatherRows.apply(flat, self.target, self.to_target()).view((self.num_edges,) + x.shape[1:])

    def sum_at_target(self, messages: Tensor) -> Tensor:
        """Per-edge rows [E, ...] summed into their targets [N, ...]."""
        if not _fast(messages):
            out = messages.new_zeros((self.num_nodes,) + tuple(messages.shape[1:]))
            return out.index_add_(0, self.target, messages)
        flat = _rows(messages)
        out = _SumRows.apply(flat, self.to_target(), _Transpose(index=self.target))
        return out.view((self.num_nodes,) + messages.shape[1:])

    def neighbour_sum(self, x: Tensor) -> Tensor:
        """``sum_j x_j`` over the edges into each node [N, ...] (a source repeated through periodic
        images counts once per edge), without per-edge temporaries."""
        if not _fast(x):
            return self.sum_at_target(self.gather_source(x))
        flat = _rows(x)
        out = _SumRows.apply(flat, self.adjacency(), _Transpose(build=self.adjacency_transpose))
        return out.view(x.shape)

    def extreme_at_target(self, messages: Tensor, reduce: str) -> Tensor:
        """Per-feature ``"max"`` or ``"min"`` of the edge rows [E, F] into each target [N, F] (0 where
        a node has no edges). The gradient goes to the edges that attain it, shared equally among ties
        (as ``scatter_reduce``'s), computed with one comparison and one sparse sum."""
        if reduce not in ("max", "min"):
            raise ValueError(f"reduce must be 'max' or 'min', got {reduce!r}")
        return _Extreme.apply(messages, self, reduce)

    def in_degree(self, dtype: torch.dtype) -> Tensor:
        """Number of edges into each node [N]."""
        if self._degree is None:
            self._degree = torch.bincount(self.target, minlength=self.num_nodes)
        return self._degree.to(dtype)

    # -- the sparse operators, built on first use ----------------------------------------------------
    def to_target(self) -> Tensor:
        """CSR [N, E]: row ``i`` holds the edges into ``i``."""
        if self._to_target is None:
            rows, order = self._grouped_by_target()
            self._to_target = _csr(rows, order, self.num_nodes, self.num_edges)
        return self._to_target

    def _grouped_by_target(self) -> tuple[Tensor, Tensor]:
        if self._by_target is None:
            self._by_target = _grouped(self.target)
        return self._by_target

    def adjacency(self) -> Tensor:
        """CSR [N, N]: row ``i`` holds the source of each edge into ``i``."""
        if self._adjacency is None:
            rows, order = self._grouped_by_target()
            self._adjacency = _csr(rows, self.source.index_select(0, order), self.num_nodes, self.num_nodes)
        return self._adjacency

    def adjacency_transpose(self) -> Tensor:
        """CSR [N, N]: row ``j`` holds the target of each edge out of ``j``."""
        if self._adjacency_t is None:
            rows, order = _grouped(self.source)
            self._adjacency_t = _csr(rows, self.target.index_select(0, order), self.num_nodes, self.num_nodes)
        return self._adjacency_t


def sort_edges_by_target(data: Data) -> Data:
    """``data`` with its edges (``edge_index`` and every per-edge field) in the order of their
    target node (stable), so that :class:`Edges` builds its operators without sorting; in place."""
    edge_index = data.edge_index
    num_edges = int(edge_index.shape[1])
    target = edge_index[1]
    if _is_sorted(target):
        return data
    order = torch.argsort(target, stable=True)
    for key in list(data.keys()):
        value = data[key]
        if key == "edge_index":
            data[key] = value[:, order]
        elif key.startswith("edge_") and isinstance(value, Tensor) and value.shape[:1] == (num_edges,):
            data[key] = value[order]
    return data
