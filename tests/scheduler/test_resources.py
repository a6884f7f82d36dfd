"""ResourcePool: bucketed best fit, group-local whole nodes, tentative plans, drain and node health."""

import pytest

from scheduler.node_health import NodeHealth, is_node_level_failure
from scheduler.resources import ResourceError, ResourcePool


def test_best_fit_packs_partly_used_node():
    pool = ResourcePool(4, 8)
    pool.allocate(1, [0, 1, 2, 3, 4])  # node 0: 3 free
    pool.allocate(2, [8, 9])  # node 1: 6 free
    assert pool.pick(3) == (5, 6, 7)
    assert pool.pick(4) == (10, 11, 12, 13)
    assert pool.pick(8) == tuple(range(16, 24))


def test_multi_node_prefers_one_group_and_fullest_fit():
    pool = ResourcePool(8, 2, node_group_size=4)  # groups {0..3}, {4..7}
    pool.allocate(1, [0])  # group 0 has 3 whole nodes
    assert pool.pick(6) == (2, 3, 4, 5, 6, 7)  # 3 whole nodes: group 0 (3 whole) is the tightest fit
    assert pool.pick(8) == tuple(range(8, 16))  # 4 whole nodes: the fully free group 1
    # 6 whole nodes: the whole free group 1 first, then 2 of group 0's 3 free nodes, lowest ids
    assert pool.pick(12) == (*range(8, 16), 2, 3, 4, 5)
    assert pool.pick(16) is None  # only 7 whole nodes


def test_exclude_and_counts():
    pool = ResourcePool(4, 2)
    assert pool.pick(2, exclude={0, 1}) == (4, 5)
    assert pool.pick(4, exclude={0}) == (2, 3, 4, 5)
    assert pool.whole_free_nodes == 4 and pool.free_slots == 8 and pool.nodes_with_free(2) == 4


def test_allocate_errors_name_the_slot():
    pool = ResourcePool(2, 2)
    pool.allocate(1, [0])
    with pytest.raises(ResourceError, match="slot 0 already held by trial 1"):
        pool.allocate(2, [0, 1])
    with pytest.raises(ResourceError, match="slot 9 outside 0..3"):
        pool.allocate(3, [9])
    with pytest.raises(ResourceError, match="trial 7 holds no slots"):
        pool.release(7)


def test_tentative_restores_pool():
    pool = ResourcePool(4, 4)
    pool.allocate(1, [0])
    with pool.tentative():
        pool.allocate(2, pool.pick(8))
        assert pool.free_slots == 7
    assert pool.free_slots == 15 and pool.held_by(2) == () and pool.held_by(1) == (0,)


def test_drain_excludes_node_and_release_keeps_counts():
    pool = ResourcePool(3, 2)
    pool.allocate(1, [0])
    pool.drain(0)
    assert pool.free_slots == 4 and pool.pick(1) == (2,)
    pool.release(1)
    assert pool.free_slots == 4 and pool.whole_free_nodes == 2
    with pytest.raises(ResourceError, match="drained node 0"):
        pool.allocate(2, [1])
    pool.undrain(0)
    assert pool.free_slots == 6 and pool.whole_free_nodes == 3


def test_node_health_drains_after_repeated_node_failures():
    pool = ResourcePool(4, 2, hostnames=["a", "b", "c", "d"])
    health = NodeHealth(pool, threshold=2)
    assert health.record([2, 3], ok=False, reason="ValueError: bad lr") == []  # trial's own fault
    assert health.record([2], ok=False, reason="HIP error: device lost") == []
    assert [r.node for r in health.record([3], ok=False, reason="hipErrorNoDevice")] == [1]
    assert [(r.node, r.hostname, r.failures) for r in health.reports] == [(1, "b", 2)]
    assert pool.drained_nodes == {1}
    assert health.record([4], ok=False, reason="RCCL timeout") == []
    health.record([4], ok=True)
    assert health.strikes(2) == 0
    assert is_node_level_failure("CUDA error: an illegal memory access") and not is_node_level_failure(None)


