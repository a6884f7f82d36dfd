"""How compactly a dataset is stored: one registry of layouts, which the writer, ``build-graphs
--layout`` and the docs read.

Every layout writes HydraGNN's fields (:mod:`graph_builders.store._hydragnn`). A field of ours that
one of HydraGNN's already holds is not stored again: the reader derives it (``z`` from
``atomic_numbers``; ``edge_shift`` from ``edge_shifts`` and the cell), each checked at write time to
come back exactly (else it is stored after all).

* ``hydragnn``: everything HydraGNN's ``AdiosDataset`` reads, as it reads it (int64 ``edge_index``,
  the edge lengths as ``edge_attr``). The default.
* ``compact``: ``edge_index`` as int32 and no stored edge lengths: ``edge_attr`` is recomputed on
  read from the positions and shifts (float32 rounding, relative 1e-6). About half the bytes of a
  periodic atomic graph, for training here. HydraGNN's loader opens it, but its EGNN refuses an int32
  ``edge_index`` ("expected scalar type Long but found Int", measured with HydraGNN's
  ``AdiosDataset``), its PNA degree helper wants int64, and layers reading edge lengths find none:
  ``export --with-dataset`` writes HydraGNN's copy in the ``hydragnn`` layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from graph_builders.store.errors import StoreError

#: our field -> the HydraGNN field it is derived from (when that round-trips exactly)
DERIVED_FROM_HYDRAGNN: dict[str, str] = {"z": "atomic_numbers", "edge_shift": "edge_shifts"}
#: edge_attr recomputed as the edge lengths (compact layout)
EDGE_LENGTH = "edge_length"


@dataclass(frozen=True)
class Layout:
    """A way to store graphs: ``name``, the dtype ``edge_index`` is stored as, whether edge lengths
    in ``edge_attr`` are recomputed on read, and what HydraGNN makes of it (for the docs)."""

    name: str
    edge_index_dtype: str = "int64"
    edge_lengths_on_read: bool = False
    hydragnn: str = ""


LAYOUTS: dict[str, Layout] = {
    "hydragnn": Layout("hydragnn", hydragnn="reads it as written"),
    "compact": Layout("compact", "int32", True,
                      hydragnn="reads it for layers that compute their own edge lengths (no stored edge_attr)"),
}
DEFAULT_LAYOUT = "hydragnn"


def layout_named(name: str) -> Layout:
    """The layout called ``name``; StoreError listing the layouts otherwise."""
    try:
        return LAYOUTS[name]
    except KeyError:
        raise StoreError(f"unknown dataset layout {name!r}; layouts: {', '.join(LAYOUTS)}") from None
