"""Search spaces over dotted keys of a HydraGNN JSON config.

A campaign's ``search_space`` maps a dotted config key to a distribution::

    {"NeuralNetwork.Architecture.num_conv_layers": {"type": "int", "low": 1, "high": 6},
     "NeuralNetwork.Training.Optimizer.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2,
                                                        "log": true},
     "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["GIN", "PNA"]}}

:class:`SearchSpace` validates such a mapping (every error names the key), checks and samples
parameter dicts, and :func:`apply_params` writes a parameter dict into a copy of the base config.
"""

from __future__ import annotations

import difflib
import math
import numbers
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, Union

import numpy as np

__all__ = [
    "CategoricalParam",
    "ConfigPathError",
    "FloatParam",
    "IntParam",
    "Param",
    "SearchSpace",
    "SearchSpaceError",
    "apply_params",
    "check_config_paths",
]

_SEGMENT = re.compile(r"[A-Za-z0-9_\-]+")
MAX_INT = 2**53  # integer bounds beyond this (in magnitude) are refused
_SPEC_FIELDS = {
    "int": ("type", "low", "high", "log", "step"),
    "float": ("type", "low", "high", "log"),
    "categorical": ("type", "choices"),
}


class SearchSpaceError(ValueError):
    """An invalid search-space entry or an invalid parameter dict; the message names the key."""


class ConfigPathError(ValueError):
    """A dotted key that does not lead anywhere in the base config; the message names the key."""


