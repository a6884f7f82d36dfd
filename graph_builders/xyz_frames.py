"""The frames of an extended XYZ file: where each structure starts (one pass) and reading a run of them.

ASE reads a slice ``"a:b"`` of an extxyz file by rescanning it from its start up to frame ``b``, so
reading a large file chunk by chunk rescans it once per chunk. :func:`scan_frames` finds where every
frame starts in one pass over the bytes, the way ASE's reader delimits frames (the atom-count line,
the comment line, that many atom lines, then any ``VEC`` lattice lines; a blank line ends the file),
without parsing them; :func:`read_frames` parses only the bytes of the frames asked for.

A file that cannot be delimited from frame ``k`` on (a count line that is not a number, a frame cut
short) keeps its first ``k`` frames: the :class:`FrameTable` says where the readable part ends and why.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from ase import Atoms
from ase.io.formats import get_compression

#: ASE formats whose frames :func:`scan_frames` delimits
XYZ_FORMATS: tuple[str, ...] = ("extxyz",)


@dataclass
class FrameTable:
    """Byte offsets of the frames of a file: frame ``k`` is ``[offsets[k], offsets[k + 1])``;
    ``error`` says why the file cannot be delimited after its last complete frame (None: read to the end)."""

    offsets: np.ndarray  # [num_frames + 1] int64
    error: str | None = None

    @property
    def num_frames(self) -> int:
        return len(self.offsets) - 1


def has_frame_table(path: str | os.PathLike, fmt: str) -> bool:
    """True when :func:`scan_frames` can delimit the frames of ``path`` read as ``fmt`` (uncompressed extxyz)."""
    return fmt in XYZ_FORMATS and get_compression(str(path))[1] is None


def _scan(fh: BinaryIO) -> FrameTable:
    offsets: list[int] = []
    line_no = 0
    while True:
        start = fh.tell()
        line = fh.readline()
        line_no += 1
        if line.strip() == b"":
            return FrameTable(np.array(offsets + [start], dtype=np.int64))
        try:
            natoms = int(line)
            if natoms < 0:
                raise ValueError(natoms)
        except ValueError:
            error = f"line {line_no}: expected the number of atoms of frame {len(offsets)}, got {line[:40]!r}"
            return FrameTable(np.array(offsets + [start], dtype=np.int64), error)
        for k in range(natoms + 1):  # the comment line and the atom lines
            if not fh.readline():
                error = (f"frame {len(offsets)} (line {line_no}) is cut short: {natoms} atom(s) announced, "
                         f"the file ends after {max(k - 1, 0)}")
                return FrameTable(np.array(offsets + [start], dtype=np.int64), error)
        line_no += natoms + 1
        while True:  # lattice vectors of the old format
            before = fh.tell()
            if not fh.readline().lstrip().startswith(b"VEC"):
                fh.seek(before)
                break
            line_no += 1
        offsets.append(start)


def scan_frames(path: str | os.PathLike) -> FrameTable:
    """Where every frame of the extxyz file ``path`` starts (one pass, nothing parsed); OSError when
    the file cannot be opened."""
    with open(path, "rb") as fh:
        return _scan(fh)


def split_frames(data: bytes) -> list[bytes]:
    """The frames of ``data`` (bytes of whole extxyz frames) one by one."""
    table = _scan(io.BytesIO(data))
    bounds = table.offsets.tolist()
    return [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def read_bytes(path: str | os.PathLike, start: int, stop: int) -> bytes:
    """Bytes ``[start, stop)`` of ``path``."""
    with open(path, "rb") as fh:
        fh.seek(start)
        return fh.read(stop - start)


def parse_frames(data: bytes, fmt: str = "extxyz") -> list[Atoms]:
    """The structures of ``data`` (whole frames). ASE's exceptions pass through (ValueError,
    KeyError, ... as its parser raises them); read on this process alone (no MPI broadcast)."""
    import ase.io

    text = data.decode("utf-8")
    if not text.strip():
        return []
    result = ase.io.read(io.StringIO(text), index=":", format=fmt, parallel=False)
    return [result] if isinstance(result, Atoms) else list(result)


def read_frames(path: str | Path, start: int, stop: int, fmt: str = "extxyz") -> list[Atoms]:
    """The structures of bytes ``[start, stop)`` of ``path`` (frame boundaries from :func:`scan_frames`)."""
    return parse_frames(read_bytes(path, start, stop), fmt)
