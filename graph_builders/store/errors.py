"""Exceptions of the dataset store; all subclass ValueError and name the file, split or sample."""

from __future__ import annotations


class StoreError(ValueError):
    """A dataset file, or a request to it, is invalid."""


class DatasetNotFoundError(StoreError, FileNotFoundError):
    """The dataset path does not exist."""


class InconsistentGraphsError(StoreError):
    """Graphs of one split do not share the same keys, dtypes or trailing shapes."""


class SampleIndexError(StoreError, IndexError):
    """A sample index is outside the split (an IndexError too, so iteration protocols stop)."""
