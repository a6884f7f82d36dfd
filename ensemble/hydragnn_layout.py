"""The dataset layout HydraGNN's default data path reads, and the export's copy of a dataset in it.

HydraGNN's example training scripts open a dataset with ``AdiosDataset(..., var_config=
config["NeuralNetwork"]["Variables_of_interest"])``. Every sample then goes through HydraGNN's
``update_predicted_values``, which takes a graph-level target from the sample's ``y`` (the graph
features one after another, ``graph_feature_dims`` wide, ``output_index`` counting among them) and
a node-level target from columns of its ``x`` (``node_feature_dims`` wide), and through
``update_atom_features``, which keeps the ``input_node_features`` columns of ``x``. Our store's
files hold every head in ``y`` and only the inputs in ``x``: a node head has nothing to read there,
and a config predicting a subset of the heads meets a ``y`` holding all of them.

:func:`write_hydragnn_dataset` writes the copy that path needs, for the exported heads (graph heads
first, then node heads, in the config's order within each; :func:`exported_heads`):

* ``x``: the source's node features, then each node head's targets (``[N, F + node dims]``);
* ``y``/``y_loc``: the exported heads' targets in HydraGNN's layout, so HydraGNN's other path
  (``AdiosDataset`` without ``var_config``: ``y``/``y_loc`` as stored, all of ``x`` fed to the
  model) reads them too, for configs with graph heads only;
* in potential mode, ``energy`` (the structure's total, ``[1, 1]``) and ``forces`` (``[N, 3]``):
  the names HydraGNN's interatomic-potential loss reads.

Splits, their samples and every other field are copied as they are.
:func:`hydragnn_config` rewrites an exported config to match.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data
from tqdm import tqdm

from graph_builders.schema import TARGET_PREFIX, HeadRegistry, HeadSpec
from graph_builders.store import open_dataset, write_dataset

#: HydraGNN's name for the input columns of ``x`` in ``node_feature_names``.
INPUT_FEATURES_NAME = "node_inputs"


@dataclass(frozen=True)
class ExportedHeads:
    """The heads an exported config predicts, laid out for HydraGNN's default data path."""

    graph: tuple[HeadSpec, ...]
    node: tuple[HeadSpec, ...]
    input_width: int               # columns of the source's x (before the node heads' columns)
    task_weights: dict[str, float]  # the config's weight of every predicted head, by name
    energy: HeadSpec | None = None  # potential mode: the energy head (HydraGNN's one head)
    energy_per_atom: bool = False   # potential mode: the energy head holds energy per atom
    forces: HeadSpec | None = None  # potential mode: the forces head

    @property
    def ordered(self) -> tuple[HeadSpec, ...]:
        """Graph heads, then node heads: the order of ``y`` and of the exported config's lists."""
        return self.graph + self.node

    @property
    def left_out(self) -> dict[str, str]:
        """The predicted heads the HydraGNN config cannot hold, each with why: in potential mode every
        head but the energy and the forces (:func:`potential_left_out_reason`); none otherwise."""
        if self.energy is None:
            return {}
        kept = {self.energy.name} | ({self.forces.name} if self.forces is not None else set())
        return {h.name: potential_left_out_reason(h) for h in self.ordered if h.name not in kept}


def potential_left_out_reason(head: HeadSpec) -> str:
    """Why a potential-mode member's ``head`` (neither its energy nor its forces) has no place in
    HydraGNN's config: HydraGNN's interatomic potential (``enable_interatomic_potential``) trains
    exactly one head, the energy, with forces by autograd (``energy_force_loss`` asserts
    ``num_heads == 1``), and computes no stress."""
    one_head = ("HydraGNN's interatomic potential trains exactly one head, the energy, with forces by autograd "
                "(its energy_force_loss asserts num_heads == 1)")
    if head.level == "graph" and head.dim == 6:
        return f"{one_head}, and computes no stress (no strain derivative); ours reports it as dE/dstrain"
    return f"{one_head}: a {head.level} head of dim {head.dim} beside it is refused"


def exported_heads(config: dict[str, Any], registry: HeadRegistry, input_width: int) -> ExportedHeads:
    """The heads ``config`` predicts on a dataset with ``registry`` and ``input_width`` columns of x."""
    from hydragnn_ensemble.config import config_from_dict, potential_heads, selected_heads
    from hydragnn_ensemble.config.to_spec import energy_is_per_atom

    typed = config_from_dict(config)
    heads = list(selected_heads(typed, registry))
    weights = typed.architecture.task_weights or [1.0] * len(heads)
    energy, forces, _ = potential_heads(typed, registry)
    return ExportedHeads(
        graph=tuple(h for h in heads if h.level == "graph"),
        node=tuple(h for h in heads if h.level == "node"),
        input_width=input_width,
        task_weights={h.name: float(w) for h, w in zip(heads, weights)},
        energy=registry[energy] if energy else None,
        energy_per_atom=energy_is_per_atom(registry[energy]) if energy else False,
        forces=registry[forces] if forces else None,
    )


