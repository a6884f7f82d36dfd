"""Random access to a dataset file written by :func:`graph_builders.store.write_dataset`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import adios2
import numpy as np
from adios2 import bindings
from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry
import graph_builders.store._layout as L
from graph_builders.store._engine import close_reader, open_reader
from graph_builders.store._fields import FieldSpec, decode, spec_from_file
from graph_builders.store._hydragnn import HYDRAGNN_FIELDS
from graph_builders.store.errors import DatasetNotFoundError, SampleIndexError, StoreError


def open_adios_file(path: Path) -> adios2.FileReader:
    """Open ``path`` for random-access reading, with clear errors for missing or foreign paths."""
    if not path.exists():
        raise DatasetNotFoundError(f"{path}: no such dataset")
    if not (path / L.BP_INDEX_FILE).is_file():
        raise StoreError(f"{path}: not an ADIOS2 .bp dataset (no {L.BP_INDEX_FILE} inside)")
    try:
        return open_reader(path)
    except RuntimeError as exc:
        raise StoreError(f"{path}: ADIOS2 cannot open it: {str(exc).strip()}") from exc


@dataclass
class _Field:
    """One key of a split: how to decode it, and where each sample lies in its variable."""

    spec: FieldSpec
    variable: adios2.Variable
    shape: list[int]
    counts: np.ndarray
    offsets: np.ndarray


@dataclass
class _Split:
    name: str
    ndata: int
    fields: dict[str, _Field]
    source_index: np.ndarray | None


def _read_slice(engine: adios2.Engine, field: _Field, index: int) -> np.ndarray:
    """Sample ``index``'s part of ``field``: one contiguous read per leading index.

    Along axis 0 a sample is one contiguous byte range. Along a later axis (edge_index: axis 1) the
    selection of the whole [2, E] block would make ADIOS2 read everything between the first and the
    last byte, so each leading row is read on its own, which touches only the sample's bytes.
    """
    axis = field.spec.cat_dim
    count = list(field.shape)
    count[axis] = int(field.counts[index])
    out = np.empty(count, dtype=field.spec.dtype)
    if out.size == 0:
        return out
    start = [0] * len(count)
    start[axis] = int(field.offsets[index])
    if axis == 0:
        field.variable.set_selection([start, count])
        engine.get(field.variable, out, bindings.Mode.Sync)
        return out
    row_count = [1] * axis + count[axis:]
    for lead in np.ndindex(*count[:axis]):
        field.variable.set_selection([list(lead) + start[axis:], row_count])
        engine.get(field.variable, out[lead], bindings.Mode.Sync)
    return out


def is_project_dataset(path: str | Path) -> bool:
    """True when ``path`` is a dataset this project wrote (it carries the store's format attribute):
    the only thing ``write_dataset`` replaces."""
    path = Path(path)
    if not (path / L.BP_INDEX_FILE).is_file():
        return False
    try:
        reader = open_reader(path)
    except (RuntimeError, ValueError, OSError):
        return False
    try:
        return L.FORMAT_ATTR in reader.available_attributes()
    finally:
        close_reader(reader, path)


class GraphStore:
    """An open dataset file: heads, metadata, normalisation and per-sample random access.

    ``get`` reads only the requested sample's slice of every variable. The per-sample
    counts/offsets of a split are read once, on its first use. Not shareable across processes:
    each process (DataLoader worker, MPI rank) opens its own; :class:`AdiosGraphDataset` does that
    for you.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file = open_adios_file(self.path)
        attrs = self._file.available_attributes()
        self.split_names: list[str] = [s for s in L.SPLIT_NAMES if L.ndata_attr(s) in attrs] + sorted(
            name[: -len("/ndata")] for name in attrs
            if name.endswith("/ndata") and name.count("/") == 1 and name[: -len("/ndata")] not in L.SPLIT_NAMES
        )
        if not self.split_names:
            self.close()
            raise StoreError(f"{self.path}: not a graph dataset (no <split>/ndata attributes)")
        self.heads: HeadRegistry = (
            HeadRegistry.from_json(self._file.read_attribute(L.HEADS_ATTR)) if L.HEADS_ATTR in attrs else HeadRegistry()
        )
        self.metadata: dict[str, str | int | float] = (
            json.loads(self._file.read_attribute(L.METADATA_ATTR)) if L.METADATA_ATTR in attrs else {}
        )
        self.normalisation: dict | None = (
            json.loads(self._file.read_attribute(L.NORMALISATION_ATTR)) if L.NORMALISATION_ATTR in attrs else None
        )
        self._ndata = {s: int(self._file.read_attribute(L.ndata_attr(s))) for s in self.split_names}
        self._splits: dict[str, _Split] = {}

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the file; the object cannot read afterwards."""
        if self._file is not None:
            close_reader(self._file, self.path)
            self._file = None

    def __enter__(self) -> "GraphStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={n}" for s, n in self._ndata.items())
        return f"GraphStore({str(self.path)!r}: {sizes}; heads {self.heads.names})"

    # -- queries ---------------------------------------------------------------------------------
    def num_graphs(self, split: str) -> int:
        """Number of graphs in ``split``."""
        self._check_split(split)
        return self._ndata[split]

    def keys(self, split: str) -> list[str]:
        """Attribute names stored for every graph of ``split``."""
        return list(self._split(split).fields)

    def sizes(self, split: str, key: str) -> np.ndarray:
        """Per-graph size of ``key`` along its variable dimension (e.g. edges per graph for edge_index)."""
        return self._field(split, key).counts.copy()

    def source_indices(self, split: str) -> np.ndarray | None:
        """Position of each graph of ``split`` in the list originally written (None if unknown)."""
        index = self._split(split).source_index
        return None if index is None else index.copy()

    def read_key(self, split: str, key: str) -> np.ndarray:
        """The whole concatenated array of ``key`` in ``split`` (e.g. all targets of a head)."""
        field = self._field(split, key)
        if 0 in field.shape:
            return np.zeros(field.shape, dtype=field.spec.dtype)
        field.variable.set_selection([[0] * len(field.shape), field.shape])
        out = np.empty(field.shape, dtype=field.spec.dtype)
        self._engine().get(field.variable, out, bindings.Mode.Sync)
        return out

    def get(self, split: str, index: int) -> Data:
        """Graph ``index`` of ``split``, reading only its slices of the file."""
        info = self._split(split)
        if not -info.ndata <= index < info.ndata:
            raise SampleIndexError(
                f"{self.path}: index {index} is out of range for {split!r} with {info.ndata} graphs"
            )
        index = int(index) % info.ndata
        engine = self._engine()
        values = {key: decode(_read_slice(engine, field, index), field.spec) for key, field in info.fields.items()}
        return Data(**values)

    # -- internals -------------------------------------------------------------------------------
    def _engine(self) -> adios2.Engine:
        if self._file is None:
            raise StoreError(f"{self.path}: the store is closed")
        return self._file.engine

    def _check_split(self, split: str) -> None:
        if split not in self._ndata:
            raise StoreError(f"{self.path}: unknown split {split!r}; this file has {self.split_names}")

    def _field(self, split: str, key: str) -> _Field:
        fields = self._split(split).fields
        if key not in fields:
            raise StoreError(f"{self.path}: split {split!r} has no key {key!r}; it has {list(fields)}")
        return fields[key]

    def _split(self, split: str) -> _Split:
        self._check_split(split)
        if split not in self._splits:
            self._splits[split] = self._load_split(split)
        return self._splits[split]

    def _load_split(self, split: str) -> _Split:
        f = self._file
        if f is None:
            raise StoreError(f"{self.path}: the store is closed")
        ndata = self._ndata[split]
        attrs = f.available_attributes()
        if ndata == 0:
            return _Split(split, 0, {}, np.zeros(0, dtype=np.int64))
        keys = f.read_attribute_string(L.keys_attr(split))
        kinds = json.loads(f.read_attribute(L.fields_attr(split))) if L.fields_attr(split) in attrs else {}
        fields: dict[str, _Field] = {}
        for key in keys:
            if key in HYDRAGNN_FIELDS:
                continue  # written for HydraGNN's loader; repeats our own fields
            variable = f.inquire_variable(L.data_var(split, key))
            if variable is None:
                raise StoreError(f"{self.path}: key {key!r} of {split!r} is listed but has no variable")
            dtype = np.dtype(adios2.type_adios_to_numpy(variable.type()))
            shape = [int(n) for n in variable.shape()]
            cat_dim = int(f.read_attribute(L.dim_attr(split, key)))
            kind = kinds.get(key, {"kind": "tensor", "torch_dtype": ""})
            spec = spec_from_file(key, kind["kind"], kind["torch_dtype"], dtype, cat_dim, len(shape))
            counts = np.asarray(f.read(L.count_var(split, key)), dtype=np.int64).reshape(-1)
            offsets = np.asarray(f.read(L.offset_var(split, key)), dtype=np.int64).reshape(-1)
            if len(counts) != ndata or len(offsets) != ndata:
                raise StoreError(f"{self.path}: {split}/{key} has {len(counts)} sizes for {ndata} graphs")
            fields[key] = _Field(spec, variable, shape, counts, offsets)
        source = L.source_index_var(split)
        source_index = f.read(source).astype(np.int64) if f.inquire_variable(source) is not None else None
        return _Split(split, ndata, fields, source_index)