def _suggest(word: str, candidates: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or an empty string."""
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class IntParam:
    """Integers ``low, low+step, ..., high`` (both ends included); ``log`` samples log-uniformly."""

    key: str
    low: int
    high: int
    log: bool = False
    step: int = 1

    @property
    def num_values(self) -> int:
        return (self.high - self.low) // self.step + 1

    def to_dict(self) -> dict[str, Any]:
        return {"type": "int", "low": self.low, "high": self.high, "log": self.log, "step": self.step}


@dataclass(frozen=True)
class FloatParam:
    """Reals in ``[low, high]``; ``log`` samples log-uniformly (``low > 0``)."""

    key: str
    low: float
    high: float
    log: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"type": "float", "low": self.low, "high": self.high, "log": self.log}


@dataclass(frozen=True)
class CategoricalParam:
    """One of ``choices`` (JSON scalars: str, int, float or bool)."""

    key: str
    choices: tuple[Any, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "categorical", "choices": list(self.choices)}

    def index_of(self, value: Any) -> int | None:
        """Position of ``value`` in ``choices`` (type-exact: ``True`` is not ``1``), or None."""
        for i, choice in enumerate(self.choices):
            if type(choice) is type(value) and choice == value:
                return i
        # numpy scalars (from optimizer libraries) and 64 vs 64.0 (JSON round trips) compare by
        # value; booleans only ever match booleans
        for i, choice in enumerate(self.choices):
            if isinstance(value, (bool, np.bool_)) == isinstance(choice, bool) and value == choice:
                return i
        return None


Param = Union[IntParam, FloatParam, CategoricalParam]


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise SearchSpaceError(f"search space key {key!r}: must be a non-empty string")
    for segment in key.split("."):
        if not _SEGMENT.fullmatch(segment):
            raise SearchSpaceError(
                f"search space key {key!r}: not a dotted config path (segment {segment!r} must be "
                "non-empty letters, digits, '_' or '-')"
            )
    return key


def _parse_spec(key: str, spec: Any) -> Param:
    if not isinstance(spec, Mapping):
        raise SearchSpaceError(
            f"search space key {key!r}: spec must be a mapping with a 'type', got {spec!r}"
        )
    kind = spec.get("type")
    if kind not in _SPEC_FIELDS:
        raise SearchSpaceError(
            f"search space key {key!r}: 'type' must be one of {sorted(_SPEC_FIELDS)}, got {kind!r}"
            + (_suggest(kind, list(_SPEC_FIELDS)) if isinstance(kind, str) else "")
        )
    allowed = _SPEC_FIELDS[kind]
    for field_name in spec:
        if field_name not in allowed:
            raise SearchSpaceError(
                f"search space key {key!r}: unknown field {field_name!r} for type {kind!r}"
                f"{_suggest(str(field_name), allowed)}; allowed: {list(allowed)}"
            )
    if kind == "categorical":
        return _parse_categorical(key, spec)
    for bound in ("low", "high"):
        if bound not in spec:
            raise SearchSpaceError(f"search space key {key!r}: missing {bound!r}")
    low, high = spec["low"], spec["high"]
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise SearchSpaceError(f"search space key {key!r}: 'log' must be true or false, got {log!r}")
    if kind == "int":
        return _parse_int(key, low, high, log, spec.get("step", 1))
    return _parse_float(key, low, high, log)


def _parse_int(key: str, low: Any, high: Any, log: bool, step: Any) -> IntParam:
    for name, value in (("low", low), ("high", high), ("step", step)):
        if not _is_int(value):
            raise SearchSpaceError(
                f"search space key {key!r}: {name!r} must be an integer for type 'int', got {value!r}"
            )
        if abs(value) > MAX_INT:  # the optimizers (numpy int64, DeepHyper, Optuna) cannot hold more
            raise SearchSpaceError(f"search space key {key!r}: {name!r} must be within +-2**53, got {value}")
    if low > high:
        raise SearchSpaceError(f"search space key {key!r}: low ({low}) must be <= high ({high})")
    if step < 1:
        raise SearchSpaceError(f"search space key {key!r}: step must be >= 1, got {step}")
    if (high - low) % step:
        raise SearchSpaceError(
            f"search space key {key!r}: high - low ({high - low}) must be a multiple of step ({step})"
        )
    if log and low < 1:
        raise SearchSpaceError(f"search space key {key!r}: log scale needs low >= 1, got {low}")
    if log and step != 1:
        raise SearchSpaceError(f"search space key {key!r}: log scale cannot be combined with step")
    return IntParam(key, int(low), int(high), log, int(step))


def _parse_float(key: str, low: Any, high: Any, log: bool) -> FloatParam:
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, int) and abs(value) > MAX_INT:
            raise SearchSpaceError(f"search space key {key!r}: {name!r} must be within +-2**53, got {value}")
        if not _is_real(value) or not math.isfinite(value):
            raise SearchSpaceError(
                f"search space key {key!r}: {name!r} must be a finite number, got {value!r}"
            )
    if not low < high:
        raise SearchSpaceError(f"search space key {key!r}: low ({low}) must be < high ({high})")
    if log and low <= 0:
        raise SearchSpaceError(f"search space key {key!r}: log scale needs low > 0, got {low}")
    return FloatParam(key, float(low), float(high), log)


def _parse_categorical(key: str, spec: Mapping) -> CategoricalParam:
    choices = spec.get("choices")
    if not isinstance(choices, (list, tuple)) or not choices:
        raise SearchSpaceError(
            f"search space key {key!r}: 'choices' must be a non-empty list, got {choices!r}"
        )
    for choice in choices:
        if not isinstance(choice, (str, int, float, bool)):
            raise SearchSpaceError(
                f"search space key {key!r}: choice {choice!r} is not a string, number or boolean"
            )
    if len({(type(c), c) for c in choices}) != len(choices):
        raise SearchSpaceError(f"search space key {key!r}: duplicated choices in {list(choices)}")
    return CategoricalParam(key, tuple(choices))


class SearchSpace:
    """An ordered set of named distributions over dotted config keys."""

    def __init__(self, params: Sequence[Param]):
        keys = [p.key for p in params]
        if len(set(keys)) != len(keys):
            raise SearchSpaceError(f"search space: duplicated keys in {keys}")
        if not params:
            raise SearchSpaceError("search space: needs at least one key")
        self.params: tuple[Param, ...] = tuple(params)
        self._by_key: dict[str, Param] = {p.key: p for p in self.params}

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> "SearchSpace":
        """Parse ``{dotted_key: spec}``; raises :class:`SearchSpaceError` naming the bad key."""
        if not isinstance(spec, Mapping):
            raise SearchSpaceError(f"search space: must be a mapping of dotted keys, got {spec!r}")
        return cls([_parse_spec(_check_key(key), value) for key, value in spec.items()])

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The ``{dotted_key: spec}`` form with every default filled in."""
        return {p.key: p.to_dict() for p in self.params}

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.params]

    def __len__(self) -> int:
        return len(self.params)

    def __getitem__(self, key: str) -> Param:
        return self._by_key[key]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SearchSpace) and self.params == other.params

    def __repr__(self) -> str:
        return f"SearchSpace({list(self.params)!r})"

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise :class:`SearchSpaceError` (naming the key) unless ``params`` is a point of the space."""
        missing = [k for k in self.keys if k not in params]
        if missing:
            raise SearchSpaceError(f"parameters: missing keys {missing}")
        extra = [k for k in params if k not in self._by_key]
        if extra:
            raise SearchSpaceError(
                f"parameters: keys not in the search space {extra}{_suggest(extra[0], self.keys)}"
            )
        for p in self.params:
            _check_value(p, params[p.key])

    def coerce(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Validated copy with native Python types (``int`` for ints, the exact choice objects),
        in the space's key order. Numpy scalars from optimizer libraries come out as Python ones."""
        self.validate(params)
        out: dict[str, Any] = {}
        for p in self.params:
            value = params[p.key]
            if isinstance(p, IntParam):
                out[p.key] = int(value)
            elif isinstance(p, FloatParam):
                out[p.key] = float(value)
            else:
                out[p.key] = p.choices[p.index_of(value)]  # type: ignore[index]
        return out

    def sample_random(self, rng: np.random.Generator) -> dict[str, Any]:
        """One point drawn independently per key (log-uniform where ``log``), from ``rng``."""
        out: dict[str, Any] = {}
        for p in self.params:
            if isinstance(p, IntParam):
                if p.log:
                    u = rng.uniform(math.log(p.low), math.log(p.high + 1))
                    out[p.key] = min(p.high, max(p.low, int(math.floor(math.exp(u)))))
                else:
                    out[p.key] = p.low + p.step * int(rng.integers(0, p.num_values))
            elif isinstance(p, FloatParam):
                if p.log:
                    value = math.exp(rng.uniform(math.log(p.low), math.log(p.high)))
                else:
                    value = float(rng.uniform(p.low, p.high))
                out[p.key] = min(p.high, max(p.low, value))
            else:
                out[p.key] = p.choices[int(rng.integers(0, len(p.choices)))]
        return out


