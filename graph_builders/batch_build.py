"""Build graphs from many input files, optionally in worker processes; bad files are collected, not fatal.

Inputs per scale (a directory stands for every non-hidden file under it):

* ``atomic``: any structure file :func:`graph_builders.readers.read_structures` reads (several
  structures per file allowed). Every label stored with the structures becomes a head
  (:mod:`graph_builders.labels`: energy (graph, eV: the total), free_energy, forces (node, eV/Å),
  stress (graph, Voigt, eV/Å^3), other calculator results, numbers in ``info``, per-atom arrays
  other than inputs such as momenta or a CIF's spacegroup_kinds); ``heads`` chooses among them and
  ``units`` gives the unit of labels that carry none. What is left out is named in the notes;
  nothing is computed.
* ``mesoscale``: ``.npz`` files with either ``seeds`` [G, 3] + ``box`` ([3] or scalar) and optional
  ``orientations`` ([G, 4] quaternions or [G, 3] Euler angles), ``phases`` [G], ``periodic``
  (scalar bool, default True) for a Voronoi tessellation, or ``labels`` (3-D int voxel map) with
  optional ``orientations``/``phases`` indexed by label, ``voxel_size``, ``periodic`` (default
  False). Arrays ``y_<head>`` become targets (a scalar or a 1-D array not of length G: graph head;
  length G: node head).
* ``continuum``: any mesh file meshio reads; ``features`` / ``targets`` name point-data arrays that
  form ``x`` / become node heads.

Every structure that builds is stored. A file that cannot be read is listed with the reason as
``FILE``; a structure of a multi-structure file that cannot become a graph as ``FILE[INDEX]``, and
the other structures of that file are kept (as ``predict`` does).

Progress: one bar counts the files; at the atomic scale a second counts the structures of the files
read so far, updated every :data:`PROGRESS_BATCH` structures (from the worker processes too).
"""

from __future__ import annotations

import math
import multiprocessing
import pickle
import queue
import zipfile
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch_geometric.data import Data
from tqdm import tqdm

from graph_builders.schema import TARGET_PREFIX, HeadRegistry, HeadSpec, validate_graph

SCALES: tuple[str, ...] = ("atomic", "mesoscale", "continuum")
MESOSCALE_ARRAYS = ("seeds", "box", "orientations", "phases", "periodic", "labels", "voxel_size")
#: structures of a multi-structure file between two progress reports
PROGRESS_BATCH = 50

#: a progress report: ("read", structures in a file just read) or ("built", structures done)
Report = Callable[[str, int], None]


class InputFileError(ValueError):
    """An input file cannot be turned into graphs; the message names the file and the problem."""


@dataclass(frozen=True)
class BatchBuildOptions:
    """How to build graphs at one scale."""

    scale: str
    cutoff: float = 5.0
    max_neighbours: int | None = None
    features: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    allow_isolated: bool = False  # atomic: keep atoms without a neighbour within the cutoff
    units: tuple[tuple[str, str], ...] = ()  # atomic: (label, unit) for labels stored without one
    heads: tuple[str, ...] | None = None  # atomic: the labels that become heads (None: every label)

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"unknown scale {self.scale!r}; choose one of {list(SCALES)}")


@dataclass(frozen=True)
class FileFailure:
    """An input file (``FILE``) or one structure of it (``FILE[INDEX]``) that gave no graph, and why."""

    file: str
    reason: str


@dataclass
class FileOutcome:
    """What one input file gave: its good graphs and its failures (the whole file, or structures)."""

    graphs: list[Data] = field(default_factory=list)
    failures: list[FileFailure] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)  # atomic: label -> unit
    sources: dict[str, str] = field(default_factory=dict)  # atomic: label -> where ASE kept it
    left_out: Counter = field(default_factory=Counter)  # atomic: (key, why) -> structures
    available: set[str] = field(default_factory=set)  # atomic: every label a --heads choice can name


