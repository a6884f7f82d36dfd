"""Write graphs to one ADIOS2 file in HydraGNN's layout, atomically.

Under MPI with the serial PyPI adios2 build (``adios2.is_built_with_mpi`` is False here), one rank
writes and the others wait, then every rank reads its own shard concurrently::

    if comm.rank == 0:
        write_dataset(path, graphs, heads)
    comm.Barrier()
    data = AdiosGraphDataset(path, "trainset", shard_indices(n, comm.rank, comm.size))

An MPI-enabled adios2 build could write in parallel (one block per rank, HydraGNN style); this
serial build cannot, so ``write_dataset`` takes no communicator.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import adios2
import numpy as np
import torch
from torch_geometric.data import Data
from tqdm import tqdm

from graph_builders.schema import HeadRegistry, HeadSpec, validate_graph
import graph_builders.store._layout as L
from graph_builders.store._atomic import check_output_path, remove_path, replace_path, temporary_path
from graph_builders.store._engine import close_reader, open_writer
from graph_builders.store._fields import FieldSpec, encode, field_spec
from graph_builders.store._hydragnn import with_hydragnn_fields
from graph_builders.store.derived import EDGE_LENGTH_RTOL, derive_field
from graph_builders.store.facts import FactsBuilder
from graph_builders.store.layouts import DEFAULT_LAYOUT, DERIVED_FROM_HYDRAGNN, EDGE_LENGTH, Layout, layout_named
from graph_builders.store.errors import InconsistentGraphsError, StoreError
from graph_builders.store.reader import open_adios_file

# Samples are concatenated and handed to ADIOS2 in blocks of about this many bytes.
_BLOCK_BYTES = 64 * 1024 * 1024


def write_dataset(
    path: str | Path,
    graphs: Sequence[Data],
    heads: HeadRegistry | Iterable[HeadSpec],
    splits: Mapping[str, Sequence[int]] | None = None,
    metadata: Mapping[str, str | int | float] | None = None,
    seed: int = 0,
    fractions: tuple[float, ...] = (0.8, 0.1, 0.1),
    normalisation: Mapping[str, object] | None = None,
    progress: bool = False,
    layout: str = DEFAULT_LAYOUT,
) -> Path:
    """Write ``graphs`` and their head registry to the ADIOS2 file ``path`` (a ``.bp`` directory).

    ``splits`` maps "trainset"/"valset"/"testset" (and optionally "calset") to indices into
    ``graphs``, stored in the order given; ``None`` splits at random with ``seed`` and ``fractions``
    (train, val, test[, calibration]), each split stored in random order (so any contiguous run of
    it is a random sample: readers shuffle runs, :mod:`graph_builders.store.facts`). Every graph
    is checked against the schema and the heads, and all graphs must have the same attributes.
    ``metadata`` and ``normalisation`` must be JSON-serialisable. Each sample also gets the fields
    HydraGNN's loader needs (:mod:`graph_builders.store._hydragnn`: ``y``/``y_loc``,
    ``edge_shifts``, ``atomic_numbers``), so the file trains in HydraGNN unchanged; ``layout``
    (:mod:`graph_builders.store.layouts`) says how compactly. The facts every trial needs are
    computed as the graphs are written and stored with them. The file appears under ``path`` only
    once complete (an existing dataset there is replaced); returns ``path``.
    """
    path = Path(path)
    heads = heads if isinstance(heads, HeadRegistry) else HeadRegistry.of(heads)
    form = layout_named(layout)
    graphs = list(graphs)
    if not graphs:
        raise StoreError(f"{path}: no graphs to write")
    split_indices = resolve_splits(len(graphs), splits, seed, fractions)
    _check_graphs(graphs, heads)
    ours = sorted(graphs[0].keys())
    graphs = [with_hydragnn_fields(g, heads, _label(graphs, i)) for i, g in enumerate(graphs)]
    specs = {key: field_spec(graphs[0], key, _label(graphs, 0)) for key in sorted(graphs[0].keys())}
    derived = _derived_fields(graphs, specs, ours, form)
    stored = {k: _stored_spec(s, form) for k, s in specs.items() if k not in derived}
    attributes = {
        L.FORMAT_ATTR: L.FORMAT_VERSION,
        L.HEADS_ATTR: heads.to_json(),
        L.METADATA_ATTR: _to_json(metadata or {}, "metadata"),
        L.LAYOUT_ATTR: form.name,
    }
    if normalisation is not None:
        attributes[L.NORMALISATION_ATTR] = _to_json(normalisation, "normalisation")
    check_output_path(path)
    tmp = temporary_path(path)
    remove_path(tmp)
    try:
        with open_writer(tmp) as stream:
            for name, value in attributes.items():
                stream.write_attribute(name, value)
            total = sum(map(len, split_indices.values()))
            stream.write_attribute(L.TOTAL_NDATA_ATTR, np.array(total, dtype=np.int64))
            facts = FactsBuilder(heads)
            bar = tqdm(total=total * len(stored), disable=not progress,
                       desc=f"writing {path.name}", unit="field")
            with bar:
                for split, indices in split_indices.items():
                    facts.open_split(split)
                    nbytes = _write_split(stream, split, graphs, indices, stored, derived, specs, bar)
                    for i, size in zip(indices.tolist(), nbytes.tolist()):
                        facts.add(split, graphs[i], int(size))
            stream.write_attribute(L.FACTS_ATTR, facts.finish().to_json())
        replace_path(tmp, path)
    except BaseException:
        remove_path(tmp)
        raise
    return path


def _stored_spec(spec: FieldSpec, form: Layout) -> FieldSpec:
    """How ``spec``'s field is stored in ``form`` (compact: int32 edge indices)."""
    if spec.key == "edge_index" and form.edge_index_dtype == "int32":
        return replace(spec, dtype=np.dtype(np.int32))
    return spec


