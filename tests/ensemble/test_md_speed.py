"""The calculator's fast path (members of one architecture stacked, one batch per call) gives what
the members run one after another give: energies, forces, stress, their stds, per-member values,
latent distances and the domain. The potential ensemble has two members of hidden width 16 (one
stack) and one of width 12 (run on its own), so both paths run in every call."""

from __future__ import annotations

import numpy as np
import pytest
from ase.build import bulk
from torch_geometric.data import Batch

from ensemble import EnsembleCalculator, EnsemblePredictor
from ensemble.members import collate_graphs, slim_graph


def _alloy(repeat: tuple[int, int, int] = (2, 2, 2), seed: int = 1):
    atoms = bulk("Cu", "fcc", a=3.62, cubic=True).repeat(repeat)
    atoms.numbers = np.random.default_rng(seed).choice([29, 28, 46], len(atoms))
    atoms.rattle(0.05, seed=seed)
    return atoms


def _assert_close(got, want) -> None:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale + 1e-9)


def _assert_same_results(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        if isinstance(value, (bool, list, np.bool_)) or (isinstance(value, np.ndarray) and value.dtype == bool):
            assert np.array_equal(got[key], value), key
        else:
            _assert_close(got[key], value)


def _stacks(predictor: EnsemblePredictor) -> list[list[int]]:
    return [stack.indices for stack in predictor.stacks]


@pytest.mark.parametrize("fixture", ["potential_ensemble", "calibrated_potential_ensemble"])
def test_md_calls_match_the_members_one_after_another(fixture, request):
    root = request.getfixturevalue(fixture)
    fast, slow = EnsemblePredictor(root), EnsemblePredictor(root, stack_members=False)
    widths = [m.loaded.spec.hidden_dim for m in fast.members]
    assert sorted(widths) == [12, 16, 16]
    assert _stacks(fast) == [[k for k, w in enumerate(widths) if w == 16]] and _stacks(slow) == []
    atoms = _alloy()
    start = atoms.positions.copy()
    calcs = [EnsembleCalculator(predictor=p, on_out_of_domain="ignore") for p in (fast, slow)]
    rng = np.random.default_rng(0)
    for _ in range(3):  # MD-like calls: the positions move a little each time
        atoms.positions = start + rng.normal(0.0, 1e-3, start.shape)
        results = []
        for calc in calcs:
            calc.calculate(atoms, ["energy", "forces", "stress"])
            results.append(dict(calc.results))
        _assert_same_results(*results)
        assert results[0]["forces_members"].shape == (3, len(atoms), 3)
    if fixture == "calibrated_potential_ensemble":
        assert {"latent_distance", "in_domain", "forces_in_domain"} <= set(results[0])


def test_batches_of_several_structures_match(potential_ensemble):
    fast, slow = EnsemblePredictor(potential_ensemble), EnsemblePredictor(potential_ensemble, stack_members=False)
    graphs = [fast.build_graph(_alloy(r, seed)) for seed, r in enumerate([(2, 2, 2), (2, 1, 1), (3, 2, 2)])]
    for got, want in zip(fast.member_outputs(graphs), slow.member_outputs(graphs)):
        assert set(got.preds) == set(want.preds)
        for name in want.preds:
            _assert_close(got.preds[name], want.preds[name])
        _assert_close(got.features, want.features)


def test_collate_graphs_is_pygs_batch(potential_ensemble):
    predictor = EnsemblePredictor(potential_ensemble)
    graphs = [predictor.build_graph(_alloy(r, seed)) for seed, r in enumerate([(2, 1, 1), (2, 2, 1)])]
    for chunk in (graphs[:1], graphs):
        ours, pyg = collate_graphs(chunk), Batch.from_data_list([slim_graph(g) for g in chunk])
        assert set(ours.keys()) == set(pyg.keys()) and ours.num_graphs == pyg.num_graphs
        for key in pyg.keys():
            assert np.array_equal(ours[key].numpy(), pyg[key].numpy()), key


def test_a_batch_past_the_cpu_limit_runs_member_by_member_with_the_same_results(potential_ensemble):
    from ensemble.stacking import CPU_STACK_MAX_NODES

    fast, slow = EnsemblePredictor(potential_ensemble), EnsemblePredictor(potential_ensemble, stack_members=False)
    (stack,) = fast.stacks
    assert stack.max_nodes == CPU_STACK_MAX_NODES and stack.runs(CPU_STACK_MAX_NODES)
    assert not stack.runs(CPU_STACK_MAX_NODES + 1)
    big = _alloy((4, 3, 3))  # 144 atoms
    assert len(big) > CPU_STACK_MAX_NODES
    graphs = [fast.build_graph(big)]
    for got, want in zip(fast.member_outputs(graphs), slow.member_outputs(graphs)):
        for name in want.preds:
            _assert_close(got.preds[name], want.preds[name])
