"""A trial's full training state at an epoch's end, ``RUN_DIR/training_state.pt``: what a cut trial
resumes from (:mod:`hydragnn_ensemble.train.resume` applies it; the trainer writes it).

Rank 0 writes it after every epoch, atomically (a temporary file renamed over the previous state:
a reader sees the previous complete state or the new one, never part of one; a machine crash may
leave a torn file, which is then refused on reading and ignored). Every rank reads it at the start
with ``torch.load(..., weights_only=True)``. The file is a plain dict of tensors, dicts, lists,
strings and numbers:

``format``, ``version``; ``tensors`` (the small tensors of the fields below, packed into a few:
:mod:`hydragnn_ensemble.train.tensor_pack`); ``identity`` (what it belongs to, :class:`StateIdentity`: the trial
directory's name and JSON texts of the config, the model spec and the data the trial trains on);
``epoch`` (epochs finished, from 1); ``model`` (state dict); ``optimizer`` and ``scheduler`` (their
state dicts; ``scheduler`` None without an LR schedule); ``rng`` (torch CPU, the trial's CUDA device
if it trains on one, numpy and Python ``random``, as tensors and numbers); ``best`` (epoch, objective,
per-head validation errors, and its weights: None when the best epoch is this one, the weights
above); ``early_stopping`` (the trainer's patience counter, None without early stopping);
``elapsed_s`` (seconds the trial had trained at this epoch's end, over all its attempts);
``reserve_s`` (the time budget's reserve for the final test evaluation); ``inference_ms`` (each
epoch's validation milliseconds x processes per graph).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from hydragnn_ensemble.train.checkpoint import describe_load_failure
from hydragnn_ensemble.train.tensor_pack import pack, unpack
from hydragnn_ensemble.untrusted_files import open_regular

FORMAT = "hydragnn-ensemble-training-state"
VERSION = 1


class TrainingStateError(ValueError):
    """A training state file that cannot be read (torn, of another format, malformed)."""


@dataclass(frozen=True)
class StateIdentity:
    """What a training state belongs to: the trial directory's name (the campaign's trial id) and
    canonical JSON texts of the trial's config, its model spec and its data (split sizes and
    normalisation). A state resumes a trial only where all four are equal."""

    trial: str
    config: str
    model: str
    data: str

    @classmethod
    def of(cls, trial: str, config: dict[str, Any], model: dict[str, Any], data: dict[str, Any]) -> "StateIdentity":
        return cls(trial, _canonical(config), _canonical(model), _canonical(data))

    def mismatch(self, other: "StateIdentity") -> str | None:
        """Why a state of ``other`` does not belong here (None: it does)."""
        if other.trial != self.trial:
            return f"it belongs to trial directory {other.trial!r}, not {self.trial!r}"
        for name, what in (("config", "config"), ("model", "model spec"), ("data", "dataset (splits or normalisation)")):
            if getattr(other, name) != getattr(self, name):
                return f"it was written for another {what}"
        return None

    def to_dict(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class TrainingState:
    """The training state after ``epoch`` epochs (see the module docstring)."""

    identity: StateIdentity
    epoch: int
    model: dict[str, Tensor]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any] | None
    rng: dict[str, Any]
    best: dict[str, Any]
    early_stopping: dict[str, Any] | None = None
    elapsed_s: float = 0.0
    reserve_s: float = 0.0
    inference_ms: list[float] = field(default_factory=list)

    def to_payload(self) -> dict[str, Any]:
        """The file's dict: the small tensors packed into a few (:mod:`tensor_pack`)."""
        body, tensors = pack({f.name: getattr(self, f.name) for f in fields(self) if f.name != "identity"})
        return {"format": FORMAT, "version": VERSION, "identity": self.identity.to_dict(), "tensors": tensors, **body}

    @classmethod
    def from_payload(cls, payload: Any) -> "TrainingState":
        """Check a loaded payload's shape; :class:`TrainingStateError` saying what is wrong."""
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise TrainingStateError("not a hydragnn-ensemble training state")
        if payload.get("version") != VERSION:
            raise TrainingStateError(f"training state version {payload.get('version')} is not {VERSION}")
        identity = payload.get("identity")
        if not isinstance(identity, dict) or not all(isinstance(identity.get(f.name), str)
                                                     for f in fields(StateIdentity)):
            raise TrainingStateError("its identity is malformed")
        tensors = payload.get("tensors")
        if not isinstance(tensors, dict) or not isinstance(tensors.get("metas"), list) or not isinstance(
                tensors.get("data"), dict):
            raise TrainingStateError("its packed tensors are malformed")
        try:
            payload = unpack({k: v for k, v in payload.items() if k not in ("identity", "tensors")}, tensors)
        except ValueError as exc:
            raise TrainingStateError(str(exc)) from None
        _expect(payload, "epoch", int, lambda v: v >= 1)
        _expect(payload, "model", dict, lambda v: all(isinstance(t, Tensor) for t in v.values()))
        _expect(payload, "optimizer", dict, lambda v: "state" in v and "param_groups" in v)
        _expect(payload, "scheduler", (dict, type(None)))
        _expect(payload, "rng", dict, lambda v: isinstance(v.get("torch"), Tensor))
        _expect(payload, "best", dict, lambda v: isinstance(v.get("val_errors"), dict))
        _expect(payload, "early_stopping", (dict, type(None)))
        _expect(payload, "elapsed_s", (int, float))
        _expect(payload, "reserve_s", (int, float))
        _expect(payload, "inference_ms", list)
        values = {f.name: payload[f.name] for f in fields(cls) if f.name != "identity"}
        return cls(StateIdentity(**{f.name: identity[f.name] for f in fields(StateIdentity)}), **values)


