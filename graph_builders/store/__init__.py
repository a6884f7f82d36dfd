"""The ADIOS2 dataset store: graphs in HydraGNN's layout, random access, lazy torch datasets.

A dataset is one ``.bp`` file (a directory) holding the splits "trainset", "valset", "testset"
(and optionally "calset", the calibration split), the head registry, metadata and optional
normalisation statistics. See :mod:`._layout` for the key layout, which HydraGNN's
``AdiosDataset`` can read.
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
from graph_builders.store.reader import GraphStore, is_project_dataset
from graph_builders.store.writer import resolve_splits, update_normalisation, write_dataset

__all__ = [
    "CALIBRATION_SPLIT",
    "SPLIT_NAMES",
    "AdiosGraphDataset",
    "DatasetNotFoundError",
    "GraphStore",
    "InconsistentGraphsError",
    "SampleIndexError",
    "StoreError",
    "check_output_path",
    "describe",
    "is_project_dataset",
    "resolve_splits",
    "shard_indices",
    "update_normalisation",
    "write_dataset",
]