def _derived_fields(graphs: Sequence[Data], specs: Mapping[str, FieldSpec], ours: Sequence[str],
                    form: Layout) -> dict[str, str]:
    """Our fields not stored because the reader derives them exactly (field -> what from)."""
    derived: dict[str, str] = {}
    for field, source in DERIVED_FROM_HYDRAGNN.items():
        if field in ours and source in specs and all(_derives(g, field) for g in graphs):
            derived[field] = source
    if form.edge_lengths_on_read and "edge_attr" in ours and all(_derives(g, "edge_attr") for g in graphs):
        derived["edge_attr"] = EDGE_LENGTH
    return derived


def _derives(graph: Data, field: str) -> bool:
    """Whether :func:`derive_field` gives back ``graph``'s ``field`` (exactly; edge lengths to
    float32 rounding)."""
    value = graph[field]
    try:
        again = derive_field(field, {k: graph[k] for k in graph.keys()})
    except (KeyError, ValueError, RuntimeError):
        return False
    if again.shape != value.shape or again.dtype != value.dtype:
        return False
    if field == "edge_attr":
        return bool(torch.allclose(again, value, rtol=EDGE_LENGTH_RTOL, atol=EDGE_LENGTH_RTOL))
    return bool(torch.equal(again, value))


def resolve_splits(
    num_graphs: int,
    splits: Mapping[str, Sequence[int]] | None,
    seed: int = 0,
    fractions: tuple[float, ...] = (0.8, 0.1, 0.1),
) -> dict[str, np.ndarray]:
    """Indices of each split ("trainset", "valset", "testset" and, with a fourth fraction,
    "calset"), given or drawn at random.

    Random splits: ``round(f * n)`` graphs for validation, test (and calibration), the rest for
    training; each split's indices in random order. Given splits are checked (known names, in
    range, disjoint).
    """
    if splits is None:
        if len(fractions) not in (3, 4) or min(fractions) < 0 or abs(sum(fractions) - 1.0) > 1e-6:
            raise StoreError("fractions must be three (train, val, test) or four (and calibration) non-negative "
                             f"numbers summing to 1, got {fractions}")
        perm = np.random.default_rng(seed).permutation(num_graphs)
        counts = [int(round(f * num_graphs)) for f in fractions[1:]]
        bounds = np.cumsum([num_graphs - sum(counts), *counts])
        parts = np.split(perm, bounds[:-1])  # each in random order (see write_dataset)
        return {name: part.astype(np.int64) for name, part in zip(L.SPLIT_NAMES, parts)}
    unknown = sorted(set(splits) - set(L.SPLIT_NAMES))
    if unknown:
        raise StoreError(f"unknown split names {unknown}; splits are named {list(L.SPLIT_NAMES)}")
    seen: dict[int, str] = {}
    resolved: dict[str, np.ndarray] = {}
    for name in L.SPLIT_NAMES:
        if name == L.CALIBRATION_SPLIT and name not in splits:
            continue  # optional: written only when given
        indices = np.asarray(list(splits.get(name, ())), dtype=np.int64)
        for i in indices.tolist():
            if not 0 <= i < num_graphs:
                raise StoreError(f"split {name!r}: index {i} is outside 0..{num_graphs - 1}")
            if i in seen:
                raise StoreError(f"graph {i} is in both {seen[i]!r} and {name!r}")
            seen[i] = name
        resolved[name] = indices
    return resolved


