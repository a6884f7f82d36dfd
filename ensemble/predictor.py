"""The ensemble predictor: weighted mean and uncertainty per head from K trained members.

For each head ``h`` with member predictions ``p_k``, member weights ``u_k`` and mean weights
``w_k`` (the member's per-head weight when the manifest has one (``greedy-per-head``), else
``w_k = u_k``), both normalised to sum 1 over the members that predict ``h``:

* ``mean = sum_k w_k p_k``
* epistemic variance ``sum_k u_k (p_k - mean)^2`` (the weighted spread of the members around the
  mean: with per-head weights the mean may come from one member alone, the spread still from all);
* aleatoric variance ``sum_k u_k var_k`` over the members that predict a variance (trained with
  ``GaussianNLLLoss``; weights renormalised over those members), absent when none does;
* total std ``sqrt(epistemic + aleatoric)``.

Without per-head weights (``topk``, ``greedy``) ``w = u`` and this is the weighted mixture's
mean and variance.

With calibration (:mod:`ensemble.calibration`) every std of head ``h`` is multiplied by the
manifest's scale ``s_h``.

Each input graph is built once, at the largest member radius, and batched once; all members read
the same batch. A member with a smaller radius sees a view of the batch without the edges longer
than its radius. Members can be spread over MPI ranks (``comm``: rank ``r`` runs members
``r, r + size, ...`` and the predictions are all-gathered, so every rank gets the full result)
and over devices (``devices``: members round-robin over the listed torch devices).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Batch, Data

from graph_builders.schema import HeadRegistry, HeadSpec, edge_vectors
from ensemble._shared import EdgeWork, active_work, inference_context, share_geometry
from ensemble.manifest import Manifest, member_checkpoint, read_manifest

#: Graph fields a model reads; everything else (targets, names) is dropped before batching.
INPUT_FIELDS: tuple[str, ...] = ("x", "z", "pos", "edge_index", "edge_attr", "edge_shift", "cell", "pbc")
VARIANCE_SUFFIX = "__var"
RADIUS_TOLERANCE = 1e-6


class PredictionError(ValueError):
    """Inputs the ensemble cannot predict (wrong features, missing fields); names the input."""


@dataclass
class MemberModel:
    """One loaded member: its trial id, weight, model (a ``LoadedModel``), radius and device."""

    trial_id: int
    weight: float
    loaded: Any  # hydragnn_ensemble.train.LoadedModel
    radius: float
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def head_names(self) -> list[str]:
        return list(self.loaded.heads.names)

    @property
    def potential_mode(self) -> bool:
        """Forces/stress by autograd: the member needs gradients at prediction time."""
        return self.loaded.spec.energy_head is not None


@dataclass
class HeadPrediction:
    """One head over all inputs. Graph heads: ``rows`` = graphs; node heads: ``rows`` = all nodes."""

    head: HeadSpec
    mean: np.ndarray  # [rows, dim]
    epistemic_std: np.ndarray  # [rows, dim]
    aleatoric_std: np.ndarray | None  # [rows, dim] or None when no member predicts a variance
    std: np.ndarray  # [rows, dim] total, calibration scale applied
    members: np.ndarray  # [K_h, rows, dim] the members' own predictions
    member_weights: np.ndarray  # [K_h] normalised weights of the mean
    member_ids: list[int]
    scale: float = 1.0


@dataclass
class EnsemblePrediction:
    """Predictions of every head for a list of graphs (``node_ptr`` slices node heads per graph)."""

    heads: dict[str, HeadPrediction]
    num_graphs: int
    node_ptr: np.ndarray  # [num_graphs + 1]

    def rows(self, head: str, graph: int) -> slice:
        """Rows of ``head`` that belong to graph ``graph``."""
        if self.heads[head].head.level == "graph":
            return slice(graph, graph + 1)
        return slice(int(self.node_ptr[graph]), int(self.node_ptr[graph + 1]))


def slim_graph(graph: Data) -> Data:
    """A shallow copy of ``graph`` with only the model inputs (:data:`INPUT_FIELDS`)."""
    out = Data()
    for key in INPUT_FIELDS:
        value = getattr(graph, key, None)
        if value is not None:
            out[key] = value
    return out


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
                share_edge_work: bool = True) -> list[dict[str, np.ndarray]]:
    """Predictions of each member for ``graphs``: ``[{head or head__var: [rows, dim]}]``.

    Graphs are batched once per chunk of ``batch_size``; the batch is moved once to each device
    and, for members with a smaller radius than ``cutoff``, masked once per radius. With
    ``share_edge_work`` the edge vectors and radial geometry of each batch view are computed once
    for all members with the same radius and basis (:mod:`ensemble._shared`). Direct-head members
    run under ``torch.inference_mode`` (potential-mode members need autograd for their forces)."""
    out: list[dict[str, list[np.ndarray]]] = [{} for _ in members]
    shared = [share_geometry(m.loaded.model) if share_edge_work else None for m in members]
    starts = range(0, len(graphs), batch_size)
    if progress:
        from tqdm import tqdm

        starts = tqdm(starts, desc=desc, unit="batch")
    for start in starts:
        chunk = [slim_graph(graphs[i]) for i in range(start, min(start + batch_size, len(graphs)))]
        batch = Batch.from_data_list(chunk)
        on_device: dict[torch.device, Batch] = {}
        masked: dict[tuple[torch.device, float], Batch] = {}
        work: dict[int, EdgeWork] = {}  # one per batch view (by id of the view)
        for k, member in enumerate(members):
            dev = member.device
            if dev not in on_device:
                on_device[dev] = batch.to(dev)
            view = on_device[dev]
            if member.radius < cutoff - RADIUS_TOLERANCE:
                key = (dev, member.radius)
                if key not in masked:
                    with torch.no_grad():
                        lengths = edge_vectors(view).norm(dim=1)
                    masked[key] = mask_long_edges(view, member.radius, lengths)
                view = masked[key]
            view_work = work.setdefault(id(view), EdgeWork(view))
            try:
                with active_work(shared[k], view_work), inference_context(member.potential_mode):
                    pred = member.loaded.predict(view)
            except (RuntimeError, IndexError, ValueError) as exc:
                raise PredictionError(
                    f"member trial {member.trial_id} cannot predict graphs {start}..{start + len(chunk) - 1}: "
                    f"{type(exc).__name__}: {exc}") from exc
            for name, value in pred.items():
                out[k].setdefault(name, []).append(value.detach().to("cpu", torch.float64).numpy())
    return [{name: np.concatenate(parts, axis=0) for name, parts in d.items()} for d in out]


def _normalised(weights: Sequence[float], head: str) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if not w.sum() > 0:
        raise PredictionError(f"head {head!r}: the members that predict it have zero total weight")
    return w / w.sum()


def combine(heads: HeadRegistry, member_ids: Sequence[int], weights: Sequence[float],
            member_preds: Sequence[dict[str, np.ndarray]], num_graphs: int, node_ptr: np.ndarray,
            scales: dict[str, float] | None = None,
            head_weights: Mapping[str, Sequence[float]] | None = None) -> EnsemblePrediction:
    """Weighted mean, epistemic/aleatoric/total std per head (see the module docstring).

    ``head_weights[head]`` (one weight per member, optional) replaces ``weights`` for that head's
    mean; the spread is always weighted by ``weights``."""
    scales = scales or {}
    head_weights = head_weights or {}
    result: dict[str, HeadPrediction] = {}
    for head in heads:
        idx = [k for k, p in enumerate(member_preds) if head.name in p]
        if not idx:
            continue
        u = _normalised([weights[k] for k in idx], head.name)
        w = u if head.name not in head_weights else _normalised(
            [head_weights[head.name][k] for k in idx], head.name)
        stack = np.stack([member_preds[k][head.name] for k in idx])  # [K, rows, dim]
        mean = np.tensordot(w, stack, axes=1)
        epi_var = np.tensordot(u, (stack - mean[None]) ** 2, axes=1)
        var_idx = [j for j, k in enumerate(idx) if head.name + VARIANCE_SUFFIX in member_preds[k]]
        alea_var = None
        if var_idx:
            wv = u[var_idx] / u[var_idx].sum()
            variances = np.stack([member_preds[idx[j]][head.name + VARIANCE_SUFFIX] for j in var_idx])
            alea_var = np.tensordot(wv, variances, axes=1)
        s = float(scales.get(head.name, 1.0))
        total = np.sqrt(epi_var + (alea_var if alea_var is not None else 0.0))
        result[head.name] = HeadPrediction(
            head=head, mean=mean, epistemic_std=s * np.sqrt(epi_var),
            aleatoric_std=None if alea_var is None else s * np.sqrt(alea_var), std=s * total,
            members=stack, member_weights=w, member_ids=[int(member_ids[k]) for k in idx], scale=s)
    return EnsemblePrediction(result, num_graphs, node_ptr)


def node_offsets(graphs: Sequence[Data]) -> np.ndarray:
    """``[0, n_0, n_0 + n_1, ...]``: where each graph's nodes start in node-head rows."""
    counts = np.fromiter((g.num_nodes for g in graphs), dtype=np.int64, count=len(graphs))
    return np.concatenate([[0], np.cumsum(counts)])


