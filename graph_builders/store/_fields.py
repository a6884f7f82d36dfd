"""How one attribute of a ``Data`` object becomes a stored array, and back.

Kinds: ``tensor`` (any shape >= 1-D), ``tensor0d`` (0-D tensor, stored as shape [1]), ``str``
(UTF-8 bytes as uint8, HydraGNN's convention), ``int`` and ``float`` (Python/NumPy scalars, stored
as shape [1]). Bool tensors are stored as int64 (HydraGNN's reader knows no bool and turns uint8
into text) and come back as bool.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import torch
from torch_geometric.data import Data

from graph_builders.store.errors import InconsistentGraphsError, StoreError

_STORED_DTYPE: dict[torch.dtype, np.dtype] = {
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.int64: np.dtype(np.int64),
    torch.int32: np.dtype(np.int32),
    torch.int16: np.dtype(np.int16),
    torch.int8: np.dtype(np.int8),
    torch.uint8: np.dtype(np.uint8),
    torch.bool: np.dtype(np.int64),
}
_TORCH_DTYPE_BY_NAME: dict[str, torch.dtype] = {str(t).removeprefix("torch."): t for t in _STORED_DTYPE}


@dataclass(frozen=True)
class FieldSpec:
    """One stored attribute: its kind, stored and restored dtypes, and concatenation axis.

    ``shape`` is the per-sample shape with the concatenation axis set to -1; every sample of a
    split must match it.
    """

    key: str
    kind: str
    dtype: np.dtype
    torch_dtype: str
    cat_dim: int
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "torch_dtype": self.torch_dtype}


def field_spec(data: Data, key: str, label: str) -> FieldSpec:
    """Describe attribute ``key`` of ``data`` (``label`` names the graph in error messages)."""
    value = data[key]
    if isinstance(value, torch.Tensor):
        if value.dtype not in _STORED_DTYPE:
            raise StoreError(
                f"{label}: attribute {key!r} has dtype {value.dtype}, which the store does not "
                f"support (use one of {sorted(_TORCH_DTYPE_BY_NAME)})"
            )
        torch_dtype = str(value.dtype).removeprefix("torch.")
        if value.dim() == 0:
            return FieldSpec(key, "tensor0d", _STORED_DTYPE[value.dtype], torch_dtype, 0, (-1,))
        cat_dim = data.__cat_dim__(key, value)
        if not isinstance(cat_dim, int):
            raise StoreError(f"{label}: attribute {key!r} has no concatenation axis ({cat_dim!r})")
        cat_dim = cat_dim % value.dim()
        shape = tuple(-1 if axis == cat_dim else int(n) for axis, n in enumerate(value.shape))
        return FieldSpec(key, "tensor", _STORED_DTYPE[value.dtype], torch_dtype, cat_dim, shape)
    if isinstance(value, str):
        return FieldSpec(key, "str", np.dtype(np.uint8), "", 0, (-1,))
    if isinstance(value, (bool, np.bool_)):
        raise StoreError(f"{label}: attribute {key!r} is a bare bool; store it as a bool tensor")
    if isinstance(value, Integral):
        return FieldSpec(key, "int", np.dtype(np.int64), "", 0, (-1,))
    if isinstance(value, Real):
        return FieldSpec(key, "float", np.dtype(np.float64), "", 0, (-1,))
    raise StoreError(
        f"{label}: attribute {key!r} of type {type(value).__name__} cannot be stored "
        "(tensors, strings, ints and floats can)"
    )


def encode(value: object, spec: FieldSpec, label: str) -> np.ndarray:
    """The array stored for ``value``; checks it matches ``spec`` (first graph of the split)."""
    if spec.kind == "str":
        if not isinstance(value, str):
            _mismatch(label, spec, f"a {type(value).__name__}, not a string")
        return np.frombuffer(value.encode("utf-8"), dtype=np.uint8)
    if spec.kind in ("int", "float"):
        if isinstance(value, torch.Tensor) or not isinstance(value, (Integral, Real)):
            _mismatch(label, spec, f"a {type(value).__name__}, not a number")
        return np.asarray([value], dtype=spec.dtype)
    if not isinstance(value, torch.Tensor):
        _mismatch(label, spec, f"a {type(value).__name__}, not a tensor")
    if str(value.dtype).removeprefix("torch.") != spec.torch_dtype:
        _mismatch(label, spec, f"dtype {value.dtype}, not torch.{spec.torch_dtype}")
    if spec.kind == "tensor0d":
        if value.dim() != 0:
            _mismatch(label, spec, f"shape {tuple(value.shape)}, not a 0-D tensor")
        value = value.reshape(1)
    elif value.dim() != len(spec.shape) or any(
        want != -1 and int(got) != want for got, want in zip(value.shape, spec.shape)
    ):
        expected = "[" + ", ".join("*" if n == -1 else str(n) for n in spec.shape) + "]"
        _mismatch(label, spec, f"shape {list(value.shape)}, not {expected}")
    array = value.detach().cpu().numpy()
    if array.dtype != spec.dtype:
        array = array.astype(spec.dtype)
    return array


def decode(array: np.ndarray, spec: FieldSpec) -> object:
    """Inverse of :func:`encode`: the value as it was on the ``Data`` object."""
    if spec.kind == "str":
        return array.tobytes().decode("utf-8")
    if spec.kind == "int":
        return int(array[0])
    if spec.kind == "float":
        return float(array[0])
    tensor = torch.from_numpy(array)
    if spec.torch_dtype == "bool":
        tensor = tensor.bool()
    elif spec.torch_dtype in _TORCH_DTYPE_BY_NAME and tensor.dtype != _TORCH_DTYPE_BY_NAME[spec.torch_dtype]:
        tensor = tensor.to(_TORCH_DTYPE_BY_NAME[spec.torch_dtype])  # stored narrower (a compact layout)
    if spec.kind == "tensor0d":
        tensor = tensor.reshape(())
    return tensor


def spec_from_file(key: str, kind: str, torch_dtype: str, dtype: np.dtype, cat_dim: int, ndim: int) -> FieldSpec:
    """Rebuild a FieldSpec from what a file records (shape is not needed for reading)."""
    if kind == "tensor" and torch_dtype not in _TORCH_DTYPE_BY_NAME:
        torch_dtype = str(torch.from_numpy(np.zeros(1, dtype=dtype)).dtype).removeprefix("torch.")
    return FieldSpec(key, kind, np.dtype(dtype), torch_dtype, cat_dim, (-1,) * ndim)


def _mismatch(label: str, spec: FieldSpec, what: str) -> None:
    raise InconsistentGraphsError(
        f"{label}: attribute {spec.key!r} is {what}, unlike the first graph of its split"
    )
