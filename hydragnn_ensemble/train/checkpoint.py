"""The best-epoch checkpoint file: weights plus everything needed to rebuild and use the model
(written here by the trainer; read back into a model by :mod:`hydragnn_ensemble.inference`).

The file is a plain dict of tensors, dicts, lists, strings and numbers written with ``torch.save``
and read with ``torch.load(..., weights_only=True)`` (no pickled classes):

``format``, ``version``, ``state_dict``, ``config`` (the HydraGNN config dict), ``model_spec``
(the :class:`ModelSpec` fields, heads as registry JSON), ``heads`` (the dataset's registry JSON),
``normalisation`` (per-head mean/std), ``data`` (dataset widths the spec was derived from),
``epoch``, ``objective``.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from graph_builders.schema import HeadRegistry
from hydragnn_ensemble.config import HydraConfig
from hydragnn_ensemble.model.layers import MPNN_TYPES
from hydragnn_ensemble.model.spec import GraphHeadSpec, ModelSpec, NodeHeadSpec
from hydragnn_ensemble.train.normalisation import Normaliser

FORMAT = "hydragnn-ensemble-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read, or does not match the requested architecture."""


def spec_to_dict(spec: ModelSpec) -> dict[str, Any]:
    """ModelSpec -> plain dict (heads as registry JSON, tuples as lists)."""
    d = {f.name: getattr(spec, f.name) for f in fields(spec)}
    d["heads"] = spec.heads.to_json()
    d["graph_head"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(spec.graph_head).items()}
    d["node_head"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(spec.node_head).items()}
    if spec.pna_degree_histogram is not None:
        d["pna_degree_histogram"] = list(spec.pna_degree_histogram)
    return d


def spec_from_dict(d: dict[str, Any]) -> ModelSpec:
    """Inverse of :func:`spec_to_dict`."""
    d = dict(d)
    d["heads"] = HeadRegistry.from_json(d["heads"])
    g = dict(d["graph_head"])
    g["dim_headlayers"] = tuple(g["dim_headlayers"])
    n = dict(d["node_head"])
    n["dim_headlayers"] = tuple(n["dim_headlayers"])
    d["graph_head"], d["node_head"] = GraphHeadSpec(**g), NodeHeadSpec(**n)
    if "radial_filter" not in d:  # saved before the option: no layer had the filter
        family = MPNN_TYPES.get(d.get("mpnn_type", ""))
        had_none = family is not None and family.radial_filter_option and not d.get("hydragnn_shaped", False)
        d["radial_filter"] = not had_none
    if d.get("pna_degree_histogram") is not None:
        d["pna_degree_histogram"] = tuple(d["pna_degree_histogram"])
    return ModelSpec(**d)


def save_checkpoint(path: str | os.PathLike, *, model: nn.Module, config: HydraConfig,
                    spec: ModelSpec, dataset_heads: HeadRegistry, normaliser: Normaliser,
                    data_info: dict[str, Any], epoch: int, objective: float,
                    state_dict: dict[str, Tensor] | None = None) -> None:
    """Write the checkpoint atomically (temporary file + rename)."""
    path = Path(path)
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "state_dict": {k: v.detach().cpu() for k, v in (state_dict or model.state_dict()).items()},
        "config": config.to_dict(),
        "model_spec": spec_to_dict(spec),
        "heads": dataset_heads.to_json(),
        "normalisation": normaliser.to_dict(),
        "data": dict(data_info),
        "epoch": int(epoch),
        "objective": float(objective),
    }
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:  # a file object: torch.save(path) costs ~2 ms more per write
            torch.save(payload, fh)
        os.replace(tmp, path)
    except BaseException:  # a full disk leaves no partial temporary file behind
        tmp.unlink(missing_ok=True)
        raise


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The payload of a checkpoint file (loaded with ``weights_only=True``); :class:`CheckpointError`
    naming the file when it is missing, unreadable, of another format or version."""
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or unsafe files
        raise CheckpointError(f"{path}: not a readable checkpoint ({describe_load_failure(exc)})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a hydragnn-ensemble checkpoint")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {payload.get('version')} is not {VERSION}")
    return payload


def describe_load_failure(exc: Exception) -> str:
    """One line for why ``torch.load(weights_only=True)`` refused a file. torch's own message for a
    pickle advises re-running with ``weights_only=False``, which would run whatever code the file
    holds: that advice is never repeated; the refusal says what the file holds and why it stays
    unloaded."""
    text = str(exc)
    refused = re.search(r"GLOBAL (\S+)", text)
    if refused:
        name = refused.group(1).rstrip(".,:")
        return (f"it holds a pickled Python object ({name}), which is never loaded: unpickling it could run "
                "arbitrary code (read with weights_only=True)")
    if "Weights only load failed" in text or "WeightsUnpickler" in text:
        detail = re.search(r"WeightsUnpickler error:\s*(.+)", text, re.DOTALL)
        first = detail.group(1).strip().splitlines()[0].strip() if detail else "unsupported content"
        return f"not a torch weights file ({first[:200]}); it is never unpickled (weights_only=True)"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__
