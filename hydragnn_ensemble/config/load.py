"""Load, validate, save HydraGNN configs; dotted-key access for search spaces."""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
import types
import typing
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, ValidationError

from hydragnn_ensemble.config.schema import HydraConfig

_MISSING = object()


class ConfigError(ValueError):
    """An invalid configuration; ``errors`` holds one line per problem, each naming the key."""

    def __init__(self, source: str, errors: list[str]):
        self.source = source
        self.errors = list(errors)
        if len(self.errors) == 1:
            msg = f"{source}: {self.errors[0]}"
        else:
            msg = f"{source}: {len(self.errors)} problems:\n" + "\n".join(
                f"  - {e}" for e in self.errors
            )
        super().__init__(msg)


# --------------------------------------------------------------------------------------------
# schema introspection
# --------------------------------------------------------------------------------------------
def _json_keys(model: type[BaseModel]) -> dict[str, str]:
    """JSON key -> python field name for a model."""
    return {(f.alias or name): name for name, f in model.model_fields.items()}


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel class inside ``annotation`` (``M`` or ``M | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if _submodel(a) is not None]
        if len(models) == 1:
            return _submodel(models[0])
    return None


def _is_open_dict(annotation: Any) -> bool:
    """True for ``dict[...]`` fields (carried along without a schema, e.g. ``Dataset``)."""
    origin = typing.get_origin(annotation)
    if origin is dict:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_open_dict(a) for a in typing.get_args(annotation))
    return False


#: Keys older HydraGNN configs used, and where the value lives now.
_RENAMED: dict[str, str] = {
    "NeuralNetwork.Architecture.model_type": "mpnn_type",
    "NeuralNetwork.Training.learning_rate": "Optimizer.learning_rate",
    "NeuralNetwork.Training.optimizer": "Optimizer.type",
}


def _unknown_key_message(path: str, key: str, valid: list[str]) -> str:
    where = f"{path}.{key}" if path else key
    if where in _RENAMED:
        return f"{where}: unknown key; did you mean {_RENAMED[where]!r}? (older HydraGNN name)"
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if not close:
        lowered = {v.lower(): v for v in valid}
        close = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
        close = [lowered[c] for c in close]
    if close:
        return f"{where}: unknown key; did you mean {close[0]!r}?"
    return f"{where}: unknown key; valid keys here: {', '.join(sorted(valid))}"


def check_unknown_keys(data: Mapping[str, Any], model: type[BaseModel] = HydraConfig,
                       path: str = "") -> list[str]:
    """One message per key in ``data`` (recursively) that the schema does not know."""
    return _known_part(data, model, path)[1]


def _known_part(data: Mapping[str, Any], model: type[BaseModel], path: str) -> tuple[dict[str, Any], list[str]]:
    """``data`` without the keys the schema does not know (recursively), and one message per
    such key: what pydantic then validates, so that every problem is reported in one go."""
    errors: list[str] = []
    known: dict[str, Any] = {}
    keys = _json_keys(model)
    for key, value in data.items():
        if key not in keys:
            errors.append(_unknown_key_message(path, key, list(keys)))
            continue
        sub = _submodel(model.model_fields[keys[key]].annotation)
        if sub is not None and isinstance(value, Mapping):
            value, sub_errors = _known_part(value, sub, f"{path}.{key}" if path else key)
            errors.extend(sub_errors)
        known[key] = value
    return known, errors