def update_normalisation(path: str | Path, normalisation: Mapping[str, object] | None) -> None:
    """Store (or with ``None`` remove) normalisation statistics in an existing dataset.

    The file is copied with the new attribute to a temporary path and moved into place, so readers
    never see a half-updated file. Costs one full read and write of the file.
    """
    path = Path(path)
    reader = open_adios_file(path)
    tmp = temporary_path(path)
    remove_path(tmp)
    try:
        try:
            _copy_with_normalisation(reader, tmp, normalisation)
        finally:
            close_reader(reader, path)
        replace_path(tmp, path)
    except BaseException:
        remove_path(tmp)
        raise


def _copy_with_normalisation(reader: adios2.FileReader, tmp: Path,
                             normalisation: Mapping[str, object] | None) -> None:
    """Write every attribute and variable of ``reader`` to ``tmp``, the normalisation replaced."""
    with open_writer(tmp) as stream:
        for name in reader.available_attributes():
            if name == L.NORMALISATION_ATTR:
                continue
            attr = reader.inquire_attribute(name)
            value = reader.read_attribute(name)
            stream.write_attribute(name, value if attr.single_value() or attr.type() == "string"
                                   else np.asarray(value))
        if normalisation is not None:
            stream.write_attribute(L.NORMALISATION_ATTR, _to_json(normalisation, "normalisation"))
        for name, info in reader.available_variables().items():
            shape = [int(n) for n in info["Shape"].split(",")] if info["Shape"] else []
            array = reader.read(name) if 0 not in shape else np.zeros(shape, dtype=_dtype_of(info))
            stream.write(name, np.ascontiguousarray(array), shape, [0] * len(shape), shape)


def _dtype_of(info: Mapping[str, str]) -> np.dtype:
    return np.dtype(adios2.type_adios_to_numpy(info["Type"]))


def _label(graphs: Sequence[Data], index: int) -> str:
    name = getattr(graphs[index], "name", None)
    return f"graph {index}" + (f" ({name!r})" if isinstance(name, str) else "")


