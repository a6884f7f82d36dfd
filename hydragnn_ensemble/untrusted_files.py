"""Files a trial program controls, read and written without blocking and within bounds.

A trial program may leave anything in its run directory where the campaign expects a file: a named
pipe (whose open blocks until a writer comes), a device, a symbolic link to a huge file, a directory.
Every open here is non-blocking, does not follow a symbolic link in the last path component, and is
refused with :class:`NotRegularFileError` (an ``OSError``) unless it is a regular file; reads are
capped. Writes go to a fresh temporary file (created exclusively, so nothing planted under its name
is opened) renamed into place, and leave no temporary file behind when they fail.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class NotRegularFileError(OSError):
    """The path is a named pipe, a device, a directory, a symbolic link or a socket, not a file."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike, flags: int = _READ_FLAGS) -> int:
    """A file descriptor of ``path`` opened with ``flags`` (non-blocking, no symbolic link), or
    :class:`NotRegularFileError` when it is not a regular file (the descriptor is closed then)."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symbolic link
            raise NotRegularFileError(exc.errno, f"{path} is a symbolic link, not a regular file") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFileError(f"{path} is {_kind(mode)}, not a regular file")
    return fd


def file_size(path: str | os.PathLike) -> int:
    """The size of the regular file ``path`` (without opening anything that could block)."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFileError(f"{path} is {_kind(info.st_mode)}, not a regular file")
    return info.st_size


def is_regular_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file itself (not a link to one, nor anything else)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def read_bytes(path: str | os.PathLike, max_bytes: int, offset: int = 0) -> bytes:
    """At most ``max_bytes`` of the regular file ``path`` from ``offset`` (never blocks)."""
    fd = open_regular(path)
    try:
        return os.pread(fd, max_bytes, offset)
    finally:
        os.close(fd)


def read_tail(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The last ``max_bytes`` of the regular file ``path``."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, max_bytes, max(0, size - max_bytes))
    finally:
        os.close(fd)


def append_text(path: str | os.PathLike, text: str) -> None:
    """Append ``text`` to the regular file ``path`` (created when missing)."""
    fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, text.encode("utf-8", errors="replace"))
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, text: str | bytes, fsync: bool = False) -> None:
    """Replace ``path`` with ``text``: a temporary file of this process, created exclusively, renamed
    into place; removed again when anything fails (a full disk leaves no temporary file)."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    data = text.encode() if isinstance(text, str) else text
    try:
        tmp.unlink(missing_ok=True)  # whatever was planted under the name (never opened)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise


def remove_any(path: str | os.PathLike) -> None:
    """Remove whatever a trial left at ``path``: a file, a symbolic link (not its target), a named
    pipe, a socket, a device node or a whole directory tree (whose links are not followed either);
    nothing there is fine."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def move_aside(path: str | os.PathLike, target: str | os.PathLike) -> Path | None:
    """Rename whatever is at ``path`` (any file type, a directory too) to ``target``, or to
    ``target`` with ``.1``, ``.2``, ... appended where that name is taken; returns the name it got
    (None when nothing was at ``path``)."""
    path, target = Path(path), Path(target)
    if not os.path.lexists(path):
        return None
    candidate, n = target, 0
    while os.path.lexists(candidate):
        n += 1
        candidate = target.with_name(f"{target.name}.{n}")
    os.rename(path, candidate)
    return candidate
