"""Many small tensors saved as a few: ``torch.save`` costs about 40 us per tensor whatever its size,
so a small model's training state (weights, and per weight the optimizer's step, first and second
moments) spent most of its write time on that. :func:`pack` replaces every tensor of a nested
structure (dicts, lists, tuples) that has fewer than :data:`PACK_BELOW` elements by a marker and
concatenates them, per dtype and device, into one CPU tensor each; larger tensors stay themselves
(moved to the CPU), their per-tensor cost being small next to their size. :func:`unpack` gives the
structure back with independent tensors. Everything stays plain data for
``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

PACK_BELOW = 1 << 16  # elements
MARKER = "__packed_tensor__"


def _within(value: Any, walk: Callable[[Any], Any]) -> Any:
    """``walk`` applied inside a dict, list or tuple (a new container); any other value as is."""
    if isinstance(value, dict):
        return {k: walk(v) for k, v in value.items()}
    if isinstance(value, list):
        return [walk(v) for v in value]
    if isinstance(value, tuple):
        return tuple(walk(v) for v in value)
    return value


def pack(obj: Any) -> tuple[Any, dict[str, Any]]:
    """``obj`` with its small tensors replaced by ``(MARKER, index)``, and the packed tensors
    (``{"metas": [[group, offset, shape], ...], "data": {group: flat CPU tensor}}``)."""
    metas: list[list[Any]] = []
    groups: dict[str, list[Tensor]] = {}
    sizes: dict[str, int] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, Tensor):
            value = value.detach()
            if value.numel() >= PACK_BELOW:
                return value.cpu()
            group = f"{str(value.dtype).removeprefix('torch.')}@{value.device}"
            metas.append([group, sizes.get(group, 0), list(value.shape)])
            groups.setdefault(group, []).append(value.reshape(-1))
            sizes[group] = sizes.get(group, 0) + value.numel()
            return (MARKER, len(metas) - 1)
        return _within(value, walk)

    skeleton = walk(obj)
    data = {group: torch.cat(parts).cpu() for group, parts in groups.items()}
    return skeleton, {"metas": metas, "data": data}


def unpack(skeleton: Any, packed: dict[str, Any]) -> Any:
    """The structure :func:`pack` was given (CPU tensors); ValueError when ``packed`` does not
    describe the markers (a damaged file)."""
    metas, data = packed["metas"], packed["data"]

    def walk(value: Any) -> Any:
        if isinstance(value, tuple) and len(value) == 2 and value[0] == MARKER:
            group, offset, shape = metas[value[1]]
            numel = 1
            for n in shape:
                numel *= int(n)
            flat = data[group]
            if offset < 0 or offset + numel > flat.numel():
                raise ValueError(f"packed tensor {value[1]} lies outside its group {group!r}")
            return flat[offset: offset + numel].reshape(tuple(int(n) for n in shape)).clone()
        return _within(value, walk)

    try:
        return walk(skeleton)
    except (KeyError, IndexError, TypeError, RuntimeError) as exc:
        raise ValueError(f"the packed tensors do not match their markers ({exc})") from None
