"""Crash-safe replacement of a dataset path (a BP file is a directory) by a freshly written one."""

from __future__ import annotations

import ctypes
import os
import shutil
from pathlib import Path

from graph_builders.store._layout import BP_INDEX_FILE
from graph_builders.store.errors import StoreError
from graph_builders.store.reader import is_project_dataset

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def temporary_path(path: Path) -> Path:
    """Where a dataset for ``path`` is written before it is moved into place."""
    return path.with_name(f"{path.name}.tmp-{os.getpid()}")


def check_output_path(path: Path) -> None:
    """Raise StoreError if ``path`` exists and is neither an empty directory nor a dataset this
    project wrote (any other ADIOS2 file, e.g. one of HydraGNN's, is never replaced)."""
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink() and (not any(path.iterdir()) or is_project_dataset(path)):
        return
    what = "an ADIOS2 file not written by this project" if (path / BP_INDEX_FILE).is_file() else "not a dataset"
    raise StoreError(f"refusing to overwrite {path}: it exists and is {what}; choose another output path")


def remove_path(path: Path) -> None:
    """Delete a file or directory tree if it exists."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def replace_path(src: Path, dst: Path) -> None:
    """Move the finished dataset ``src`` onto ``dst``.

    ``dst`` never holds a half-written dataset. On Linux an existing ``dst`` is swapped atomically
    with ``renameat2(RENAME_EXCHANGE)``; elsewhere the old one is moved aside first, so a crash in
    that instant leaves the old dataset at ``<dst>.old-<pid>`` and nothing at ``dst``.
    """
    check_output_path(dst)
    if not os.path.lexists(dst):
        os.replace(src, dst)
        return
    if _exchange(src, dst):
        remove_path(src)  # now holds the old dataset
        return
    aside = dst.with_name(f"{dst.name}.old-{os.getpid()}")
    os.replace(dst, aside)
    os.replace(src, dst)
    remove_path(aside)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths; False where the platform cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return rc == 0