def test_random_operations_match_brute_force():
    import random

    rng = random.Random(7)
    pool = ResourcePool(24, 4, node_group_size=8)
    held = {}
    for step in range(600):
        op = rng.random()
        if op < 0.55:
            n = rng.choice([1, 2, 3, 4, 8, 12, 16])
            slots = pool.pick(n)
            fits = [nd for nd in range(24) if nd not in pool.drained_nodes]
            if n <= 4:
                candidates = [(len(pool.free_slots_of_node(nd)), nd) for nd in fits if len(pool.free_slots_of_node(nd)) >= n]
                expect = None if not candidates else min(candidates)[1]
                assert (slots is None) == (expect is None)
                if slots is not None:
                    assert {pool.node_of(s) for s in slots} == {expect}
            else:
                whole = [nd for nd in fits if len(pool.free_slots_of_node(nd)) == 4]
                assert (slots is None) == (len(whole) < n // 4)
                if slots is not None:
                    assert all(pool.free_on_node(pool.node_of(s)) == 4 for s in slots)
            if slots is not None:
                pool.allocate(step, slots)
                held[step] = slots
        elif op < 0.9 and held:
            tid = rng.choice(sorted(held))
            assert pool.release(tid) == held.pop(tid)
        elif op < 0.95:
            pool.drain(rng.randrange(24))
        else:
            pool.undrain(rng.randrange(24))
        in_service = [nd for nd in range(24) if nd not in pool.drained_nodes]
        assert pool.free_slots == sum(len(pool.free_slots_of_node(nd)) for nd in in_service)
        assert pool.whole_free_nodes == sum(len(pool.free_slots_of_node(nd)) == 4 for nd in in_service)
        assert pool.busy_slots == sum(len(s) for s in held.values())


def _reference_whole_nodes(pool: ResourcePool, k: int, exclude: set[int]) -> list[int] | None:
    """The multi-node rule of ResourcePool.pick written as a plain scan of every group."""
    spn, g_size = pool.slots_per_node, pool.node_group_size
    free = {g: [nd for nd in pool.nodes_of_group(g) if pool.free_on_node(nd) == spn and nd not in exclude]
            for g in range(pool.num_groups)}
    if sum(map(len, free.values())) < k:
        return None
    nodes, remaining, taken = [], k, set()
    while remaining > 0:
        r = min(remaining, g_size)
        fitting = [(len(a), g) for g, a in free.items() if g not in taken and len(a) >= r]
        if fitting:
            _, group = min(fitting)
        else:
            _, group = min((-len(a), g) for g, a in free.items() if g not in taken and a)
        taken.add(group)
        nodes += free[group][:remaining]
        remaining -= min(remaining, len(free[group]))
    return nodes


def test_multi_node_pick_matches_reference_rule_with_exclusions():
    import random

    rng = random.Random(11)
    pool = ResourcePool(60, 2, node_group_size=7)  # a short last group (4 nodes)
    held: dict[int, tuple[int, ...]] = {}
    checked = 0
    for step in range(1500):
        if rng.random() < 0.5 or not held:
            n = rng.choice([1, 2, 2, 4, 6, 10, 16, 30])
            slots = pool.pick(n)
            if slots is not None:
                pool.allocate(step, slots)
                held[step] = slots
        else:
            tid = rng.choice(sorted(held))
            held.pop(tid)
            pool.release(tid)
        if step % 50 == 49:
            node = rng.randrange(60)
            pool.drain(node) if node not in pool.drained_nodes else pool.undrain(node)
        for k in (2, 3, 8, 15):
            exclude = set(rng.sample(range(60), rng.choice([0, 0, 3, 12])))
            expect = _reference_whole_nodes(pool, k, exclude)
            got = pool.pick(2 * k, exclude=exclude)
            assert got == (None if expect is None else tuple(s for nd in expect for s in pool.slots_of_node(nd)))
            checked += expect is not None
    assert checked > 1000  # most of the picks found nodes (the comparison is not vacuous)


def test_whole_nodes_allocation_is_a_tuple_of_slot_ids_checked_per_node():
    import pickle

    from scheduler.resources import WholeNodes

    pool = ResourcePool(6, 4, node_group_size=3)
    got = pool.pick(8)
    assert isinstance(got, WholeNodes) and got.nodes == (0, 1) and got == (0, 1, 2, 3, 4, 5, 6, 7)
    back = pickle.loads(pickle.dumps(got))
    assert type(back) is WholeNodes and back.nodes == (0, 1) and back == got
    pool.allocate(1, [5])  # node 1 is no longer whole
    with pytest.raises(ResourceError, match="trial 2: slot 5 already held by trial 1"):
        pool.allocate(2, WholeNodes([0, 1], 4))
    pool.drain(3)
    with pytest.raises(ResourceError, match="trial 2: slot on drained node 3"):
        pool.allocate(2, WholeNodes([2, 3], 4))
    with pytest.raises(ResourceError, match="trial 2: repeated node"):
        pool.allocate(2, WholeNodes([4, 4], 4))
    held = pool.allocate(2, WholeNodes([4, 5], 4))
    assert held.nodes == (4, 5) and pool.owner_of(19) == 2 and pool.free_slots == 6 * 4 - 4 - 1 - 8  # node 3 drained
    assert pool.whole_free_nodes == 2 and pool.pick(12) is None and pool.pick(8).nodes == (0, 2)
    assert pool.release(2) == tuple(range(16, 24)) and pool.whole_free_nodes == 4


def test_a_trial_avoiding_a_node_waits_for_another_unless_none_is_left() -> None:
    """A retry after a node-level failure (``avoid``) is kept off that node while other nodes in
    service could take it, even when only the avoided node has room now; once every other node is
    drained it may go back."""
    pool = ResourcePool(3, 2)
    assert pool.pick(1, avoid=frozenset({0})) == (2,)  # best fit would be node 0 (lowest id)
    pool.allocate(7, (2, 3, 4, 5))  # nodes 1 and 2 full, node 0 free
    assert pool.pick(1) == (0,)
    assert pool.pick(1, avoid=frozenset({0})) is None and not pool.can_fit(1, frozenset({0}))
    assert pool.pick(4, avoid=frozenset({0})) is None  # 2 nodes' worth: nodes 1 and 2 would do
    pool.release(7)
    pool.drain(1)
    pool.drain(2)
    assert pool.pick(1, avoid=frozenset({0})) == (0,) and pool.can_fit(1, frozenset({0}))
