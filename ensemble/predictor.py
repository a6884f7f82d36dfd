"""The ensemble predictor: load an ensemble directory, run its members, combine their answers.

:class:`EnsemblePredictor` builds each input graph once (at the largest member radius), runs all
members on the same batches (:mod:`ensemble.members`), checks the inputs against the training
inputs and measures their latent distance when the ensemble stores an uncertainty model, and
combines everything into one mean and one calibrated std per head with the applicability domain
(:mod:`ensemble.combine`, :mod:`ensemble.uncertainty`).

Members can be spread over MPI ranks (``comm``: rank ``r`` runs members ``r, r + size, ...`` and
the outputs are all-gathered, so every rank gets the full result) and over devices (``devices``:
members round-robin over the listed torch devices).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry
from ensemble.combine import EnsemblePrediction, HeadPrediction, Observation, combine
from ensemble.domain import InputDomain
from ensemble.latent import LatentReference
from ensemble.manifest import EnsembleIntegrityError, Manifest, member_checkpoint, read_manifest, uncertainty_file
from ensemble.members import (
    INPUT_FIELDS,
    MemberModel,
    MemberOutputs,
    PredictionError,
    mask_long_edges,
    node_offsets,
    read_split,
    run_members,
    slim_graph,
    split_targets,
)
from ensemble.stacking import MemberStack, plan_stacks
from ensemble.uncertainty import HeadUncertainty

__all__ = [
    "INPUT_FIELDS", "EnsemblePrediction", "EnsemblePredictor", "HeadPrediction", "MemberModel", "MemberOutputs",
    "Observation", "PredictionError", "combine", "mask_long_edges", "member_prefix", "node_offsets", "read_split",
    "run_members", "slim_graph", "split_targets",
]


def member_prefix(trial_id: int) -> str:
    """Key prefix of a member's arrays in the uncertainty file."""
    return f"trial_{trial_id}/"


def _default_builder() -> Callable[..., Data]:
    from graph_builders.atomic import atoms_to_graph

    return atoms_to_graph


def graph_index(node_ptr: np.ndarray) -> np.ndarray:
    """The graph of every node, from the node offsets."""
    return np.repeat(np.arange(len(node_ptr) - 1), np.diff(node_ptr))


