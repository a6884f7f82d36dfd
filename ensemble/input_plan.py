"""Which structures the inputs hold and how they are cut into chunks, before anything is parsed.

``predict`` reads, builds and predicts its inputs a chunk at a time (bounded memory) and spreads the
chunks over MPI ranks. :func:`plan_inputs` lists them in input order (files in the order given,
structures in file order, a dataset's splits in its order) as *units*, and cuts that sequence into
chunks of ``chunk_size`` units; a chunk may span several inputs:

* a ``.bp`` dataset (or a sharded dataset directory): one unit per graph, counted from its metadata;
* an uncompressed extxyz file: one unit per frame, the frames delimited in one pass without parsing
  them (:mod:`graph_builders.xyz_frames`), so a chunk reads only its own bytes;
* any other structure file (CIF, POSCAR, OUTCAR, a pymatgen JSON...): one unit, read whole by the
  chunk that holds it (its memory is that of the file, not of the input set).

Every structure has a *position* ``(input, split, index)`` that orders the rows of the output
(``index`` -1: the input as a whole). Inputs that cannot be planned (missing, unknown format,
unreadable dataset, an extxyz file that cannot be delimited) become :class:`BadInput`; an extxyz
file delimited up to frame ``k`` keeps its first ``k`` frames and lists frame ``k`` as bad.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

#: ``(input, split, index)``: where a structure lies in the input order (index -1: the whole input)
Position = tuple[int, int, int]


@dataclass
class BadInput:
    """An input that could not be predicted, and why."""

    source: str
    index: str | None
    reason: str
    position: Position = (0, 0, -1)

    def describe(self) -> str:
        where = self.source if self.index is None else f"{self.source}[{self.index}]"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class Source:
    """One input: ``kind`` "dataset" (``splits`` in order), "frames" (an extxyz file with a frame
    table) or "file" (a structure file read whole, in format ``fmt``)."""

    path: str
    kind: str
    fmt: str | None = None
    splits: tuple[str, ...] = ()


@dataclass(frozen=True)
class Piece:
    """Units ``[start, stop)`` of split ``split`` of input ``source`` (split 0 for structure files);
    for a "frames" input, bytes ``[byte_start, byte_stop)`` of the file hold them; a "file" input is
    the single unit ``[0, 1)``."""

    source: int
    split: int
    start: int
    stop: int
    byte_start: int = -1
    byte_stop: int = -1

    @property
    def units(self) -> int:
        return self.stop - self.start


@dataclass
class InputPlan:
    """The inputs, their chunks (each a list of pieces, in input order) and the inputs found bad."""

    sources: list[Source]
    chunks: list[list[Piece]] = field(default_factory=list)
    bad: list[BadInput] = field(default_factory=list)
    chunk_size: int | None = None

    @property
    def units(self) -> int:
        return sum(p.units for chunk in self.chunks for p in chunk)

    def chunk_units(self, c: int) -> int:
        return sum(p.units for p in self.chunks[c])


class _Cutter:
    """Cuts the unit sequence into chunks of ``size`` units (None: one chunk)."""

    def __init__(self, size: int | None) -> None:
        self.size = size
        self.chunks: list[list[Piece]] = []
        self.current: list[Piece] = []
        self.room = size

    def add(self, source: int, split: int, count: int, offsets: list[int] | None = None) -> None:
        start = 0
        while start < count:
            take = count - start if self.room is None else min(self.room, count - start)
            stop = start + take
            if offsets is None:
                self.current.append(Piece(source, split, start, stop))
            else:
                self.current.append(Piece(source, split, start, stop, offsets[start], offsets[stop]))
            start = stop
            if self.room is not None:
                self.room -= take
                if self.room == 0:
                    self.chunks.append(self.current)
                    self.current, self.room = [], self.size

    def finish(self) -> list[list[Piece]]:
        if self.current:
            self.chunks.append(self.current)
            self.current = []
        return self.chunks


def is_dataset(path: Path) -> bool:
    """True for the inputs read as datasets: a ``.bp`` file or a sharded dataset directory."""
    from graph_builders.store import is_sharded

    return path.suffix == ".bp" or (path.is_dir() and is_sharded(path))


def _plan_dataset(k: int, path: Path, cutter: _Cutter, bad: list[BadInput]) -> Source | None:
    from graph_builders.store import open_dataset

    try:
        with open_dataset(path) as store:
            splits = tuple(store.split_names)
            counts = [store.num_graphs(s) for s in splits]
    except (ValueError, OSError, RuntimeError) as exc:
        bad.append(BadInput(str(path), None, f"cannot open dataset: {exc}", (k, 0, -1)))
        return None
    for s, count in enumerate(counts):
        cutter.add(k, s, count)
    return Source(str(path), "dataset", splits=splits)


def _plan_structures(k: int, path: Path, cutter: _Cutter, bad: list[BadInput]) -> Source | None:
    from graph_builders.readers import StructureReadError, detect_format
    from graph_builders.xyz_frames import has_frame_table, scan_frames

    def fail(reason: str, index: int = -1) -> None:
        bad.append(BadInput(str(path), None if index < 0 else str(index), reason, (k, 0, index)))

    if not path.is_file():
        fail("no such file")
        return None
    if path.stat().st_size == 0:
        fail("file is empty")
        return None
    try:
        fmt = detect_format(path)
    except StructureReadError as exc:
        fail(str(exc).removeprefix(f"{path}: "))
        return None
    if not has_frame_table(path, fmt):
        cutter.add(k, 0, 1)
        return Source(str(path), "file", fmt)
    try:
        table = scan_frames(path)
    except OSError as exc:
        fail(f"cannot read: {exc}")
        return None
    if table.num_frames == 0:
        fail(f"cannot read as {fmt!r} (truncated or malformed file?): {table.error}" if table.error
             else "contains no structures")
        return None
    cutter.add(k, 0, table.num_frames, table.offsets.tolist())
    if table.error:
        fail(f"cannot read as {fmt!r} from here on (truncated or malformed file?): {table.error}", table.num_frames)
    return Source(str(path), "frames", fmt)


def plan_inputs(paths: list[str | os.PathLike], chunk_size: int | None = None) -> InputPlan:
    """The plan of ``paths`` (see the module docstring); ``chunk_size`` units per chunk (None: one
    chunk of everything). Reads only datasets' metadata and extxyz frame boundaries."""
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    cutter = _Cutter(chunk_size)
    sources: list[Source] = []
    bad: list[BadInput] = []
    for k, p in enumerate(paths):
        path = Path(p)
        if not path.exists():
            bad.append(BadInput(str(path), None, "no such file", (k, 0, -1)))
            source = None
        elif is_dataset(path):
            source = _plan_dataset(k, path, cutter, bad)
        else:
            source = _plan_structures(k, path, cutter, bad)
        sources.append(source or Source(str(path), "bad"))
    return InputPlan(sources, cutter.finish(), bad, chunk_size)
