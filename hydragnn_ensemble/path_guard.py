"""What a command may write, replace or load: outputs apart from inputs, paths kept inside their root.

Two rules every command and reader of the project follows:

* **Outputs never touch inputs.** An output may not be one of the command's inputs, contain one, or
  lie inside one (:func:`check_no_overlap`). An existing output is replaced only when it is what the
  same command wrote before, recognised by its own marker (a manifest, a header, a format
  attribute); some commands also ask for ``--force`` first (:func:`check_replaceable`). An empty
  directory, or nothing at all, is always fine.
* **Recorded paths stay inside their root.** A path read from a file (a manifest's member
  checkpoint, a result.json's ``checkpoint``) is resolved (symbolic links too) and must lie inside
  the directory it is relative to (:func:`contained_path`).

Every refusal is a :class:`PathGuardError` (a ValueError) naming both paths.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path


class PathGuardError(ValueError):
    """A path a command must not write, replace or load; the message names the paths involved."""


def _real(path: str | os.PathLike) -> Path:
    """Absolute path with symbolic links resolved (as far as it exists)."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _inside(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_no_overlap(output: str | os.PathLike, inputs: Iterable[str | os.PathLike], what: str) -> None:
    """Raise :class:`PathGuardError` when ``output`` is one of ``inputs``, contains one, or lies
    inside one. ``what`` names the output in the message ("ensemble directory", ...)."""
    out = _real(output)
    for item in inputs:
        inp = _real(item)
        if out == inp:
            raise PathGuardError(f"{what} {output} is the input {item}: choose another output path")
        if _inside(inp, out):
            raise PathGuardError(
                f"{what} {output} contains the input {item}: writing there could destroy it; "
                "choose another output path")
        if _inside(out, inp):
            raise PathGuardError(
                f"{what} {output} lies inside the input {item}: choose an output path outside it")


def is_empty_dir(path: Path) -> bool:
    """True for an existing directory with nothing in it."""
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def check_replaceable(output: str | os.PathLike, is_ours: Callable[[Path], bool], what: str, *,
                      force: bool = False, needs_force: bool = False) -> None:
    """Raise :class:`PathGuardError` unless ``output`` may be (re)written.

    Nothing there, or an empty directory: fine. Something the same command wrote before
    (``is_ours(output)``): fine, unless ``needs_force`` and not ``force``. Anything else is refused,
    with or without ``--force``."""
    path = Path(output)
    if not os.path.lexists(path) or is_empty_dir(path):
        return
    if not is_ours(path):
        raise PathGuardError(
            f"{output} exists and is not a previous output of this command ({what}); it is never "
            "replaced (--force replaces only what the same command wrote before): choose another path")
    if needs_force and not force:
        raise PathGuardError(f"{output} holds a previous output of this command ({what}); pass --force "
                             "to replace it")


def contained_path(root: str | os.PathLike, relative: str, what: str) -> Path:
    """``root / relative`` resolved, which must lie inside ``root`` (no ``..``, no absolute path,
    no symbolic link leading out); raises :class:`PathGuardError` naming both otherwise."""
    base = _real(root)
    if "\0" in relative:
        raise PathGuardError(f"{what} {relative!r} holds a NUL byte: no file has such a name")
    if os.path.isabs(relative):
        raise PathGuardError(f"{what} {relative!r} is an absolute path; it must be relative to {root}")
    target = _real(base / relative)
    if not _inside(target, base) or target == base:
        raise PathGuardError(f"{what} {relative!r} leads outside {root} (to {target})")
    return target


@dataclass(frozen=True)
class Output:
    """One path a command writes: what it is, and how to recognise a previous output of the command."""

    path: Path
    what: str
    is_ours: Callable[[Path], bool]
    needs_force: bool = False  # replacing a previous output also needs --force


@dataclass(frozen=True)
class CommandPaths:
    """The paths a command reads and the ones it writes."""

    inputs: tuple[Path, ...] = ()
    outputs: tuple[Output, ...] = field(default_factory=tuple)

    def check(self, force: bool = False) -> None:
        """Apply both rules of the module docstring to every output."""
        for out in self.outputs:
            check_no_overlap(out.path, self.inputs, out.what)
            check_replaceable(out.path, out.is_ours, out.what, force=force, needs_force=out.needs_force)
