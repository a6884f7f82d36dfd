"""Random access to a dataset file written by :func:`graph_builders.store.write_dataset`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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
from graph_builders.store.derived import derive_block
from graph_builders.store.facts import DatasetFacts
from graph_builders.store.layouts import DEFAULT_LAYOUT
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


#: a split with at most this many graphs keeps its per-graph sizes in memory once read (8 bytes per
#: graph and field); a larger one reads the sizes of each range it reads (bounded memory)
SIZES_IN_MEMORY = 1_000_000


@dataclass
class _Field:
    """One stored key of a split: how to decode it, and where each sample lies in its variable."""

    spec: FieldSpec
    variable: adios2.Variable | None  # None: derived (``derived_from`` says from what)
    shape: list[int]
    count_name: str = ""
    offset_name: str = ""
    derived_from: str | None = None
    _counts: np.ndarray | None = None
    _offsets: np.ndarray | None = None


@dataclass
class _Split:
    name: str
    ndata: int
    fields: dict[str, _Field]  # stored (ours and HydraGNN's) and derived
    source_index: np.ndarray | None
    visible: list[str] = field(default_factory=list)  # ours: what a graph read from the file holds


@dataclass
class GraphBlock:
    """Graphs ``[start, stop)`` of a split as the file holds them: each key's values of all of them
    concatenated along its axis (``arrays``), with each graph's size along it (``counts``)."""

    start: int
    stop: int
    arrays: dict[str, np.ndarray]
    counts: dict[str, np.ndarray]
    specs: dict[str, FieldSpec]
    _offsets: dict[str, np.ndarray] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return self.stop - self.start

    def slice(self, start: int, stop: int) -> "GraphBlock":
        """Graphs ``[start, stop)`` of this block (positions in it) as a block of views, no copy."""
        arrays, counts = {}, {}
        for key, array in self.arrays.items():
            first = self._firsts(key)
            axis = self.specs[key].cat_dim
            index = [slice(None)] * array.ndim
            index[axis] = slice(int(first[start]), int(first[stop]))
            arrays[key], counts[key] = array[tuple(index)], self.counts[key][start:stop]
        return GraphBlock(self.start + start, self.start + stop, arrays, counts, self.specs)

    @classmethod
    def concat(cls, blocks: "list[GraphBlock]") -> "GraphBlock":
        """One block holding the graphs of ``blocks`` in order (copied; the same keys in each);
        it starts where the first one does."""
        if len(blocks) == 1:
            return blocks[0]
        specs = blocks[0].specs
        return cls(blocks[0].start, blocks[0].start + sum(map(len, blocks)),
                   {key: np.concatenate([b.arrays[key] for b in blocks], axis=specs[key].cat_dim) for key in specs},
                   {key: np.concatenate([b.counts[key] for b in blocks]) for key in specs}, specs)

    def _firsts(self, key: str) -> np.ndarray:
        """Where each graph's rows of ``key`` start in the block (and the end), computed once."""
        if self._offsets is None:
            self._offsets = {}
        if key not in self._offsets:
            self._offsets[key] = np.concatenate(([0], np.cumsum(self.counts[key])))
        return self._offsets[key]

    def tensors(self) -> dict[str, "torch.Tensor"]:
        """Each tensor key's values of all the block's graphs, concatenated (as a batch holds them)."""
        return {key: decode(array, self.specs[key]) for key, array in self.arrays.items()
                if self.specs[key].kind == "tensor"}

    def graphs(self) -> list[Data]:
        """One ``Data`` per graph, as :meth:`GraphStore.get` returns them."""
        parts = {key: np.split(array, np.cumsum(self.counts[key])[:-1], axis=self.specs[key].cat_dim)
                 for key, array in self.arrays.items()}
        return [Data(**{key: decode(parts[key][i], self.specs[key]) for key in parts}) for i in range(len(self))]