def _format_pydantic(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if err["type"] not in ("value_error", "missing", "extra_forbidden"):
            msg = f"{msg} (got {err.get('input')!r})"
        if err["type"] == "missing":
            msg = "required key is missing"
        lines.append(f"{loc}: {msg}" if loc else msg)
    return lines


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------
def config_from_dict(data: Mapping[str, Any], source: str = "<config>") -> HydraConfig:
    """Validate a config dict; raise :class:`ConfigError` naming ``source`` and each bad key."""
    if not isinstance(data, Mapping):
        raise ConfigError(source, [f"top level must be a JSON object, got {type(data).__name__}"])
    if "NeuralNetwork" not in data:
        raise ConfigError(source, [f"no NeuralNetwork section: not a HydraGNN training configuration "
                                   f"(top-level keys: {', '.join(sorted(map(str, data))) or 'none'})"])
    known, problems = _known_part(data, HydraConfig, "")
    try:
        config = HydraConfig.model_validate(known)
    except ValidationError as exc:
        problems += _format_pydantic(exc)
    if problems:  # every problem of the file at once: unknown keys and bad values alike
        raise ConfigError(source, problems)
    return config


def load_config(path: str | os.PathLike) -> HydraConfig:
    """Read and validate a HydraGNN JSON config file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read: {exc.strerror or exc}"]) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(str(path), [f"not valid JSON: {exc}"]) from None
    return config_from_dict(data, str(path))


def save_config(config: HydraConfig, path: str | os.PathLike) -> None:
    """Write ``config`` as JSON (atomically: temporary file + rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(config.to_dict(), fh, indent=4)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _resolve(key: str) -> tuple[list[str], Any]:
    """Check a dotted key against the schema; return its parts and its default (or _MISSING, a
    copy when it is a section or a list: the answer for a key is computed once)."""
    parts, default = _resolve_once(key)
    return list(parts), copy.deepcopy(default) if isinstance(default, (dict, list)) else default


@functools.lru_cache(maxsize=1024)
def _resolve_once(key: str) -> tuple[tuple[str, ...], Any]:
    """:func:`_resolve` of one key against the (fixed) schema: a campaign's rank 0 asks the same
    few keys of every candidate's config."""
    parts = key.split(".")
    if not key or any(not p for p in parts):
        raise ConfigError("<dotted key>", [f"{key!r}: not a dotted key"])
    model: type[BaseModel] | None = HydraConfig
    default: Any = _MISSING
    for depth, part in enumerate(parts):
        if model is None:
            break  # inside an open dict (Dataset, Variables, ds_config): any key is allowed
        keys = _json_keys(model)
        if part not in keys:
            prefix = ".".join(parts[:depth])
            raise ConfigError("<dotted key>", [_unknown_key_message(prefix, part, list(keys))])
        field = model.model_fields[keys[part]]
        sub = _submodel(field.annotation)
        if depth < len(parts) - 1 and sub is None and not _is_open_dict(field.annotation):
            where = ".".join(parts[: depth + 1])
            raise ConfigError("<dotted key>", [f"{where}: is a value, has no key {parts[depth + 1]!r}"])
        model = sub
        if depth == len(parts) - 1 and not field.is_required():
            default = field.get_default(call_default_factory=True)
            if isinstance(default, BaseModel):
                default = default.model_dump(mode="json", by_alias=True, exclude_none=True)
    return tuple(parts), default


def check_dotted_key(key: str) -> None:
    """Raise :class:`ConfigError` (with a did-you-mean suggestion) for a dotted key the schema does
    not know, e.g. ``NeuralNetwork.Architecture.hiden_dim``."""
    _resolve(key)


def get_by_dotted_key(config: Mapping[str, Any] | HydraConfig, key: str) -> Any:
    """Value at ``key`` (e.g. ``"NeuralNetwork.Architecture.hidden_dim"``), the schema default
    when unset; :class:`ConfigError` for a path the schema does not know."""
    parts, default = _resolve(key)
    node: Any = config.to_dict() if isinstance(config, HydraConfig) else config
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            if default is _MISSING:
                raise ConfigError("<dotted key>", [f"{key}: not set and has no default"])
            return default
        node = node[part]
    return node


def epoch_budget(config: Mapping[str, Any] | HydraConfig) -> int:
    """The epochs a trial config trains: ``NeuralNetwork.Training.num_epoch``, the schema's
    default when the config leaves it out (also for a custom trial program's config that is no
    HydraGNN config); :class:`ConfigError` naming the key when it is not a positive integer."""
    try:
        value = get_by_dotted_key(config, "NeuralNetwork.Training.num_epoch")
    except ConfigError:  # a section there is no mapping: the trainer's default applies
        value = _resolve("NeuralNetwork.Training.num_epoch")[1]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("<config>", [f"NeuralNetwork.Training.num_epoch: a positive integer, got {value!r}"])
    return value


def set_by_dotted_key(config: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` in a config dict in place (intermediate sections created as needed).

    The path is checked against the schema (unknown key -> :class:`ConfigError` with a
    suggestion); the value is checked when the dict is validated (:func:`config_from_dict`)."""
    parts, _ = _resolve(key)
    node = config
    for depth, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        elif not isinstance(nxt, dict):
            where = ".".join(parts[: depth + 1])
            raise ConfigError("<dotted key>", [f"{where}: is not a section"])
        node = nxt
    node[parts[-1]] = value
