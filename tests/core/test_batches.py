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
