"""Keep the C heap's freed blocks for reuse during training (glibc only).

A training step on CPU allocates and frees the same large per-edge temporaries every batch
(``[E, F]`` and ``[E, 3, F]`` tensors of tens of MB). glibc serves blocks above its mmap threshold
(at most 32 MB by default) with a fresh ``mmap`` and returns them with ``munmap`` when freed, so every
such tensor is page-faulted in again, zeroed by the kernel, in every step: PaiNN at hidden 64
spends about half its epoch there (``bench/hydragnn_anchor.py`` measured 20 vs 38 graphs/s).
:func:`keep_freed_memory` raises the mmap and trim thresholds so freed blocks stay in the heap;
the peak resident memory is what the step needs anyway, it just is not given back between steps.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1  # glibc mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
KEEP_BYTES = 1 << 30  # blocks up to 1 GiB come from the heap, and up to 1 GiB of free heap is kept


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process (see the module docstring); False
    where the C library is not glibc (macOS, musl) and nothing was changed."""
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, KEEP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP_BYTES))
