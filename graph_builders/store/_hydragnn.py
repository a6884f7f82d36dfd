"""What HydraGNN's own loader (``hydragnn.utils.datasets.adiosdataset.AdiosDataset``) and trainer
need in each sample, written next to our fields so that a dataset built here trains in HydraGNN
unchanged:

- ``y`` ``[sum of head sizes, 1]`` float and ``y_loc`` ``[1, H + 1]`` int64: every head's targets
  in the registry's order, a graph head's ``dim`` values, a node head's ``[N, dim]`` values row by
  row (HydraGNN's ``update_predicted_values`` layout; ``y_loc`` are the offsets). HydraGNN's
  ``Variables_of_interest.output_index`` of the registry's k-th head is k.
- ``edge_shifts`` ``[E, 3]`` float: the Cartesian periodic shift HydraGNN adds in
  ``get_edge_vectors_and_lengths`` (``pos[row 1] - pos[row 0] + edge_shifts``), i.e.
  ``-(edge_shift @ cell)`` in our convention (``pos[j] + edge_shift @ cell - pos[i]``, row 0 = j).
- ``atomic_numbers`` ``[N, 1]`` int64, the name HydraGNN's MLIP code reads (our ``z``).

Our reader leaves these fields out of the graphs it returns (they repeat what our fields say).
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry
from graph_builders.store.errors import StoreError

#: Fields the store writes for HydraGNN; our reader skips them.
HYDRAGNN_FIELDS: frozenset[str] = frozenset({"y", "y_loc", "edge_shifts", "atomic_numbers"})


def with_hydragnn_fields(graph: Data, heads: HeadRegistry, label: str) -> Data:
    """A shallow copy of ``graph`` with HydraGNN's fields added (see the module docstring)."""
    taken = sorted(k for k in HYDRAGNN_FIELDS if k in graph.keys())
    if taken:
        raise StoreError(f"{label}: attribute(s) {taken} are reserved: the store writes HydraGNN's "
                         "y/y_loc/edge_shifts/atomic_numbers from the heads and our fields")
    out = Data(**{k: graph[k] for k in graph.keys()})
    parts, loc = [], [0]
    for head in heads:
        values = graph[head.key].reshape(-1, 1)
        parts.append(values.to(torch.float32) if values.dtype == torch.float64 else values)
        loc.append(loc[-1] + values.shape[0])
    out.y = torch.cat(parts, dim=0) if parts else torch.zeros((0, 1), dtype=torch.float32)
    out.y_loc = torch.tensor([loc], dtype=torch.int64)
    shift = getattr(graph, "edge_shift", None)
    if shift is not None:
        out.edge_shifts = -(shift.to(graph.cell.dtype) @ graph.cell.reshape(3, 3)).to(graph.pos.dtype)
    z = getattr(graph, "z", None)
    if z is not None:
        out.atomic_numbers = z.reshape(-1, 1).to(torch.int64)
    return out