def _read_rows(engine: adios2.Engine, field: _Field, first: int, count: int) -> np.ndarray:
    """Rows ``[first, first + count)`` of ``field`` along its axis: one contiguous read per leading
    index, deferred (the array is filled by the engine's next ``perform_gets``).

    Along axis 0 a range is one contiguous byte range. Along a later axis (edge_index: axis 1) the
    selection of the whole [2, E] block would make ADIOS2 read everything between the first and the
    last byte, so each leading row is read on its own, which touches only the range's bytes.
    """
    axis = field.spec.cat_dim
    shape = list(field.shape)
    shape[axis] = count
    out = np.empty(shape, dtype=field.spec.dtype)
    if out.size == 0:
        return out
    start = [0] * len(shape)
    start[axis] = first
    if axis == 0:
        field.variable.set_selection([start, shape])
        engine.get(field.variable, out, bindings.Mode.Deferred)
        return out
    row_count = [1] * axis + shape[axis:]
    for lead in np.ndindex(*shape[:axis]):
        field.variable.set_selection([list(lead) + start[axis:], row_count])
        engine.get(field.variable, out[lead], bindings.Mode.Deferred)
    return out


def is_project_dataset(path: str | Path) -> bool:
    """True when ``path`` is a dataset this project wrote (it carries the store's format attribute,
    or it is a sharded dataset: a directory whose shard index has the store's format): the only
    thing ``write_dataset`` and ``build-graphs`` replace."""
    path = Path(path)
    if (path / L.SHARD_INDEX_NAME).is_file() and not (path / L.BP_INDEX_FILE).is_file():
        return _is_shard_index(path / L.SHARD_INDEX_NAME)
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


