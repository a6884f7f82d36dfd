"""The epoch plan, work-balanced shares and streamed splits (hydragnn_ensemble.train.batches)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from hydragnn_ensemble.train.batches import EpochBatches, EvalBatches, InMemorySplit, balanced_cuts, epoch_plan, share_of


def _graphs(n: int, seed: int = 0) -> list[Data]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        nodes = int(rng.integers(4, 40))
        edges = int(rng.integers(nodes, nodes * 12))
        out.append(Data(x=torch.full((nodes, 1), float(i)), pos=torch.zeros(nodes, 3),
                        edge_index=torch.randint(0, nodes, (2, edges))))
    return out


@pytest.mark.parametrize("chunk", [1, 4, 7])
def test_an_epoch_visits_every_graph_once_in_runs_of_at_most_a_chunk(chunk):
    plan = epoch_plan(103, 16, chunk, seed=3, epoch=2)
    seen = [i for batch in plan for a, b in batch for i in range(a, b)]
    assert sorted(seen) == list(range(103))
    assert [sum(b - a for a, b in batch) for batch in plan] == [16] * 6 + [7]
    assert all(b - a <= chunk and (a // chunk == (b - 1) // chunk) for batch in plan for a, b in batch)
    assert epoch_plan(103, 16, chunk, 3, 2) == plan and epoch_plan(103, 16, chunk, 3, 3) != plan


def test_balanced_cuts_equalise_work_against_a_brute_force_optimum():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n, parts = int(rng.integers(2, 40)), int(rng.integers(2, 5))
        if n < parts:
            continue
        costs = rng.integers(30, 600, size=n)
        cuts = balanced_cuts(costs, parts)
        assert cuts[0] == 0 and cuts[-1] == n and all(b > a for a, b in zip(cuts, cuts[1:]))
        shares = [costs[a:b].sum() for a, b in zip(cuts, cuts[1:])]
        # each cut is at the whole graph nearest its ideal prefix: no share is off by more than
        # one graph's cost from the ideal
        ideal = costs.sum() / parts
        assert max(abs(s - ideal) for s in shares) <= costs.max() + 1e-9


def test_every_world_size_trains_on_the_same_global_batches_with_balanced_shares():
    split = InMemorySplit(_graphs(90))
    one = EpochBatches(split, 24, seed=5)
    one.set_epoch(1)
    global_batches = [sorted(int(v) for v in b.x[:, 0].unique().tolist()) for b in one]
    for world in (2, 3):
        ranks = [EpochBatches(split, 24, rank=r, world_size=world, seed=5) for r in range(world)]
        for r in ranks:
            r.set_epoch(1)
        per_step = list(zip(*[list(r) for r in ranks]))
        joined = [sorted(int(v) for part in step for v in part.x[:, 0].unique().tolist()) for step in per_step]
        assert joined == global_batches
        for step in per_step:  # work per rank (edges + nodes) within one graph's work of equal
            work = [p.num_edges + p.num_nodes for p in step]
            assert max(work) - min(work) <= max(split.costs(0, 90))


def test_share_of_maps_cuts_back_to_runs():
    runs = [(10, 14), (40, 42), (7, 10)]
    assert share_of(runs, [0, 3, 6, 9], 0) == [(10, 13)]
    assert share_of(runs, [0, 3, 6, 9], 1) == [(13, 14), (40, 42)]
    assert share_of(runs, [0, 3, 6, 9], 2) == [(7, 10)]


def test_evaluation_shards_are_contiguous_and_cover_the_split():
    split = InMemorySplit(_graphs(23))
    seen = []
    for rank in range(3):
        for batch in EvalBatches(split, 5, rank, 3):
            seen += sorted(set(int(v) for v in batch.x[:, 0].tolist()))
    assert seen == list(range(23))


@pytest.mark.parametrize("n, window", [(103, 32), (96, 48), (50, 200)])
def test_a_windowed_epoch_keeps_each_batch_inside_one_window(n, window):
    """Windows of whole batches: every graph once per epoch, each batch's runs inside one window
    (so one process reads each window once), the short last chunk last, seeded and epoch-dependent."""
    plan = epoch_plan(n, 16, 8, seed=3, epoch=2, window=window)
    seen = [i for batch in plan for a, b in batch for i in range(a, b)]
    assert sorted(seen) == list(range(n))
    assert [sum(b - a for a, b in batch) for batch in plan[:-1]] == [16] * (len(plan) - 1)
    for batch in plan:
        assert len({a // window for a, b in batch} | {(b - 1) // window for a, b in batch}) == 1
    if n % 8:
        assert plan[-1][-1] == (n - n % 8, n)
    # the windows are visited one after another (a window's batches are consecutive), so one kept
    # window serves them all; only the short last chunk may come back to its window at the end
    order = [batch[0][0] // window for batch in (plan[:-1] if n % 8 else plan)]
    changes = sum(1 for w, v in zip(order, order[1:]) if w != v)
    assert changes == len(set(order)) - 1
    assert epoch_plan(n, 16, 8, 3, 2, window=window) == plan
    assert epoch_plan(n, 16, 8, 3, 3, window=window) != plan


def _periodic_dataset(path, count: int):
    """A small periodic alloy dataset in HydraGNN's layout (its reader derives ``edge_shift``)."""
    from graph_builders.datasets.alloy import RANDOM_ONLY, make_alloy_dataset
    from graph_builders.store import write_dataset

    labelled = make_alloy_dataset(num_structures=count, elements=("Cu", "Ni"), components=(2, 2), sizes=(8,),
                                  mix=RANDOM_ONLY, seed=4, progress=False)
    return write_dataset(path, labelled.graphs, labelled.heads, seed=0, fractions=(0.8, 0.1, 0.1))


def test_a_kept_window_gives_the_batches_read_run_by_run(tmp_path):
    """One process keeps windows, a data-parallel one reads its runs: the same batches, tensor for
    tensor (edge_shift derived from HydraGNN's Cartesian shifts either way), and serving a batch
    never writes into the kept window."""
    from graph_builders.store import GraphStore
    from hydragnn_ensemble.train.data import FieldSelection, StoreSource, prepare_data

    path = _periodic_dataset(tmp_path / "alloys.bp", 60)
    source = StoreSource(path)
    fields = FieldSelection(tuple(h.key for h in source.heads), None, True, True)
    split = prepare_data(source, source.heads, fields, where="alloys", preload=False).splits["trainset"]
    plan = epoch_plan(len(split), 8, 4, seed=1, epoch=0, window=16)
    split.keep_windows(0)
    direct = [split.batch(runs) for runs in plan]
    split.keep_windows(16)
    windowed = [split.batch(runs) for runs in plan]
    for a, b in zip(direct, windowed):
        assert sorted(a.keys()) == sorted(b.keys())
        for key in a.keys():
            torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    again = [split.batch(runs) for runs in plan]
    for a, b in zip(direct, again):
        torch.testing.assert_close(a.edge_index, b.edge_index, rtol=0, atol=0)
    # the derived integer offsets give back the stored edge lengths (an independent check of the
    # derivation: edge_attr is stored, edge_shift is not)
    from graph_builders.schema import edge_vectors

    with GraphStore(path) as store:
        assert "edge_shift" not in store.stored_keys("trainset", ["edge_shift"])
    for batch in windowed:
        assert bool((batch.edge_shift == batch.edge_shift.round()).all())
        torch.testing.assert_close(edge_vectors(batch).norm(dim=1), batch.edge_attr[:, 0], rtol=1e-5, atol=1e-5)
    assert any(bool(batch.edge_shift.abs().sum() > 0) for batch in windowed)