def write_training_state(path: Path, state: TrainingState) -> int:
    """Write ``state`` atomically (temporary file + ``os.replace``); returns the file's bytes. A
    failure (a full disk) leaves the previous state in place and no temporary file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:  # a file object: torch.save(path) costs ~2 ms more per write
            torch.save(state.to_payload(), fh)
            size = fh.tell()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return size


def read_training_state(path: Path) -> TrainingState:
    """The state in ``path`` (a regular file, loaded with ``weights_only=True`` onto the CPU);
    :class:`TrainingStateError` for anything else than a complete state; FileNotFoundError when
    there is none."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise TrainingStateError(f"it cannot be opened as a file ({exc})") from None
    try:
        with os.fdopen(fd, "rb") as fh:
            payload = torch.load(fh, map_location="cpu", weights_only=True)
    except Exception as exc:  # a torn zip, a pickle, garbage: torch raises several types
        raise TrainingStateError(f"not a readable training state ({describe_load_failure(exc)})") from None
    return TrainingState.from_payload(payload)


# random number generators ----------------------------------------------------------------------------
def capture_rng(device: torch.device) -> dict[str, Any]:
    """The states of torch's CPU generator, ``device``'s CUDA generator (if CUDA), numpy's and
    Python's global generators, as tensors and numbers."""
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    version, internal, gauss_next = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "numpy": {"kind": str(kind), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "python": {"version": int(version), "state": torch.tensor(internal, dtype=torch.int64),
                   "gauss_next": gauss_next},
    }


def restore_rng(rng: dict[str, Any], device: torch.device) -> str | None:
    """Set the generators from :func:`capture_rng`'s dict; a note when the CUDA generator's state
    could not be given back (written on another kind of device), else None."""
    torch.set_rng_state(rng["torch"])
    npy, py = rng["numpy"], rng["python"]
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), int(npy["pos"]),
                         int(npy["has_gauss"]), float(npy["cached_gaussian"])))
    random.setstate((int(py["version"]), tuple(int(v) for v in py["state"].tolist()), py["gauss_next"]))
    cuda = rng.get("cuda")
    if device.type == "cuda" and cuda is not None:
        torch.cuda.set_rng_state(cuda, device)
        return None
    if device.type == "cuda" or cuda is not None:
        return "the CUDA generator's state was not restored (the state was written on another kind of device)"
    return None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _expect(payload: dict[str, Any], key: str, types, check=None) -> None:
    value = payload.get(key)
    if isinstance(value, bool) or not isinstance(value, types) or (check is not None and not check(value)):
        raise TrainingStateError(f"its {key!r} is missing or malformed")