def _is_shard_index(path: Path) -> bool:
    try:
        return json.loads(path.read_text()).get("format") == L.SHARD_INDEX_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


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
        self._attrs = set(attrs)
        self._plans: dict[tuple, tuple[list[str], list[str]]] = {}
        self._facts: DatasetFacts | None = None
        self.layout: str = str(self._file.read_attribute(L.LAYOUT_ATTR)) if L.LAYOUT_ATTR in attrs else DEFAULT_LAYOUT

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
        """Attribute names of every graph of ``split`` (stored or derived; not HydraGNN's own)."""
        return list(self._split(split).visible)

    def sizes(self, split: str, key: str) -> np.ndarray:
        """Per-graph size of ``key`` along its variable dimension (e.g. edges per graph for edge_index)."""
        return self._counts(split, self._field(split, key), 0, self.num_graphs(split)).copy()

    def graph_sizes(self, split: str, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes and edges of each graph ``[start, stop)`` of ``split`` (reads only sizes)."""
        return (self._counts(split, self._field(split, "pos"), start, stop),
                self._counts(split, self._field(split, "edge_index"), start, stop))

    def stored_bytes(self, split: str) -> int:
        """Bytes of every variable of ``split`` (ours and HydraGNN's; metadata only)."""
        fields = self._split(split).fields.values()
        return sum(int(np.prod(f.shape)) * f.spec.dtype.itemsize for f in fields if f.variable is not None)

    def stored_keys(self, split: str, keys: list[str]) -> list[str]:
        """The stored variables reading ``keys`` touches (derived keys' sources instead of them)."""
        info = self._split(split)
        return [k for k in self._reading_plan(split, keys)[1] if info.fields[k].variable is not None]

    def total_rows(self, split: str, key: str) -> int:
        """The length of ``key``'s variable along its axis: all graphs' rows (metadata only)."""
        field = self._field(split, key)
        return int(field.shape[field.spec.cat_dim]) if field.variable is not None else \
            self.total_rows(split, _first_source(field.derived_from))

    @property
    def facts(self) -> DatasetFacts | None:
        """The facts the writer stored (:mod:`graph_builders.store.facts`); None for a file written
        without them (:func:`graph_builders.store.facts_cache.dataset_facts` computes them once)."""
        if self._facts is None and self._file is not None and L.FACTS_ATTR in self._attrs:
            try:
                self._facts = DatasetFacts.from_json(self._file.read_attribute(L.FACTS_ATTR))
            except (ValueError, KeyError, TypeError):  # another version's: computed again (facts_cache)
                return None
        return self._facts

    def source_indices(self, split: str) -> np.ndarray | None:
        """Position of each graph of ``split`` in the list originally written (None if unknown)."""
        index = self._split(split).source_index
        return None if index is None else index.copy()

    def read_key(self, split: str, key: str) -> np.ndarray:
        """The whole concatenated array of ``key`` in ``split`` (e.g. all targets of a head)."""
        return self.read_block(split, 0, self.num_graphs(split), [key]).arrays[key]

    def get(self, split: str, index: int) -> Data:
        """Graph ``index`` of ``split``, reading only its slices of the file."""
        info = self._split(split)
        if not -info.ndata <= index < info.ndata:
            raise SampleIndexError(
                f"{self.path}: index {index} is out of range for {split!r} with {info.ndata} graphs"
            )
        index = int(index) % info.ndata
        return self.read_block(split, index, index + 1).graphs()[0]

    def read_range(self, split: str, start: int, stop: int, keys: list[str] | None = None) -> list[Data]:
        """Graphs ``[start, stop)`` of ``split`` (only ``keys``, default all): one read per key."""
        return self.read_block(split, start, stop, keys).graphs()

    def read_block(self, split: str, start: int, stop: int, keys: list[str] | None = None) -> GraphBlock:
        """Graphs ``[start, stop)`` of ``split`` as a :class:`GraphBlock` (only ``keys``, default
        all; fields derived from others, :mod:`graph_builders.store.derived`, are computed): one
        read of each key's rows (two for ``edge_index``), whatever the range's length."""
        info = self._split(split)
        if not 0 <= start <= stop <= info.ndata:
            raise SampleIndexError(f"{self.path}: range [{start}, {stop}) is not inside {split!r} with "
                                   f"{info.ndata} graphs")
        wanted, needed = self._reading_plan(split, keys)
        engine = self._engine()
        arrays: dict[str, np.ndarray] = {}
        counts: dict[str, np.ndarray] = {}
        for key in needed:
            field = info.fields[key]
            counts[key] = self._counts(split, field, start, stop)
            if field.derived_from is None:
                first = int(self._offsets(split, field, start, stop)[0]) if stop > start else 0
                arrays[key] = _read_rows(engine, field, first, int(counts[key].sum()))
        engine.perform_gets()  # every field's rows in one go
        nodes = counts.get("pos", np.zeros(stop - start, dtype=np.int64))
        edges = counts.get("edge_index", np.zeros(stop - start, dtype=np.int64))
        for key in needed:
            field = info.fields[key]
            if field.derived_from is not None:
                arrays[key] = derive_block(key, arrays, nodes, edges, field.spec.dtype)
        return GraphBlock(start, stop, {k: arrays[k] for k in wanted}, {k: counts[k] for k in wanted},
                          {k: info.fields[k].spec for k in wanted})

    # -- internals -------------------------------------------------------------------------------
    def _reading_plan(self, split: str, keys: list[str] | None) -> tuple[list[str], list[str]]:
        """The keys asked for, and every key to read or derive for them (stored ones first);
        worked out once per split and key list."""
        cache_key = (split, None if keys is None else tuple(keys))
        plan = self._plans.get(cache_key)
        if plan is None:
            info = self._split(split)
            wanted = list(info.visible) if keys is None else list(keys)
            for key in wanted:
                self._field(split, key)
            needed = set(wanted)
            for key in wanted:
                needed |= set(_sources(info.fields[key]))
            plan = self._plans[cache_key] = (wanted, sorted(needed, key=lambda k: info.fields[k].derived_from is not None))
        return plan

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
        attrs = self._attrs
        if ndata == 0:
            return _Split(split, 0, {}, np.zeros(0, dtype=np.int64), [])
        keys = f.read_attribute_string(L.keys_attr(split))
        kinds = json.loads(f.read_attribute(L.fields_attr(split))) if L.fields_attr(split) in attrs else {}
        fields: dict[str, _Field] = {}
        for key in keys:
            variable = f.inquire_variable(L.data_var(split, key))
            if variable is None:
                raise StoreError(f"{self.path}: key {key!r} of {split!r} is listed but has no variable")
            dtype = np.dtype(adios2.type_adios_to_numpy(variable.type()))
            shape = [int(n) for n in variable.shape()]
            cat_dim = int(f.read_attribute(L.dim_attr(split, key)))
            kind = kinds.get(key, {"kind": "tensor", "torch_dtype": ""})
            spec = spec_from_file(key, kind["kind"], kind["torch_dtype"], dtype, cat_dim, len(shape))
            fields[key] = _Field(spec, variable, shape, L.count_var(split, key), L.offset_var(split, key))
        for key, kind in kinds.items():
            if "from" in kind and key not in fields:  # derived on read (graph_builders.store.derived)
                spec = spec_from_file(key, kind["kind"], kind["torch_dtype"], _numpy_dtype(kind["torch_dtype"]), 0, 1)
                origin = fields[_first_source(kind["from"])]
                fields[key] = _Field(spec, None, [], origin.count_name, origin.offset_name, kind["from"])
        visible = [k for k in fields if k not in HYDRAGNN_FIELDS]  # HydraGNN's repeat our own fields
        source = L.source_index_var(split)
        source_index = f.read(source).astype(np.int64) if f.inquire_variable(source) is not None else None
        return _Split(split, ndata, fields, source_index, visible)

    def _counts(self, split: str, field: _Field, start: int, stop: int) -> np.ndarray:
        """Each graph's size along ``field``'s axis, graphs ``[start, stop)``."""
        return self._sizes(split, field, "_counts", field.count_name, start, stop)

    def _offsets(self, split: str, field: _Field, start: int, stop: int) -> np.ndarray:
        return self._sizes(split, field, "_offsets", field.offset_name, start, stop)

    def _sizes(self, split: str, field: _Field, slot: str, name: str, start: int, stop: int) -> np.ndarray:
        """Counts or offsets of graphs ``[start, stop)``: from memory for a split of at most
        :data:`SIZES_IN_MEMORY` graphs (read whole once), else read for the range."""
        ndata = self._ndata[split]
        cached = getattr(field, slot)
        if cached is None and ndata <= SIZES_IN_MEMORY:
            cached = np.asarray(self._file.read(name), dtype=np.int64).reshape(-1)
            if len(cached) != ndata:
                raise StoreError(f"{self.path}: {name} has {len(cached)} sizes for {ndata} graphs")
            setattr(field, slot, cached)
        if cached is not None:
            return cached[start:stop]
        if stop == start:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(self._file.read(name, [start], [stop - start]), dtype=np.int64).reshape(-1)


def _first_source(derived_from: str) -> str:
    """The stored field whose counts a derived field shares (edge lengths: edge_index's)."""
    return {"edge_length": "edge_index"}.get(derived_from, derived_from)


def _sources(field: _Field) -> tuple[str, ...]:
    """The keys a derived field is computed from (see :mod:`graph_builders.store.derived`)."""
    if field.derived_from is None:
        return ()
    if field.derived_from == "atomic_numbers":
        return ("atomic_numbers",)
    if field.derived_from == "edge_shifts":
        return ("edge_shifts", "cell", "edge_index")
    return ("edge_index", "pos", "edge_shifts")  # edge lengths


def _numpy_dtype(torch_dtype: str) -> np.dtype:
    import torch

    return torch.empty(0, dtype=getattr(torch, torch_dtype)).numpy().dtype if torch_dtype != "bool" else np.dtype(np.int64)


def _variable_dtype(f: adios2.FileReader, split: str, key: str) -> np.dtype:
    return np.dtype(adios2.type_adios_to_numpy(f.inquire_variable(L.data_var(split, key)).type()))
