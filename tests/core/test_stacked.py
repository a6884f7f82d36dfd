"""StackedModels: K models of one architecture in one pass give each model's own outputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from ase.build import bulk
from torch_geometric.data import Batch

from graph_builders.atomic import atoms_to_graph
from graph_builders.schema import HeadRegistry, HeadSpec
from hydragnn_ensemble.model import GraphHeadSpec, HydraModel, ModelSpec, NodeHeadSpec, build_model
from hydragnn_ensemble.model.stacked import StackedModels, stack_key

RADIUS = 4.0
HEADS = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV/atom"), HeadSpec("stress", "graph", 6, "GPa"),
                         HeadSpec("forces", "node", 3, "eV/Å"), HeadSpec("charge", "node", 2)])


def make_spec(**kw: object) -> ModelSpec:
    args: dict[str, object] = dict(
        mpnn_type="SchNet", hidden_dim=8, num_conv_layers=2, heads=HEADS, node_feature_dim=1, radius=RADIUS,
        num_gaussians=10, activation="silu", energy_head="energy", forces_head="forces", stress_head="stress",
        graph_head=GraphHeadSpec(num_sharedlayers=1, dim_sharedlayers=8, num_headlayers=1, dim_headlayers=(8,)),
        node_head=NodeHeadSpec(num_headlayers=1, dim_headlayers=(8,)),
    )
    args.update(kw)
    return ModelSpec(**args)  # type: ignore[arg-type]


def make_models(num: int = 3, **kw: object) -> list[HydraModel]:
    models = []
    for k in range(num):
        torch.manual_seed(k)
        model = build_model(make_spec(**kw)).eval()
        if model.potential_mode:
            model.set_energy_normalisation(0.1 * k - 0.2, 0.5 + 0.25 * k)
        models.append(model)
    return models


def alloy_batch(edge_dim: int = 0) -> Batch:
    """Two rattled Cu/Ni/Pd cells of 8 and 16 atoms (different cells) as one batch."""
    graphs = []
    for seed, (repeat, a) in enumerate((((2, 1, 1), 3.6), ((2, 2, 1), 3.7))):
        atoms = bulk("Cu", "fcc", a=a, cubic=True).repeat(repeat)
        atoms.numbers = np.random.default_rng(seed).choice([28, 29, 46], len(atoms))
        atoms.rattle(0.1, seed=seed)
        graph = atoms_to_graph(atoms, cutoff=RADIUS)
        if edge_dim == 0:
            del graph.edge_attr
        graphs.append(graph)
    return Batch.from_data_list(graphs)


def assert_close(got: torch.Tensor, want: torch.Tensor) -> None:
    scale = float(want.abs().max()) if want.numel() else 0.0
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * scale + 1e-7)


@pytest.mark.parametrize("kw", [
    {},
    {"energy_per_atom": False, "stress_head": None, "activation": "relu", "graph_pooling": "add"},
    {"edge_dim": 1, "use_atomic_numbers": False, "graph_pooling": "max"},
])
def test_stacked_models_give_each_models_outputs(kw):
    models = make_models(**kw)
    batch = alloy_batch(kw.get("edge_dim", 0))
    stacked = StackedModels(models)
    outs, features = stacked.forward_with_embedding(batch, batch.x)
    for k, model in enumerate(models):
        want, embedding = model.forward_with_embedding(batch)
        assert list(outs[k]) == list(want)
        for name, value in want.items():
            assert outs[k][name].shape == value.shape
            assert_close(outs[k][name], value.detach())
        assert_close(features[:, k], embedding.detach())


def test_each_member_reads_its_own_node_features():
    models = make_models()
    batch = alloy_batch()
    xs = [batch.x * (k + 1) - k for k in range(len(models))]
    outs, _ = StackedModels(models).forward_with_embedding(batch, torch.stack(xs, dim=1))
    for k, model in enumerate(models):
        view = batch.clone()
        view.x = xs[k]
        want = model(view)
        for name, value in want.items():
            assert_close(outs[k][name], value.detach())


def test_what_stacks():
    base = make_models(1)[0]
    assert stack_key(base) is not None
    assert stack_key(make_models(1, hidden_dim=12)[0]) != stack_key(base)  # another width: another stack
    for kw in ({"energy_head": None, "forces_head": None, "stress_head": None},  # direct heads
               {"predict_variance": True}, {"activation": "prelu"},
               {"hydragnn_shaped": True}):
        assert stack_key(make_models(1, **kw)[0]) is None, kw
    assert stack_key(make_models(1, mpnn_type="CGCNN")[0]) is None
    with pytest.raises(ValueError, match="one stackable architecture"):
        StackedModels([base, make_models(1, hidden_dim=12)[0]])
    assert dataclasses.replace(base.spec) == base.spec  # the key compares specs by value