def _default_builder() -> Callable[..., Data]:
    from graph_builders.atomic import atoms_to_graph

    return atoms_to_graph


class EnsemblePredictor:
    """Load an ensemble directory and predict with uncertainty (see the module docstring).

    ``devices``: torch devices for the members (round-robin), default CPU. ``comm``: an mpi4py
    communicator to spread the members over ranks. ``graph_builder``: the function that turns a
    structure into a graph (``atoms_to_graph`` by default; called as ``builder(atoms,
    cutoff=...)``). ``verify``: check the members' sha256 on load.
    """

    def __init__(self, ensemble_dir: str | os.PathLike, *, devices: Sequence[str | torch.device] | None = None,
                 comm: Any = None, batch_size: int = 32, verify: bool = True, progress: bool = False,
                 graph_builder: Callable[..., Data] | None = None) -> None:
        from hydragnn_ensemble.train import load_checkpoint

        self.root = Path(ensemble_dir)
        self.manifest: Manifest = read_manifest(self.root, verify=verify)
        self.heads = HeadRegistry.from_json(self.manifest.heads)
        self.cutoff = float(self.manifest.graph_cutoff)
        self.batch_size = int(batch_size)
        self.progress = progress
        self.comm = comm
        self.graph_builder = graph_builder or _default_builder()
        devs = [torch.device(d) for d in (devices or ["cpu"])]
        rank, size = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
        entries = self.manifest.members
        self.member_ids = [m.trial_id for m in entries]
        self.weights = [m.weight for m in entries]
        per_head = sorted({h for m in entries for h in m.head_weights})
        self.head_weights = {h: [m.weight_for(h) for m in entries] for h in per_head}
        self.local_indices = list(range(rank, len(entries), size))
        self.members: list[MemberModel] = []
        for j, k in enumerate(self.local_indices):
            entry = entries[k]
            dev = devs[j % len(devs)]
            loaded = load_checkpoint(member_checkpoint(self.root, entry), device=dev)
            self.members.append(MemberModel(entry.trial_id, entry.weight, loaded, entry.radius, dev))

    @property
    def num_members(self) -> int:
        return len(self.manifest.members)

    @property
    def scales(self) -> dict[str, float]:
        return dict(self.manifest.calibration)

    def build_graph(self, atoms: Any, name: str | None = None) -> Data:
        """The input graph of one structure at the ensemble's cutoff (built once for all members)."""
        return self.graph_builder(atoms, cutoff=self.cutoff, name=name)

    def member_predictions(self, graphs: Sequence[Data]) -> list[dict[str, np.ndarray]]:
        """Every member's own predictions (``[{head: [rows, dim]}]`` in manifest order)."""
        local = run_members(self.members, graphs, cutoff=self.cutoff, batch_size=self.batch_size,
                            progress=self.progress)
        if self.comm is None:
            return local
        gathered = self.comm.allgather(dict(zip(self.local_indices, local)))
        merged: dict[int, dict[str, np.ndarray]] = {}
        for part in gathered:
            merged.update(part)
        return [merged[k] for k in range(self.num_members)]

    def predict_graphs(self, graphs: Sequence[Data]) -> EnsemblePrediction:
        """Predict already-built graphs (schema of :mod:`graph_builders.schema`)."""
        preds = self.member_predictions(graphs)
        return combine(self.heads, self.member_ids, self.weights, preds, len(graphs),
                       node_offsets(graphs), self.scales, self.head_weights)

    def predict_atoms(self, structures: Iterable[Any]) -> EnsemblePrediction:
        """Predict ASE Atoms (or pymatgen structures): each graph built once, then all members run."""
        graphs = [self.build_graph(atoms) for atoms in structures]
        return self.predict_graphs(graphs)

    def predict_split(self, dataset: str | os.PathLike, split: str) -> tuple[EnsemblePrediction, dict[str, np.ndarray]]:
        """Predict one split of a dataset file; returns the prediction and the split's targets."""
        graphs = read_split(dataset, split)
        return self.predict_graphs(graphs), split_targets(graphs, self.heads)


def read_split(dataset: str | os.PathLike, split: str) -> list[Data]:
    """All graphs of ``split`` of the ADIOS2 dataset ``dataset``."""
    from graph_builders.store import GraphStore

    path = Path(dataset)
    if not path.exists():
        raise PredictionError(f"{path}: dataset file does not exist")
    with GraphStore(path) as store:
        if split not in store.split_names:
            raise PredictionError(f"{path}: no split {split!r}; the file has {store.split_names}")
        return [store.get(split, i) for i in range(store.num_graphs(split))]


def split_targets(graphs: Sequence[Data], heads: HeadRegistry) -> dict[str, np.ndarray]:
    """``{head: [rows, dim]}`` targets of ``graphs`` for the heads they carry."""
    out: dict[str, np.ndarray] = {}
    for head in heads:
        if all(getattr(g, head.key, None) is not None for g in graphs):
            out[head.name] = np.concatenate(
                [getattr(g, head.key).to(torch.float64).numpy() for g in graphs], axis=0)
    return out