def node_elements(graphs: Sequence[Data]) -> np.ndarray:
    """``z`` of every node (0 for graphs without atomic numbers)."""
    parts = [g.z.numpy() if getattr(g, "z", None) is not None else np.zeros(g.num_nodes, dtype=np.int64)
             for g in graphs]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class EnsemblePredictor:
    """Load an ensemble directory and predict with uncertainty (see the module docstring).

    ``devices``: torch devices for the members (round-robin), default CPU. ``comm``: an mpi4py
    communicator to spread the members over ranks. ``graph_builder``: the function that turns a
    structure into a graph (``atoms_to_graph`` by default; called as ``builder(atoms,
    cutoff=...)``). ``verify``: check the members' sha256 on load. ``stack_members``: run the
    members that share an architecture as one model (:mod:`ensemble.stacking`; False: one after
    another, the same results to float32 rounding).
    """

    def __init__(self, ensemble_dir: str | os.PathLike, *, devices: Sequence[str | torch.device] | None = None,
                 comm: Any = None, batch_size: int = 32, verify: bool = True, progress: bool = False,
                 graph_builder: Callable[..., Data] | None = None, stack_members: bool = True) -> None:
        from hydragnn_ensemble.config import ConfigError, config_from_dict
        from hydragnn_ensemble.inference import CheckpointError, load_checkpoint

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
            path = member_checkpoint(self.root, entry)
            try:  # the checkpoint must hold the model the manifest's config describes
                loaded = load_checkpoint(path, config_from_dict(entry.config, f"member trial {entry.trial_id}"),
                                         device=dev)
            except (CheckpointError, ConfigError) as exc:
                raise EnsembleIntegrityError(f"{self.root}: member trial {entry.trial_id}: {exc}") from None
            self.members.append(MemberModel(entry.trial_id, entry.weight, loaded, entry.radius, dev))
        self.stacks: list[MemberStack] = plan_stacks(self.members) if stack_members else []
        self.domain: InputDomain | None = None
        self.latent: dict[int, LatentReference] = {}
        self.models: dict[str, HeadUncertainty] = {}
        self._load_uncertainty()

    def _load_uncertainty(self) -> None:
        info = self.manifest.uncertainty
        if info is None:
            self.models = {h: HeadUncertainty.from_scale(s) for h, s in self.manifest.calibration.items()}
            return
        self.domain = InputDomain(**info.domain)
        self.models = {h: HeadUncertainty.model_validate(m) for h, m in info.heads.items()}
        path = uncertainty_file(self.root, self.manifest)
        try:
            with np.load(path, allow_pickle=False) as arrays:
                stored = dict(arrays)
        except (OSError, ValueError) as exc:  # pickled objects, not an npz, truncated...
            raise EnsembleIntegrityError(f"{path}: not the ensemble's uncertainty arrays ({exc})") from None
        for trial_id in self.member_ids:
            prefix = member_prefix(trial_id)
            if any(key.startswith(prefix) for key in stored):
                self.latent[trial_id] = LatentReference.from_arrays(stored, prefix)

    @property
    def num_members(self) -> int:
        return len(self.manifest.members)

    @property
    def calibrated(self) -> bool:
        """True when a fitted uncertainty model (or, for older ensembles, std scales) is stored."""
        return bool(self.models)

    def build_graph(self, atoms: Any, name: str | None = None) -> Data:
        """The input graph of one structure at the ensemble's cutoff (built once for all members)."""
        return self.graph_builder(atoms, cutoff=self.cutoff, name=name)

    def member_outputs(self, graphs: Sequence[Data]) -> list[MemberOutputs]:
        """Every member's predictions and node features, in manifest order."""
        local = run_members(self.members, graphs, cutoff=self.cutoff, batch_size=self.batch_size,
                            progress=self.progress, stacks=self.stacks)
        if self.comm is None:
            return local
        gathered = self.comm.allgather(dict(zip(self.local_indices, local)))
        merged: dict[int, MemberOutputs] = {}
        for part in gathered:
            merged.update(part)
        return [merged[k] for k in range(self.num_members)]

    def member_predictions(self, graphs: Sequence[Data]) -> list[dict[str, np.ndarray]]:
        """Every member's own predictions (``[{head: [rows, dim]}]`` in manifest order)."""
        return [o.preds for o in self.member_outputs(graphs)]

    def observe(self, graphs: Sequence[Data], outputs: list[MemberOutputs] | None = None) -> Observation:
        """What the members say about ``graphs``, the input checks and the latent distances (when
        the ensemble stores them), before combining (``outputs``: members already run)."""
        outputs = outputs if outputs is not None else self.member_outputs(graphs)
        ptr = node_offsets(graphs)
        domain = self.domain.check(graphs) if self.domain is not None else None
        distances = None
        if self.latent and len(self.latent) == self.num_members:
            z, index = node_elements(graphs), graph_index(ptr)
            distances = [self.latent[tid].distances(out.features, z, index, len(graphs))
                         for tid, out in zip(self.member_ids, outputs)]
        return Observation(outputs, ptr, domain, distances)

    def combine(self, observation: Observation, models: dict[str, HeadUncertainty] | None = None) -> EnsemblePrediction:
        """The prediction from an observation, with the stored uncertainty models (or ``models``)."""
        return combine(self.heads, self.member_ids, self.weights, observation,
                       self.models if models is None else models, self.head_weights)

    def predict_graphs(self, graphs: Sequence[Data]) -> EnsemblePrediction:
        """Predict already-built graphs (schema of :mod:`graph_builders.schema`)."""
        return self.combine(self.observe(graphs))

    def predict_atoms(self, structures: Iterable[Any]) -> EnsemblePrediction:
        """Predict ASE Atoms (or pymatgen structures): each graph built once, then all members run."""
        graphs = [self.build_graph(atoms) for atoms in structures]
        return self.predict_graphs(graphs)