def _check_graphs(graphs: Sequence[Data], heads: HeadRegistry) -> None:
    """Validate every graph (all graphs must have the keys of the first)."""
    first = graphs[0]
    if not isinstance(first, Data):
        raise StoreError(f"graph 0 is a {type(first).__name__}, not a torch_geometric Data")
    keys = sorted(first.keys())
    for key in keys:
        field_spec(first, key, _label(graphs, 0))  # a field the store cannot hold, named early
    key_set = set(keys)
    for index, graph in enumerate(graphs):
        label = _label(graphs, index)
        if not isinstance(graph, Data):
            raise StoreError(f"{label} is a {type(graph).__name__}, not a torch_geometric Data")
        validate_graph(graph, heads, label)
        other = set(graph.keys())
        if other != key_set:
            raise InconsistentGraphsError(
                f"{label} has different attributes from graph 0: missing {sorted(key_set - other)}, "
                f"extra {sorted(other - key_set)}"
            )


def _write_split(
    stream: adios2.Stream,
    split: str,
    graphs: Sequence[Data],
    indices: np.ndarray,
    stored: Mapping[str, FieldSpec],
    derived: Mapping[str, str],
    specs: Mapping[str, FieldSpec],
    bar: tqdm,
) -> np.ndarray:
    """Write one split's stored fields; returns each graph's stored bytes."""
    stream.write_attribute(L.ndata_attr(split), np.array(len(indices), dtype=np.int64))
    nbytes = np.zeros(len(indices), dtype=np.int64)
    if len(indices) == 0:
        return nbytes
    stream.write_attribute(L.keys_attr(split), list(stored))
    described = {k: s.to_json() for k, s in stored.items()}
    described.update({k: {**specs[k].to_json(), "from": source} for k, source in derived.items()})
    stream.write_attribute(L.fields_attr(split), json.dumps(described))
    stream.write(L.source_index_var(split), np.ascontiguousarray(indices, dtype=np.int64))
    for key, spec in stored.items():
        arrays = [encode(graphs[i][key], specs[key], _label(graphs, i)).astype(spec.dtype, copy=False)
                  for i in indices.tolist()]
        counts = np.fromiter((a.shape[spec.cat_dim] for a in arrays), dtype=np.int64, count=len(arrays))
        nbytes += np.fromiter((a.nbytes for a in arrays), dtype=np.int64, count=len(arrays))
        offsets = np.zeros_like(counts)
        np.cumsum(counts[:-1], out=offsets[1:])
        _write_concatenated(stream, L.data_var(split, key), arrays, counts, spec.cat_dim)
        stream.write(L.count_var(split, key), counts)
        stream.write(L.offset_var(split, key), offsets)
        stream.write_attribute(L.dim_attr(split, key), np.array(spec.cat_dim, dtype=np.int64))
        stream.engine.perform_data_write()
        bar.update(len(indices))
    return nbytes


def _write_concatenated(
    stream: adios2.Stream, name: str, arrays: list[np.ndarray], counts: np.ndarray, axis: int
) -> None:
    """Put the arrays concatenated along ``axis`` as one global variable, in blocks of ~64 MB."""
    shape = list(arrays[0].shape)
    shape[axis] = int(counts.sum())
    if shape[axis] == 0:
        stream.write(name, np.zeros(shape, dtype=arrays[0].dtype), shape, [0] * len(shape), shape)
        return
    start = 0
    for block in _blocks(arrays, _BLOCK_BYTES):
        data = np.ascontiguousarray(np.concatenate(block, axis=axis))
        if data.shape[axis] == 0:
            continue
        offset = [0] * len(shape)
        offset[axis] = start
        stream.write(name, data, shape, offset, list(data.shape))
        start += data.shape[axis]


def _blocks(arrays: list[np.ndarray], max_bytes: int) -> Iterator[list[np.ndarray]]:
    """Consecutive groups of ``arrays`` of about ``max_bytes`` each."""
    block: list[np.ndarray] = []
    size = 0
    for array in arrays:
        block.append(array)
        size += array.nbytes
        if size >= max_bytes:
            yield block
            block, size = [], 0
    if block:
        yield block


def _to_json(value: Mapping[str, object], what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} must be JSON-serialisable without NaN/inf: {exc}") from exc
