"""The ADIOS2 dataset store: graphs in HydraGNN's layout, block and random access, lazy torch datasets.

A dataset is one ``.bp`` file (a directory) holding the splits "trainset", "valset", "testset"
(and optionally "calset", the calibration split), the head registry, metadata, the facts every
trial needs (:mod:`.facts`) and optional normalisation statistics; or a directory of such shards
with an index (:mod:`.sharded`). See :mod:`._layout` for the key layout, which HydraGNN's
``AdiosDataset`` can read, and :mod:`.layouts` for how compactly it is stored.
"""

from graph_builders.store._atomic import check_output_path
from graph_builders.store._layout import CALIBRATION_SPLIT, SPLIT_NAMES
from graph_builders.store.dataset import AdiosGraphDataset, shard_indices
from graph_builders.store.describe import describe
from graph_builders.store.errors import (
    DatasetNotFoundError,
    InconsistentGraphsError,
    SampleIndexError,
    StoreError,
)
from graph_builders.store.facts import DatasetFacts, Moments, SplitFacts
from graph_builders.store.facts_cache import dataset_facts
from graph_builders.store.layouts import DEFAULT_LAYOUT, LAYOUTS
from graph_builders.store.reader import GraphBlock, GraphStore, is_project_dataset
from graph_builders.store.sharded import ShardedStore, ShardWriter, is_sharded, open_dataset, write_index
from graph_builders.store.writer import resolve_splits, update_normalisation, write_dataset

__all__ = [
    "CALIBRATION_SPLIT",
    "DEFAULT_LAYOUT",
    "LAYOUTS",
    "SPLIT_NAMES",
    "AdiosGraphDataset",
    "DatasetFacts",
    "DatasetNotFoundError",
    "GraphBlock",
    "GraphStore",
    "Moments",
    "ShardWriter",
    "ShardedStore",
    "SplitFacts",
    "InconsistentGraphsError",
    "SampleIndexError",
    "StoreError",
    "check_output_path",
    "dataset_facts",
    "describe",
    "is_project_dataset",
    "is_sharded",
    "open_dataset",
    "resolve_splits",
    "shard_indices",
    "update_normalisation",
    "write_dataset",
    "write_index",
]
