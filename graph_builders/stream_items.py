"""One process's share of the inputs' structures, built one at a time (the streaming build's input).

The inputs' structures are in a global order: files in order, the structures of a file in order.
Of ``size`` processes, process ``rank`` builds structure ``i`` of file ``f`` when
``(f + i) % size == rank``: structures ``rank, rank + size, ...`` of a single file, files
``rank, rank + size, ...`` of single-structure files (and of the mesoscale and continuum scales, one
graph per file). No process needs to know how many structures a file holds before reading the next,
and each reads only its own structures of a multi-structure file
(:func:`graph_builders.readers.iter_structures`: ASE scans the file once and parses only the frames
selected).

Every :class:`Item` carries its place in the global order (``key``: file number, structure number;
-1 for a failure of the whole file), so what the processes built can be put back in one order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch_geometric.data import Data

from graph_builders.batch_build import (
    BatchBuildOptions,
    FileFailure,
    FileOutcome,
    _atomic_graph,
    _reason,
    build_file,
)


@dataclass
class Item:
    """One structure of the global order: its graph, or why it has none."""

    key: tuple[int, int]  # (file number, structure number; -1: the whole file)
    graph: Data | None = None
    failure: FileFailure | None = None


@dataclass
class Labels:
    """What the labels of the structures built so far said (atomic scale; see :mod:`graph_builders.labels`)."""

    units: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    left_out: Counter = field(default_factory=Counter)
    available: set[str] = field(default_factory=set)

    def add(self, outcome: FileOutcome) -> None:
        self.units.update(outcome.units)
        self.sources.update(outcome.sources)
        self.left_out.update(outcome.left_out)
        self.available.update(outcome.available)


def owner(file_number: int, structure: int, size: int) -> int:
    """The process that builds structure ``structure`` of file ``file_number`` (module docstring)."""
    return (file_number + structure) % size


def rank_items(files: Sequence[Path], options: BatchBuildOptions, rank: int, size: int, labels: Labels,
               built: Callable[[int], None] | None = None) -> Iterator[Item]:
    """The items of process ``rank`` of ``size``, in global order; ``labels`` collects what the
    structures' labels said, ``built(file_number)`` hears of every structure done."""
    for f, path in enumerate(files):
        if options.scale != "atomic":
            if owner(f, 0, size) == rank:
                outcome = build_file(path, options)
                yield Item((f, 0), outcome.graphs[0]) if outcome.graphs else Item((f, -1), failure=outcome.failures[0])
                if built is not None:
                    built(f)
            continue
        yield from _atomic_items(f, path, options, rank, size, labels, built)


def _atomic_items(f: int, path: Path, options: BatchBuildOptions, rank: int, size: int, labels: Labels,
                  built: Callable[[int], None] | None) -> Iterator[Item]:
    """This process's structures of atomic file ``f``: a failure of the file (``FILE``) where it
    cannot be read (from the structure where that shows); a structure that gives no graph as
    ``FILE[INDEX]`` (always with the index: the file's count is not known here)."""
    from graph_builders.atomic import AtomicGraphBuilder
    from graph_builders.readers import iter_structures

    start = (rank - f) % size
    if not path.is_file():
        if start == 0:
            yield Item((f, -1), failure=FileFailure(str(path), "no such file"))
        return
    build = AtomicGraphBuilder(options.cutoff, options.max_neighbours, options.allow_isolated)
    index = start
    try:
        for atoms in iter_structures(path, start, size):
            outcome = FileOutcome()
            _atomic_graph(path, index, 2, atoms, build, options, outcome)
            labels.add(outcome)
            if outcome.graphs:
                yield Item((f, index), outcome.graphs[0])
            else:
                yield Item((f, index), failure=outcome.failures[0])
            if built is not None:
                built(f)
            index += size
    except Exception as exc:  # noqa: BLE001 - any failure to read is recorded against the file
        yield Item((f, -1), failure=FileFailure(str(path), _reason(exc, path)))
        return
    if index == 0:  # this process owns structure 0 and there was none
        yield Item((f, -1), failure=FileFailure(str(path), "no structures in the file"))
