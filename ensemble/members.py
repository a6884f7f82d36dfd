"""Running the members: one batch per chunk of graphs for all of them, predictions and features.

Each input graph is built once, at the largest member radius, and batched once; all members read
the same batch. A member with a smaller radius sees a view of the batch without the edges longer
than its radius. With ``share_edge_work`` the edge vectors and radial geometry of each batch view
are computed once for all members with the same radius and basis (:mod:`ensemble.edge_work`).
Besides its predictions, every member hands back its node features (the trunk's layer outputs,
``HydraModel.forward_with_embedding``): what the latent distance (:mod:`ensemble.latent`) reads.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Batch, Data

from graph_builders.schema import HeadRegistry, edge_vectors
from ensemble.edge_work import EdgeWork, inference_context
from ensemble.stacking import MemberStack
from hydragnn_ensemble.train.data import assembled_batch

#: Graph fields a model reads; everything else (targets, names) is dropped before batching.
INPUT_FIELDS: tuple[str, ...] = ("x", "z", "pos", "edge_index", "edge_attr", "edge_shift", "cell", "pbc")
RADIUS_TOLERANCE = 1e-6


class PredictionError(ValueError):
    """Inputs the ensemble cannot predict (wrong features, missing fields); names the input."""


@dataclass
class MemberModel:
    """One loaded member: its trial id, weight, model (a ``LoadedModel``), radius and device."""

    trial_id: int
    weight: float
    loaded: Any  # hydragnn_ensemble.inference.LoadedModel
    radius: float
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def potential_mode(self) -> bool:
        """Forces/stress by autograd: the member needs gradients at prediction time."""
        return self.loaded.spec.energy_head is not None


@dataclass
class MemberOutputs:
    """One member's predictions (``{head or head__var: [rows, dim]}``) and node features ``[N, D]``."""

    preds: dict[str, np.ndarray]
    features: np.ndarray


def slim_graph(graph: Data) -> Data:
    """A shallow copy of ``graph`` with only the model inputs (:data:`INPUT_FIELDS`)."""
    out = Data()
    for key in INPUT_FIELDS:
        value = getattr(graph, key, None)
        if value is not None:
            out[key] = value
    return out


def collate_graphs(graphs: Sequence[Data]) -> Batch:
    """``Batch.from_data_list`` of the graphs' model inputs (:func:`slim_graph`), without PyG's
    per-call set-up and per-graph bookkeeping: the fields concatenated, ``edge_index`` offset,
    ``batch`` and ``ptr``. Graphs whose input fields differ go through PyG (and its errors)."""
    keys = [key for key in INPUT_FIELDS if getattr(graphs[0], key, None) is not None]
    if any(getattr(g, key, None) is None for g in graphs[1:] for key in keys) or any(
            getattr(g, key, None) is not None for g in graphs[1:] for key in INPUT_FIELDS if key not in keys):
        return Batch.from_data_list([slim_graph(g) for g in graphs])
    counts = np.array([int(g.num_nodes) for g in graphs], dtype=np.int64)
    values = {}
    for key in keys:
        parts = [g[key] for g in graphs]
        if key == "edge_index":
            offsets = np.cumsum(counts) - counts
            parts = [part + int(offset) if offset else part for part, offset in zip(parts, offsets)]
            values[key] = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        else:
            values[key] = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)
    return assembled_batch(values, counts)


def mask_long_edges(batch: Batch, radius: float, lengths: torch.Tensor) -> Batch:
    """A shallow copy of ``batch`` without the edges longer than ``radius``."""
    keep = lengths <= radius + RADIUS_TOLERANCE
    view = copy.copy(batch)
    view.edge_index = batch.edge_index[:, keep]
    for key in ("edge_attr", "edge_shift"):
        value = getattr(batch, key, None)
        if value is not None:
            view[key] = value[keep]
    return view


