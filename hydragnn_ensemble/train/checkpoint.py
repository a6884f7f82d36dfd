"""The best-epoch checkpoint: weights plus everything needed to rebuild and use the model.

The file is a plain dict of tensors, dicts, lists, strings and numbers written with ``torch.save``
and read with ``torch.load(..., weights_only=True)`` (no pickled classes):

``format``, ``version``, ``state_dict``, ``config`` (the HydraGNN config dict), ``model_spec``
(the :class:`ModelSpec` fields, heads as registry JSON), ``heads`` (the dataset's registry JSON),
``normalisation`` (per-head mean/std), ``data`` (dataset widths the spec was derived from),
``epoch``, ``objective``.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from graph_builders.schema import HeadRegistry
from hydragnn_ensemble.config import HydraConfig, config_from_dict, config_to_model_spec
from hydragnn_ensemble.model.spec import GraphHeadSpec, ModelSpec, NodeHeadSpec
from hydragnn_ensemble.run_dir import CHECKPOINT_NAME
from hydragnn_ensemble.train.losses import VARIANCE_SUFFIX
from hydragnn_ensemble.train.data import standardise_x
from hydragnn_ensemble.train.normalisation import HeadStats, Normaliser

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
    torch.save(payload, tmp)
    os.replace(tmp, path)


@dataclass
class LoadedModel:
    """A trained model with what it needs to predict in physical units."""

    model: nn.Module
    spec: ModelSpec
    config: HydraConfig
    normaliser: Normaliser
    dataset_heads: HeadRegistry
    epoch: int
    objective: float
    x_columns: tuple[int, ...] | None
    x_stats: HeadStats | None
    path: Path

    @property
    def heads(self) -> HeadRegistry:
        return self.spec.heads

    def prepare(self, batch):
        """Select and standardise the model's input columns of ``x``; returns a shallow copy."""
        batch = copy.copy(batch)
        x = batch.x
        if self.x_columns is not None:
            x = x[:, list(self.x_columns)]
        if self.x_stats is not None:
            x = standardise_x(x, self.x_stats)
        batch.x = x
        return batch

    def predict(self, batch) -> dict[str, Tensor]:
        """Per-head predictions in physical units (and ``<head>__var`` variances, if predicted)."""
        return self.predict_with_embedding(batch)[0]

    def predict_with_embedding(self, batch) -> tuple[dict[str, Tensor], Tensor]:
        """:meth:`predict` and the trunk's node features (see ``HydraModel.forward_with_embedding``),
        from one pass."""
        self.model.eval()
        physical = set(getattr(self.model, "physical_heads", ()))
        grad = torch.enable_grad() if self.spec.energy_head is not None else torch.no_grad()
        with grad:
            out, embedding = self.model.forward_with_embedding(self.prepare(batch))
        result: dict[str, Tensor] = {}
        for head in self.spec.heads:
            pred = out[head.name].detach()
            result[head.name] = pred if head.name in physical else self.normaliser.denormalise(head.name, pred)
            var_key = head.name + VARIANCE_SUFFIX
            if var_key in out:
                result[var_key] = self.normaliser.denormalise_variance(head.name, out[var_key].detach())
        return result, embedding.detach()


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or unsafe files
        raise CheckpointError(f"{path}: not a readable checkpoint ({_load_failure(exc)})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a hydragnn-ensemble checkpoint")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {payload.get('version')} is not {VERSION}")
    return payload


def _load_failure(exc: Exception) -> str:
    """One line for why ``torch.load(weights_only=True)`` refused a file (torch's own message for
    a pickle spans a screen of advice that does not apply: we never unpickle)."""
    text = str(exc)
    refused = re.search(r"Unsupported global: GLOBAL (\S+)", text)
    if refused:
        return f"it holds a pickled Python object ({refused.group(1)}), which is never loaded (weights_only=True)"
    detail = re.search(r"WeightsUnpickler error:\s*(.+)", text, re.DOTALL)
    if detail:
        first = detail.group(1).strip().splitlines()[0].strip()
        return f"not a torch weights file ({first[:200]})"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__


def _spec_differences(a: ModelSpec, b: ModelSpec) -> list[str]:
    diffs = []
    for f in fields(ModelSpec):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if va != vb:
            diffs.append(f"{f.name}: checkpoint {va!r}, config {vb!r}")
    return diffs


def load_checkpoint(path: str | os.PathLike, config: HydraConfig | None = None,
                    device: str | torch.device = "cpu") -> LoadedModel:
    """Rebuild the model of a checkpoint and load its weights.

    With ``config``, the architecture that config gives on the checkpoint's dataset must equal the
    checkpoint's: otherwise :class:`CheckpointError` names the file and every differing field.
    Weights that do not fit the rebuilt model also raise it (missing/unexpected/misshapen keys).
    """
    from hydragnn_ensemble.model import build_model

    path = Path(path)
    payload = _read(path)
    try:
        spec = spec_from_dict(payload["model_spec"])
        stored_config = config_from_dict(payload["config"], f"{path}:config")
        normaliser = Normaliser.from_dict(payload["normalisation"])
        dataset_heads = HeadRegistry.from_json(payload["heads"])
        info = payload["data"]
    except (KeyError, TypeError) as exc:
        raise CheckpointError(f"{path}: checkpoint is missing or has a malformed field ({exc})") from exc
    if config is not None:
        wanted = config_to_model_spec(
            config, dataset_heads, info["node_feature_dim"], info["edge_dim"],
            info.get("degree_histogram"), use_atomic_numbers=info["has_atomic_numbers"],
            radius=info.get("radius"))
        diffs = _spec_differences(spec, wanted)
        if diffs:
            raise CheckpointError(f"{path}: architecture does not match the config: " + "; ".join(diffs))
    model = build_model(spec)
    state = payload["state_dict"]
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    misshapen = [f"{k} {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
                 for k in own if k in state and state[k].shape != own[k].shape]
    if missing or unexpected or misshapen:
        parts = []
        if missing:
            parts.append(f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")
        if misshapen:
            parts.append(f"shape mismatch {misshapen[:5]}")
        raise CheckpointError(f"{path}: weights do not fit the {spec.mpnn_type} model: " + "; ".join(parts))
    model.load_state_dict(state)
    model.to(device)
    model.eval()
    cols = info.get("x_columns")
    return LoadedModel(model=model, spec=spec, config=stored_config if config is None else config,
                       normaliser=normaliser, dataset_heads=dataset_heads,
                       epoch=int(payload["epoch"]), objective=float(payload["objective"]),
                       x_columns=tuple(cols) if cols is not None else None,
                       x_stats=HeadStats.from_dict(info["x_stats"]) if info.get("x_stats") else None,
                       path=path)