def _check_value(p: Param, value: Any) -> None:
    if isinstance(p, IntParam):
        if not _is_int(value):
            raise SearchSpaceError(f"parameter {p.key!r}: expected an integer, got {value!r}")
        if not p.low <= value <= p.high or (value - p.low) % p.step:
            raise SearchSpaceError(
                f"parameter {p.key!r}: {value} is not in {p.low}..{p.high} step {p.step}"
            )
    elif isinstance(p, FloatParam):
        if not _is_real(value) or not math.isfinite(value):
            raise SearchSpaceError(f"parameter {p.key!r}: expected a finite number, got {value!r}")
        if not p.low <= value <= p.high:
            raise SearchSpaceError(f"parameter {p.key!r}: {value} is not in [{p.low}, {p.high}]")
    elif p.index_of(value) is None:
        raise SearchSpaceError(
            f"parameter {p.key!r}: {value!r} is not one of the choices {list(p.choices)}"
        )


def _walk_to_parent(config: Any, key: str) -> tuple[Any, str | int]:
    """The container holding the last segment of ``key`` and that segment (an index for lists)."""
    segments = key.split(".")
    node = config
    for depth, segment in enumerate(segments):
        where = ".".join(segments[:depth]) or "<top level>"
        last = depth == len(segments) - 1
        if isinstance(node, dict):
            if last:
                return node, segment
            if segment not in node:
                raise ConfigPathError(
                    f"config key {key!r}: {segment!r} not found under {where}"
                    f"{_suggest(segment, [str(k) for k in node])}"
                )
            node = node[segment]
        elif isinstance(node, list):
            if not segment.isdigit() or int(segment) >= len(node):
                raise ConfigPathError(
                    f"config key {key!r}: {where} is a list of {len(node)} items, "
                    f"{segment!r} is not an index in it"
                )
            if last:
                return node, int(segment)
            node = node[int(segment)]
        else:
            raise ConfigPathError(
                f"config key {key!r}: {where} is a {type(node).__name__} value, not a section"
            )
    raise AssertionError("unreachable")  # pragma: no cover


def check_config_paths(base_config: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Raise :class:`ConfigPathError` for the first key whose parent does not exist in the config.

    The parent of every dotted key must be an existing section (a dict, or a list indexed by a
    number); the last segment may be new (a setting the base config leaves at its default)."""
    for key in keys:
        _walk_to_parent(base_config, key)


def _copy_tree(node: Any) -> Any:
    """A copy of a JSON-shaped tree (dicts and lists copied, the values in them shared): what
    ``copy.deepcopy`` gives for a config read from JSON, at a fifth of its cost on rank 0."""
    if isinstance(node, dict):
        return {k: _copy_tree(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy_tree(v) for v in node]
    return node


def apply_params(base_config: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``base_config`` (JSON-shaped: no dict or list of it shared) with each dotted key of
    ``params`` set to its value."""
    config = _copy_tree(dict(base_config))
    for key, value in params.items():
        container, segment = _walk_to_parent(config, key)
        container[segment] = value
    return config
