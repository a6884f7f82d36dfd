"""Per-rank partial files of a prediction run and their streaming merge into the final files.

Each rank writes what it predicted, in input order, tagged with each structure's position
``(input, split, index)`` (:mod:`ensemble.input_plan`): CSV rows (every cell of
:class:`ensemble.outputs.CsvLayout`), extxyz frames and the bad inputs it found. Rank 0 merges the
ranks' files by position (``heapq.merge``: one record per file in memory, whatever their size) into
the final CSV and extxyz, each written to a temporary file and renamed, so a final file appears only
complete. The partial files live in a temporary directory beside the output, removed at the end.
"""

from __future__ import annotations

import csv
import heapq
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TextIO

from ensemble.input_plan import BadInput, Position


def make_parts_dir(output: str | os.PathLike) -> Path:
    """A new temporary directory beside ``output`` (removed by :func:`remove_parts_dir`)."""
    output = Path(output)
    return Path(tempfile.mkdtemp(prefix=f".{output.name}.parts-", dir=output.parent))


def remove_parts_dir(parts: str | os.PathLike) -> None:
    shutil.rmtree(parts, ignore_errors=True)


def _paths(parts: Path, rank: int) -> tuple[Path, Path, Path]:
    return parts / f"rows.{rank}.csv", parts / f"frames.{rank}.extxyz", parts / f"bad.{rank}.jsonl"


class PartWriter:
    """One rank's partial files (rows, frames, bad inputs); records are appended in input order."""

    def __init__(self, parts: str | os.PathLike, rank: int) -> None:
        rows, frames, bad = _paths(Path(parts), rank)
        self._rows = open(rows, "w", newline="")
        self._frames = open(frames, "w", newline="\n")
        self._bad = open(bad, "w")
        self._csv = csv.writer(self._rows)
        self.writes = 0  # calls of write_rows: one per chunk predicted

    def write_rows(self, rows: Iterable[tuple[Position, list[str]]]) -> None:
        for position, cells in rows:
            self._csv.writerow([*position, *cells])
        self.writes += 1

    def write_frame(self, position: Position, text: str) -> None:
        self._frames.write(f"{position[0]} {position[1]} {position[2]} {text.count(chr(10))}\n")
        self._frames.write(text)

    def write_bad(self, bad: Iterable[BadInput]) -> None:
        for b in bad:
            self._bad.write(json.dumps([*b.position, b.source, b.index, b.reason]) + "\n")

    def close(self) -> None:
        for fh in (self._rows, self._frames, self._bad):
            fh.close()

    def __enter__(self) -> "PartWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rows(path: Path) -> Iterator[tuple[Position, list[str]]]:
    with open(path, newline="") as fh:
        for record in csv.reader(fh):
            yield (int(record[0]), int(record[1]), int(record[2])), record[3:]


def _frames(path: Path) -> Iterator[tuple[Position, str]]:
    with open(path, newline="\n") as fh:  # lines end at "\n" only, as counted when written
        while line := fh.readline():
            a, b, c, n = (int(v) for v in line.split())
            yield (a, b, c), "".join(fh.readline() for _ in range(n))


def _bad(path: Path) -> Iterator[BadInput]:
    with open(path) as fh:
        for line in fh:
            a, b, c, source, index, reason = json.loads(line)
            yield BadInput(source, index, reason, (a, b, c))


def _first(record: tuple) -> Position:
    return record[0]


def _replace_atomically(path: Path, write: Callable[[TextIO], None], newline: str | None = None) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline=newline) as fh:
        write(fh)
    os.replace(tmp, path)
    return path


def merge_rows(parts: str | os.PathLike, ranks: int, header: list[str], keep: list[int],
               output: str | os.PathLike) -> Path:
    """The final CSV: ``header``, then every rank's rows in input order, cells ``keep`` of each."""
    streams = [_rows(_paths(Path(parts), r)[0]) for r in range(ranks)]

    def write(fh: TextIO) -> None:
        writer = csv.writer(fh)
        writer.writerow(header)
        for _, cells in heapq.merge(*streams, key=_first):
            writer.writerow([cells[j] for j in keep])

    return _replace_atomically(Path(output), write, newline="")


def merge_frames(parts: str | os.PathLike, ranks: int, output: str | os.PathLike) -> Path:
    """The final extxyz: every rank's frames in input order."""
    streams = [_frames(_paths(Path(parts), r)[1]) for r in range(ranks)]

    def write(fh: TextIO) -> None:
        for _, text in heapq.merge(*streams, key=_first):
            fh.write(text)

    return _replace_atomically(Path(output), write)


def merge_bad(parts: str | os.PathLike, ranks: int, planned: list[BadInput]) -> Iterator[BadInput]:
    """Every bad input in input order: those found while planning (sorted) and every rank's."""
    streams = [iter(sorted(planned, key=lambda b: b.position))]
    streams += [_bad(_paths(Path(parts), r)[2]) for r in range(ranks)]
    return heapq.merge(*streams, key=lambda b: b.position)
