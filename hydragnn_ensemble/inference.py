"""Trained models in use: :func:`load_checkpoint` rebuilds a trial's best-epoch model and
:class:`LoadedModel` predicts every head in physical units (what the ensemble, the ASE calculator
and ``predict`` run; training lives in :mod:`hydragnn_ensemble.train`)."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from torch import Tensor, nn

from graph_builders.schema import HeadRegistry
from hydragnn_ensemble.config import HydraConfig, config_from_dict, config_to_model_spec
from hydragnn_ensemble.model.geometry import EdgeGeometry
from hydragnn_ensemble.model.heads import VARIANCE_SUFFIX
from hydragnn_ensemble.model.spec import ModelSpec
from hydragnn_ensemble.train.checkpoint import CheckpointError, read_checkpoint, spec_from_dict
from hydragnn_ensemble.train.data import standardise_x
from hydragnn_ensemble.train.normalisation import HeadStats, Normaliser

__all__ = ["CheckpointError", "LoadedModel", "load_checkpoint"]


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
        batch.x = self.input_x(batch.x)
        return batch

    def input_x(self, x: Tensor) -> Tensor:
        """The model's input columns of the node features ``x``, standardised."""
        if self.x_columns is not None:
            x = x[:, list(self.x_columns)]
        if self.x_stats is not None:
            x = standardise_x(x, self.x_stats)
        return x

    def same_inputs(self, other: "LoadedModel") -> bool:
        """Whether ``other`` reads the same columns of ``x``, standardised the same way."""
        if self.x_columns != other.x_columns or (self.x_stats is None) != (other.x_stats is None):
            return False
        return self.x_stats is None or (torch.equal(self.x_stats.mean, other.x_stats.mean)
                                        and torch.equal(self.x_stats.std, other.x_stats.std))

    def physical(self, out: dict[str, Tensor]) -> dict[str, Tensor]:
        """The model's raw outputs (``HydraModel.forward``'s, detached) in physical units."""
        physical = set(getattr(self.model, "physical_heads", ()))
        result: dict[str, Tensor] = {}
        for head in self.spec.heads:
            pred = out[head.name].detach()
            result[head.name] = pred if head.name in physical else self.normaliser.denormalise(head.name, pred)
            var_key = head.name + VARIANCE_SUFFIX
            if var_key in out:
                result[var_key] = self.normaliser.denormalise_variance(head.name, out[var_key].detach())
        return result

    @property
    def geometry_encoder(self) -> nn.Module | None:
        """The encoder a shared edge geometry must match (radius, radial basis); None when the
        model takes no shared geometry (no geometric layers, or potential mode)."""
        if self.spec.energy_head is not None:
            return None
        return getattr(self.model, "geometry", None)

    def predict(self, batch, geometry: EdgeGeometry | None = None) -> dict[str, Tensor]:
        """Per-head predictions in physical units (and ``<head>__var`` variances, if predicted).
        ``geometry``: the batch's edge geometry, computed once for several models (see
        ``HydraModel.forward``)."""
        return self.predict_with_embedding(batch, geometry)[0]

    def predict_with_embedding(self, batch, geometry: EdgeGeometry | None = None) -> tuple[dict[str, Tensor], Tensor]:
        """:meth:`predict` and the trunk's node features (see ``HydraModel.forward_with_embedding``),
        from one pass."""
        self.model.eval()
        grad = torch.enable_grad() if self.spec.energy_head is not None else torch.no_grad()
        with grad:
            out, embedding = self.model.forward_with_embedding(self.prepare(batch), geometry)
        return self.physical(out), embedding.detach()


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
    payload = read_checkpoint(path)
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
