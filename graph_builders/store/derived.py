"""Fields the reader computes from others instead of reading them (:mod:`graph_builders.store.layouts`).

Each works on a block of graphs as the file holds them (every key's rows concatenated, with the
graphs' node and edge counts), so a block of any size costs a few vectorised operations:

* ``z`` from HydraGNN's ``atomic_numbers`` ``[N, 1]``;
* ``edge_shift`` (integer cell offsets) from HydraGNN's Cartesian ``edge_shifts`` and the cell:
  ``edge_shifts = -(edge_shift @ cell)``, so ``edge_shift = round(-edge_shifts @ cell^-1)``;
* ``edge_attr`` as the edge lengths ``|pos[j] - pos[i] - edge_shifts|`` (row 0 = j, row 1 = i; the
  compact layout), equal to the stored float32 lengths within :data:`EDGE_LENGTH_RTOL`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

#: recomputed edge lengths agree with the stored ones to this relative tolerance (float32 rounding)
EDGE_LENGTH_RTOL = 1e-5


def derive_block(field: str, arrays: Mapping[str, np.ndarray], node_counts: np.ndarray,
                 edge_counts: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``field`` for a block of graphs from ``arrays`` (concatenated rows) and the graphs' node and
    edge counts, as ``dtype``; KeyError when a source field is missing."""
    if field == "z":
        return arrays["atomic_numbers"].reshape(-1).astype(dtype)
    if field == "edge_shift":
        return _integer_shifts(arrays["edge_shifts"], arrays["cell"], edge_counts, dtype)
    graph_of_edge = np.repeat(np.arange(len(edge_counts)), edge_counts)
    if field == "edge_attr":
        first_node = np.concatenate(([0], np.cumsum(node_counts)[:-1]))[graph_of_edge]
        index = arrays["edge_index"].astype(np.int64) + first_node
        pos = arrays["pos"]
        vectors = pos[index[0]] - pos[index[1]] - arrays["edge_shifts"]
        return np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True).astype(dtype)
    raise KeyError(f"no rule derives {field!r}")


def _integer_shifts(cartesian: np.ndarray, cell: np.ndarray, edge_counts: np.ndarray,
                    dtype: np.dtype) -> np.ndarray:
    """``round(-edge_shifts @ cell^-1)`` graph by graph (each graph's edges are contiguous): one
    small matrix product per graph into the output is ~6x faster than one ``einsum`` over per-edge
    inverses. float32 suffices: the results are small integers, the rounding error ~1e-6 of them."""
    inverse = np.linalg.inv(cell.reshape(-1, 3, 3).astype(np.float64)).astype(np.float32)
    vectors = cartesian.astype(np.float32, copy=False)
    out = np.empty(vectors.shape, dtype=np.float32)
    first = 0
    for g, end in enumerate(np.cumsum(edge_counts).tolist()):
        np.matmul(vectors[first:end], inverse[g], out=out[first:end])
        first = end
    np.negative(out, out=out)
    np.rint(out, out=out)
    return out.astype(dtype, copy=False)


def derive_field(field: str, values: Mapping[str, torch.Tensor], dtype: torch.dtype | None = None) -> torch.Tensor:
    """``field`` of one graph (its tensors by key), as ``dtype`` (default: the graph's own
    ``field`` dtype); what the writer checks before it leaves a field out."""
    if dtype is None:
        dtype = values[field].dtype
    numpy_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    arrays = {k: v.detach().cpu().numpy() for k, v in values.items() if isinstance(v, torch.Tensor)}
    nodes = np.array([arrays["pos"].shape[0]])
    edges = np.array([arrays["edge_index"].shape[1]])
    out = torch.from_numpy(derive_block(field, arrays, nodes, edges, numpy_dtype))
    return out.bool() if dtype == torch.bool else out
