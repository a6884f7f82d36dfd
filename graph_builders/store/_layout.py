"""Names inside a dataset file: HydraGNN's ADIOS2 layout plus the attributes this project adds.

HydraGNN's ``AdiosWriter`` layout, which this store follows so HydraGNN's ``AdiosDataset`` reads our
files, is, per split ``<s>`` ("trainset", "valset", "testset") and per graph attribute ``<k>``:

* variable ``<s>/<k>``: the attribute of every sample concatenated along one axis (its
  "variable dimension"; 1 for ``edge_index``, 0 for everything else);
* variable ``<s>/<k>/variable_count`` [ndata] int64: each sample's size along that axis;
* variable ``<s>/<k>/variable_offset`` [ndata] int64: where each sample starts along that axis;
* attribute ``<s>/<k>/variable_dim``: the axis;
* attributes ``<s>/ndata`` (number of samples) and ``<s>/keys`` (the attribute names);
* attribute ``total_ndata``.

Strings (the per-graph ``name``) are stored like HydraGNN does it: UTF-8 bytes as a uint8 array.
Our extras live under the ``hydragnn_ensemble/`` prefix (which HydraGNN ignores) and at the top
level: ``heads`` (HeadRegistry JSON), ``metadata`` (JSON), ``normalisation`` (JSON, optional).
"""

from __future__ import annotations

SPLIT_NAMES: tuple[str, ...] = ("trainset", "valset", "testset", "calset")
CALIBRATION_SPLIT = "calset"
#: "calset", when a dataset has it, is the calibration split: structures no training, early stopping
#: or member selection saw, on which ``select --calibrate`` fits the uncertainty model (HydraGNN
#: reads the three splits it knows and ignores this one).

FORMAT_ATTR = "hydragnn_ensemble/format"
FORMAT_VERSION = "hydragnn-ensemble-graphs/2"  # 2: dataset facts, fields derived from HydraGNN's
FACTS_ATTR = "hydragnn_ensemble/facts"  # graph_builders.store.facts.DatasetFacts as JSON
LAYOUT_ATTR = "hydragnn_ensemble/layout"  # graph_builders.store.layouts
HEADS_ATTR = "heads"
METADATA_ATTR = "metadata"
NORMALISATION_ATTR = "normalisation"
TOTAL_NDATA_ATTR = "total_ndata"
# Marker file of an ADIOS2 BP4/BP5 directory.
BP_INDEX_FILE = "md.idx"
# A sharded dataset (graph_builders.store.sharded): a directory with this index of its shards.
SHARD_INDEX_NAME = "shards.json"
SHARD_INDEX_FORMAT = "hydragnn-ensemble-shards/1"


def ndata_attr(split: str) -> str:
    return f"{split}/ndata"


def keys_attr(split: str) -> str:
    return f"{split}/keys"


def data_var(split: str, key: str) -> str:
    return f"{split}/{key}"


def count_var(split: str, key: str) -> str:
    return f"{split}/{key}/variable_count"


def offset_var(split: str, key: str) -> str:
    return f"{split}/{key}/variable_offset"


def dim_attr(split: str, key: str) -> str:
    return f"{split}/{key}/variable_dim"


def fields_attr(split: str) -> str:
    """JSON {key: {"kind": ..., "torch_dtype": ...}}: how to turn stored arrays back into values."""
    return f"hydragnn_ensemble/{split}/fields"


def source_index_var(split: str) -> str:
    """int64 [ndata]: position of each stored sample in the list given to ``write_dataset``."""
    return f"hydragnn_ensemble/{split}/source_index"