@dataclass
class BatchResult:
    """Graphs of all good structures (in input order), their heads, the failures and remarks."""

    graphs: list[Data]
    heads: HeadRegistry
    num_files: int
    failures: list[FileFailure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files_with_graphs: int = 0  # input files that gave at least one stored graph
    available: set[str] = field(default_factory=set)  # atomic: every label a --heads choice can name


def expand_inputs(inputs: Sequence[str | Path]) -> list[Path]:
    """Files named directly plus every non-hidden file under the directories named, sorted per directory."""
    files: list[Path] = []
    for item in map(Path, inputs):
        if item.is_dir():
            files.extend(sorted(p for p in item.rglob("*")
                                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(item).parts)))
        else:
            files.append(item)
    return files


def build_file(path: Path, options: BatchBuildOptions, report: Report | None = None) -> FileOutcome:
    """The graphs of one input file and its failures; never raises for a bad file or structure.
    ``report`` hears of the structures of an atomic file (see :data:`Report`)."""
    try:
        if not path.is_file():
            raise InputFileError(f"{path}: no such file")
        if options.scale == "atomic":
            return _atomic_graphs(path, options, report)
        graph = _mesoscale_graph(path) if options.scale == "mesoscale" else _continuum_graph(path, options)
        validate_graph(graph, None, graph.name)
    except Exception as exc:  # noqa: BLE001 - any failure of one file is recorded against that file
        return FileOutcome(failures=[FileFailure(str(path), _reason(exc, path))])
    return FileOutcome([graph])


def build_graphs(files: Sequence[Path], options: BatchBuildOptions, workers: int = 1, progress: bool = True) -> BatchResult:
    """Build every file (in ``workers`` processes when > 1), keep the good ones, list the bad ones;
    ``progress`` shows the bars of the module docstring."""
    bars = _Bars(len(files), options.scale, progress)
    with bars:
        if workers <= 1:
            outcomes = {}
            for index, path in enumerate(files):
                outcomes[index] = build_file(path, options, bars.report if bars.structures_shown else None)
                bars.files.update(1)
        else:
            outcomes = _build_in_processes(files, options, workers, bars)
    return _assemble(files, [outcomes[i] for i in range(len(files))])


class _Bars:
    """The progress bars of a build: files, and at the atomic scale the structures read so far."""

    def __init__(self, num_files: int, scale: str, enabled: bool) -> None:
        self.structures_shown = enabled and scale == "atomic"
        self.files = tqdm(total=num_files, disable=not enabled, desc=f"building {scale} graphs", unit="file")
        self.structures: tqdm | None = None  # from the first file read

    def report(self, kind: str, count: int) -> None:
        """A :data:`Report`: a file's structures were read (more to do), or some were built."""
        if self.structures is None:
            self.structures = tqdm(total=0, desc="structures", unit="structure")
        if kind == "read":
            self.structures.total += count
            self.structures.refresh()
        else:
            self.structures.update(count)

    def __enter__(self) -> "_Bars":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.structures is not None:
            self.structures.close()
        self.files.close()


def _build_in_processes(files: Sequence[Path], options: BatchBuildOptions, workers: int,
                        bars: _Bars) -> dict[int, FileOutcome]:
    """:func:`build_file` of every file in ``workers`` processes, chunks of files each; the workers'
    structure reports come back through a queue that this process drains while it waits."""
    chunk = max(1, min(32, math.ceil(len(files) / (4 * workers))))
    tasks = [list(range(start, min(start + chunk, len(files)))) for start in range(0, len(files), chunk)]
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    reports = context.Queue() if bars.structures_shown else None
    outcomes: dict[int, FileOutcome] = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker,
                             initargs=(reports,)) as pool:
        pending = {pool.submit(_build_chunk, [(i, files[i]) for i in task], options) for task in tasks}
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            _drain(reports, bars)
            for future in done:
                finished = pickle.loads(future.result())
                outcomes.update(finished)
                bars.files.update(len(finished))
    _drain(reports, bars)
    return outcomes