def hydragnn_config(config: dict[str, Any], heads: ExportedHeads) -> dict[str, Any]:
    """A copy of ``config`` whose ``Variables_of_interest`` describes the dataset
    :func:`write_hydragnn_dataset` writes: heads in :attr:`ExportedHeads.ordered`, ``output_index``
    counting among the graph features or the node features, and HydraGNN's description of both
    (``graph_feature_names`` / ``_dims``, ``node_feature_names`` / ``_dims``), ``task_weights`` in
    that order. In potential mode HydraGNN trains one head, the energy (a graph head it sums over
    atoms: ``graph_pooling: add``), with forces by autograd compared with the sample's ``forces``;
    the energy and forces task weights become its ``energy_peratom_weight`` (or ``energy_weight``
    for a total energy) and ``force_weight``."""
    out = json.loads(json.dumps(config))
    arch, voi = out["NeuralNetwork"]["Architecture"], out["NeuralNetwork"]["Variables_of_interest"]
    predicted = (heads.energy,) if heads.energy is not None else heads.ordered
    voi.update(
        output_names=[h.name for h in predicted],
        type=[h.level for h in predicted],
        output_dim=[h.dim for h in predicted],
        output_index=[heads.graph.index(h) if h.level == "graph" else 1 + heads.node.index(h) for h in predicted],
        graph_feature_names=[h.name for h in heads.graph],
        graph_feature_dims=[h.dim for h in heads.graph],
        node_feature_names=[INPUT_FEATURES_NAME] + [h.name for h in heads.node],
        node_feature_dims=[heads.input_width] + [h.dim for h in heads.node],
    )
    arch["task_weights"] = [heads.task_weights[h.name] for h in predicted]
    if heads.energy is not None:
        weight = heads.task_weights[heads.energy.name]
        arch.update(enable_interatomic_potential=True, graph_pooling="add",
                    energy_weight=0.0 if heads.energy_per_atom else weight,
                    energy_peratom_weight=weight if heads.energy_per_atom else 0.0,
                    force_weight=heads.task_weights[heads.forces.name] if heads.forces else 0.0)
        out["NeuralNetwork"]["Training"]["compute_grad_energy"] = True
    return out


def hydragnn_sample(graph: Data, heads: ExportedHeads) -> Data:
    """One sample of the HydraGNN-shaped copy (see the module docstring); the store adds y/y_loc."""
    exported = {h.key for h in heads.ordered}
    out = Data(**{k: graph[k] for k in graph.keys() if not k.startswith(TARGET_PREFIX) or k in exported})
    if heads.node:
        targets = [graph[h.key].reshape(graph.num_nodes, h.dim).to(graph.x.dtype) for h in heads.node]
        out.x = torch.cat([graph.x] + targets, dim=1)
    if heads.energy is not None:
        energy = graph[heads.energy.key].reshape(1, 1).to(torch.float32)
        out.energy = energy * graph.num_nodes if heads.energy_per_atom else energy
        if heads.forces is not None:
            out.forces = graph[heads.forces.key].reshape(-1, 3).to(torch.float32)
    return out


def write_hydragnn_dataset(source: str | Path, heads: ExportedHeads, out: str | Path,
                           progress: bool = False) -> Path:
    """Write the HydraGNN-shaped copy of the dataset ``source`` for ``heads`` to ``out`` (every split,
    samples in their order; the copy is built in memory, as ``write_dataset`` writes a list)."""
    graphs: list[Data] = []
    splits: dict[str, list[int]] = {}
    with open_dataset(source) as store:
        registry, metadata = store.heads, dict(store.metadata)
        for split in store.split_names:
            n = store.num_graphs(split)
            bar = tqdm(range(n), disable=not progress, desc=f"reading {split}", unit="graph")
            splits[split] = list(range(len(graphs), len(graphs) + n))
            graphs.extend(hydragnn_sample(store.get(split, i), heads) for i in bar)
    kept = HeadRegistry.of(registry[h.name] for h in heads.ordered)
    metadata["hydragnn_layout_of"] = str(source)
    return write_dataset(out, graphs, kept, splits=splits, metadata=metadata, progress=progress)
