"""ResourcePool: bucketed best fit, group-local whole nodes, tentative plans, drain and node health."""

import pytest

from scheduler.resources import NodeHealth, ResourceError, ResourcePool, is_node_level_failure


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
    assert pool.pick(12) is None or len(pool.pick(12)) == 12
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
    assert health.record([3], ok=False, reason="hipErrorNoDevice") == [1]
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