def _drain(reports, bars: _Bars) -> None:
    """Pass the reports waiting in the queue (None: no queue) on to the bars."""
    while reports is not None:
        try:
            kind, count = reports.get_nowait()
        except queue.Empty:
            return
        bars.report(kind, count)


ERRORS_HEADER = "file\treason"


def is_errors_file(path: Path) -> bool:
    """True for a list :func:`write_errors` wrote (its header line)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().rstrip("\n") == ERRORS_HEADER
    except (OSError, UnicodeDecodeError):
        return False


def write_errors(path: Path, failures: Sequence[FileFailure]) -> None:
    """Write ``file<TAB>reason`` lines (with a header) to ``path``, via a temporary file."""
    tmp = path.with_name(f"{path.name}.tmp")
    lines = [ERRORS_HEADER] + [f"{_clean(f.file)}\t{_clean(f.reason)}" for f in failures]
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


# -------------------------------------------------------------------------------------- internals
_worker_reports = None  # in a worker process: the queue its progress reports go to (None: no bars)


def _init_worker(reports=None) -> None:
    global _worker_reports
    torch.set_num_threads(1)
    _worker_reports = reports


def _queue_report(kind: str, count: int) -> None:
    _worker_reports.put((kind, count))


def _build_chunk(items: list[tuple[int, Path]], options: BatchBuildOptions) -> bytes:
    """The outcomes of ``items`` by index, pickled here: returned as they are, their tensors would
    travel as shared memory, one open file per tensor, and a file of thousands of structures ran
    out of file descriptors ("unable to open shared memory object ... Too many open files")."""
    report = _queue_report if _worker_reports is not None else None
    return pickle.dumps({index: build_file(path, options, report) for index, path in items})


def _reason(exc: Exception, path: Path) -> str:
    """The error message without the file name (the errors file has its own column for that)."""
    text = str(exc).strip() or type(exc).__name__
    text = text.removeprefix(f"{path}: ")
    return text if isinstance(exc, InputFileError) else f"{type(exc).__name__}: {text}"


def _indexed(name: str) -> str:
    """``FILE:INDEX`` (an atomic graph's name) -> ``FILE[INDEX]`` (how failures name structures)."""
    stem, _, index = name.rpartition(":")
    return f"{stem}[{index}]" if stem and index.isdigit() else name


def _clean(text: str) -> str:
    return " ".join(text.split())


def _atomic_graphs(path: Path, options: BatchBuildOptions, report: Report | None = None) -> FileOutcome:
    """Every structure of the file that builds; the others as ``FILE[INDEX]`` failures. ``report``
    hears how many structures the file holds, then every :data:`PROGRESS_BATCH` built."""
    from graph_builders.atomic import AtomicGraphBuilder
    from graph_builders.readers import read_structures

    structures = read_structures(path)
    if not structures:
        raise InputFileError(f"{path}: no structures in the file")
    if report is not None:
        report("read", len(structures))
    build = AtomicGraphBuilder(options.cutoff, options.max_neighbours, options.allow_isolated)
    outcome = FileOutcome()
    unreported = 0
    for index, atoms in enumerate(structures):
        _atomic_graph(path, index, len(structures), atoms, build, options, outcome)
        unreported += 1
        if report is not None and (unreported == PROGRESS_BATCH or index == len(structures) - 1):
            report("built", unreported)
            unreported = 0
    return outcome


def _atomic_graph(path: Path, index: int, count: int, atoms, build, options: BatchBuildOptions,
                  outcome: FileOutcome) -> None:
    """Structure ``index`` of the ``count`` in ``path`` into ``outcome``: its graph and labels, or
    its failure (``FILE[INDEX]``, or ``FILE`` for a file of one structure)."""
    from graph_builders.labels import structure_labels
    from graph_builders.readers import InvalidStructureError

    name = f"{path}:{index}"
    try:
        labels = structure_labels(atoms, dict(options.units), options.heads)
        graph = build(atoms, targets=labels.targets or None, name=name)
        validate_graph(graph, None, name)
    except ValueError as exc:
        where = f"{path}[{index}]" if count > 1 else str(path)
        text = str(exc).strip().removeprefix(f"{name}: ")
        if not isinstance(exc, InvalidStructureError):
            text = f"{type(exc).__name__}: {text}"
        outcome.failures.append(FileFailure(where, text))
        return
    outcome.graphs.append(graph)
    outcome.units.update(labels.units)
    outcome.sources.update(labels.sources)
    outcome.left_out.update(labels.left_out.items())
    outcome.available.update(labels.available)


def _mesoscale_graph(path: Path) -> Data:
    from graph_builders.mesoscale import grains_to_graph, voxels_to_graph

    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InputFileError(f"{path}: not a readable .npz file ({exc})") from exc
    targets = {key[len(TARGET_PREFIX):]: value for key, value in arrays.items() if key.startswith(TARGET_PREFIX)}
    unknown = sorted(k for k in arrays if k not in MESOSCALE_ARRAYS and not k.startswith(TARGET_PREFIX))
    if unknown:
        raise InputFileError(f"{path}: unknown arrays {unknown}; expected {list(MESOSCALE_ARRAYS)} or y_<head>")
    name = str(path)
    if "labels" in arrays:
        return voxels_to_graph(arrays["labels"], orientations=arrays.get("orientations"), phases=arrays.get("phases"),
                               voxel_size=arrays.get("voxel_size", 1.0), periodic=bool(arrays.get("periodic", False)),
                               targets=targets, name=name)
    missing = [k for k in ("seeds", "box") if k not in arrays]
    if missing:
        raise InputFileError(f"{path}: missing arrays {missing} (or give a voxel map as 'labels')")
    return grains_to_graph(arrays["seeds"], arrays["box"], orientations=arrays.get("orientations"),
                           phases=arrays.get("phases"), periodic=bool(arrays.get("periodic", True)),
                           targets=targets, name=name)


def _continuum_graph(path: Path, options: BatchBuildOptions) -> Data:
    from graph_builders.continuum import mesh_to_graph

    return mesh_to_graph(path, features=list(options.features) or None,
                         targets={name: name for name in options.targets} or None, name=str(path))


def _signature(graph: Data) -> tuple:
    """Attributes other than targets, with dtype and the shape apart from the concatenation axis."""
    items = []
    for key in sorted(graph.keys()):
        if key.startswith(TARGET_PREFIX):
            continue
        value = graph[key]
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            axis = graph.__cat_dim__(key, value) % value.dim()
            items.append((key, str(value.dtype), tuple(n for a, n in enumerate(value.shape) if a != axis)))
        else:
            items.append((key, type(value).__name__))
    return tuple(items)


def _head_shape(graph: Data, key: str) -> tuple[str, int]:
    value = graph[key]
    rows = value.shape[0] if value.dim() == 2 else -1
    level = "node" if rows == graph.num_nodes and rows > 1 else "graph"
    return level, int(value.shape[-1]) if value.dim() == 2 else -1


def _assemble(files: Sequence[Path], outcomes: list[FileOutcome]) -> BatchResult:
    """Keep the graphs that share the most common attribute layout; infer the heads."""
    signatures = Counter(_signature(g) for o in outcomes for g in o.graphs)
    common = signatures.most_common(1)[0][0] if signatures else ()
    failures: list[FileFailure] = []
    graphs: list[Data] = []
    files_with_graphs = 0
    for path, outcome in zip(files, outcomes):
        failures.extend(outcome.failures)
        kept = 0
        for index, graph in enumerate(outcome.graphs):
            signature = _signature(graph)
            if signature == common:
                graphs.append(graph)
                kept += 1
                continue
            where = str(path) if len(outcome.graphs) + len(outcome.failures) == 1 else _indexed(str(graph.name))
            failures.append(FileFailure(where, f"attributes {[item[0] for item in signature]} (or their "
                                               f"shapes) differ from the other graphs' {[i[0] for i in common]}"))
        files_with_graphs += kept > 0
    units: dict[str, str] = {}
    sources: dict[str, str] = {}
    left_out: Counter = Counter()
    available: set[str] = set()
    for outcome in outcomes:
        units.update(outcome.units)
        sources.update(outcome.sources)
        left_out.update(outcome.left_out)
        available.update(outcome.available)
    heads, notes = _infer_heads(graphs, units, sources)
    notes += [f"label {key} left out ({count} structure(s)): {why}" for (key, why), count in sorted(left_out.items())]
    return BatchResult(graphs, heads, len(files), failures, notes, files_with_graphs, available)


def _head_order(key: str) -> tuple[int, str]:
    """Calculator results in :data:`KNOWN_RESULTS` order first (energy first), then by name."""
    from graph_builders.labels import KNOWN_RESULTS

    name = key[len(TARGET_PREFIX):]
    known = list(KNOWN_RESULTS)
    return (known.index(name), "") if name in known else (len(known), name)


def _infer_heads(graphs: list[Data], units: dict[str, str],
                 sources: dict[str, str]) -> tuple[HeadRegistry, list[str]]:
    """Heads = targets every graph has with one level and dim; others are removed and reported."""
    heads, notes = infer_heads([target_shapes(g) for g in graphs], units, sources)
    for graph in graphs:
        for key in [k for k in graph.keys() if k.startswith(TARGET_PREFIX)]:
            if key[len(TARGET_PREFIX):] not in heads.names:
                del graph[key]
    return heads, notes


def target_shapes(graph: Data) -> dict[str, tuple[str, int]]:
    """A graph's targets: key -> (level, dim) as :func:`infer_heads` sees them."""
    return {key: _head_shape(graph, key) for key in graph.keys() if key.startswith(TARGET_PREFIX)}


def graph_signature(graph: Data) -> tuple:
    """What graphs of one dataset share: attributes other than targets, their dtype and shape apart
    from the concatenation axis."""
    return _signature(graph)


def infer_heads(shapes: Sequence[dict[str, tuple[str, int]]], units: dict[str, str],
                sources: dict[str, str]) -> tuple[HeadRegistry, list[str]]:
    """The heads of graphs whose targets are ``shapes`` (one :func:`target_shapes` per graph): the
    targets every graph has with one level and dim, in :func:`_head_order`; notes on the others."""
    seen: dict[str, set[tuple[str, int]]] = {}
    present: Counter[str] = Counter()
    for targets in shapes:
        for key, shape in targets.items():
            seen.setdefault(key, set()).add(shape)
            present[key] += 1
    heads, notes = [], []
    for key in sorted(present, key=_head_order):
        name = key[len(TARGET_PREFIX):]
        if present[key] != len(shapes):
            notes.append(f"target {name!r} dropped: present in {present[key]} of {len(shapes)} graphs")
        elif len(seen[key]) != 1 or next(iter(seen[key]))[1] < 1:
            notes.append(f"target {name!r} dropped: inconsistent shapes across graphs")
        else:
            level, dim = next(iter(seen[key]))
            unit = units.get(name, "")
            where = {"results": "ASE calculator results", "info": "atoms.info", "arrays": "atoms.arrays"}
            heads.append(HeadSpec(name, level, dim, unit, f"from {where[sources[name]]}" if name in sources else ""))
            if name in sources and not unit:
                notes.append(f"head {name!r} (from {where[sources[name]]}) has no unit; give one with "
                             f"--units {name}=UNIT (an energy: eV for a total, eV/atom per atom)")
    return HeadRegistry.of(heads), notes