def run_members(members: Sequence[MemberModel], graphs: Sequence[Data], *, cutoff: float,
                batch_size: int = 32, progress: bool = False, desc: str = "ensemble",
                share_edge_work: bool = True, stacks: Sequence[MemberStack] = ()) -> list[MemberOutputs]:
    """Predictions and node features of each member for ``graphs``.

    Graphs are batched once per chunk of ``batch_size``; the batch is moved once to each device
    and, for members with a smaller radius than ``cutoff``, masked once per radius. With
    ``share_edge_work`` the edge vectors and radial geometry of each batch view are computed once
    for all members with the same radius and basis (:mod:`ensemble.edge_work`). Direct-head members
    run under ``torch.inference_mode`` (potential-mode members need autograd for their forces).
    The members of each of ``stacks`` (:func:`ensemble.stacking.plan_stacks`) run as one model on
    the batches the stack takes (:meth:`~ensemble.stacking.MemberStack.runs`)."""
    out: list[dict[str, list[np.ndarray]]] = [{} for _ in members]
    features: list[list[np.ndarray]] = [[] for _ in members]
    starts = range(0, len(graphs), batch_size)
    if progress:
        from tqdm import tqdm

        starts = tqdm(starts, desc=desc, unit="batch")
    for start in starts:
        chunk = [graphs[i] for i in range(start, min(start + batch_size, len(graphs)))]
        views = _BatchViews(collate_graphs(chunk), cutoff)
        running = [stack for stack in stacks if stack.runs(views.batch.num_nodes)]
        stacked = {k for stack in running for k in stack.indices}
        work: dict[int, EdgeWork] = {}  # one per batch view (by id of the view)

        def record(k: int, pred: dict[str, torch.Tensor], node_features: torch.Tensor) -> None:
            for name, value in pred.items():
                out[k].setdefault(name, []).append(value.detach().to("cpu", torch.float64).numpy())
            features[k].append(node_features.to("cpu", torch.float32).numpy())

        for k, member in enumerate(members):
            if k in stacked:
                continue
            view = views.view(member.device, member.radius)
            geometry = None
            if share_edge_work:
                geometry = work.setdefault(id(view), EdgeWork(view)).geometry_for(member.loaded.geometry_encoder)
            with _naming([member.trial_id], start, len(chunk)), inference_context(member.potential_mode):
                record(k, *member.loaded.predict_with_embedding(view, geometry))
        for stack in running:
            first = members[stack.indices[0]]
            view = views.view(first.device, first.radius)
            with _naming([members[k].trial_id for k in stack.indices], start, len(chunk)), inference_context(True):
                for k, result in zip(stack.indices, stack.predict_with_embedding(view)):
                    record(k, *result)
    return [MemberOutputs({name: np.concatenate(parts, axis=0) for name, parts in d.items()},
                          np.concatenate(f, axis=0) if f else np.zeros((0, 0), dtype=np.float32))
            for d, f in zip(out, features)]


class _BatchViews:
    """A batch as each member reads it: moved once to each device, masked once per smaller radius."""

    def __init__(self, batch: Batch, cutoff: float) -> None:
        self.batch, self.cutoff = batch, cutoff
        self.on_device: dict[torch.device, Batch] = {}
        self.masked: dict[tuple[torch.device, float], Batch] = {}

    def view(self, device: torch.device, radius: float) -> Batch:
        if device not in self.on_device:
            self.on_device[device] = self.batch.to(device)
        view = self.on_device[device]
        if radius >= self.cutoff - RADIUS_TOLERANCE:
            return view
        key = (device, radius)
        if key not in self.masked:
            with torch.no_grad():
                lengths = edge_vectors(view).norm(dim=1)
            self.masked[key] = mask_long_edges(view, radius, lengths)
        return self.masked[key]


@contextmanager
def _naming(trial_ids: list[int], start: int, count: int) -> Iterator[None]:
    """A model's failure on a batch as a :class:`PredictionError` naming the members and graphs."""
    try:
        yield
    except (RuntimeError, IndexError, ValueError) as exc:
        who = (f"member trial {trial_ids[0]}" if len(trial_ids) == 1
               else f"members (trials {', '.join(map(str, trial_ids))}, run as one)")
        raise PredictionError(f"{who} cannot predict graphs {start}..{start + count - 1}: "
                              f"{type(exc).__name__}: {exc}") from exc


def node_offsets(graphs: Sequence[Data]) -> np.ndarray:
    """``[0, n_0, n_0 + n_1, ...]``: where each graph's nodes start in node-head rows."""
    counts = np.fromiter((g.num_nodes for g in graphs), dtype=np.int64, count=len(graphs))
    return np.concatenate([[0], np.cumsum(counts)])


def read_split(dataset: str | os.PathLike, split: str) -> list[Data]:
    """All graphs of ``split`` of the ADIOS2 dataset ``dataset``."""
    from graph_builders.store import open_dataset

    path = Path(dataset)
    if not path.exists():
        raise PredictionError(f"{path}: dataset file does not exist")
    with open_dataset(path) as store:
        if split not in store.split_names:
            raise PredictionError(f"{path}: no split {split!r}; the file has {store.split_names}")
        return store.read_range(split, 0, store.num_graphs(split))  # in blocks: one read per field


def split_targets(graphs: Sequence[Data], heads: HeadRegistry) -> dict[str, np.ndarray]:
    """``{head: [rows, dim]}`` targets of ``graphs`` for the heads they carry."""
    out: dict[str, np.ndarray] = {}
    for head in heads:
        if all(getattr(g, head.key, None) is not None for g in graphs):
            out[head.name] = np.concatenate(
                [getattr(g, head.key).to(torch.float64).numpy() for g in graphs], axis=0)
    return out
