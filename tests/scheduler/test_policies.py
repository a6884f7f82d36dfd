"""Placement policies: invariants under random workloads and failures, reservations, starvation,
the fixed-block recipe's hand-computable makespan."""

import numpy as np
import pytest

from scheduler.placement import TrialRequest, make_policy, policy_names
from scheduler.resources import ResourcePool
from scheduler.simulator import SimConfig, SimTrial, simulate

POLICIES = policy_names()  # every registered policy (the registry is the only list)


def random_trials(n, spn, nodes, seed, error=0.5):
    rng = np.random.default_rng(seed)
    sizes = [1, 2, 4, spn] + [spn * k for k in (2, 4) if k <= nodes]
    out = []
    for tid in range(n):
        size = int(rng.choice(sizes))
        pred = float(rng.uniform(1, 20))
        out.append(SimTrial(tid, size, pred, pred * float(np.exp(error * rng.standard_normal()))))
    return out


class InvariantChecker:
    """Hook: checks pool, policy and running set after every simulator event."""

    def __init__(self):
        self.starts = {}
        self.events = 0
        self.last = None

    def __call__(self, st):
        self.events += 1
        owners = {}
        for tid, slots in st.running.items():
            assert st.pool.held_by(tid) == tuple(slots)
            for s in slots:
                assert s not in owners, f"slot {s} double-booked by {owners[s]} and {tid}"
                owners[s] = tid
        assert st.pool.busy_slots == len(owners)
        pending = {r.trial_id for r in st.policy.pending}
        assert not pending & set(st.running), "a trial is both pending and running"
        self.last = (st.pool.busy_slots, len(st.running), len(pending))


@pytest.mark.parametrize("policy", POLICIES)
def test_invariants_random_workload_with_failures(policy):
    trials = random_trials(120, 4, 8, seed=3)
    check = InvariantChecker()
    cfg = SimConfig(nodes=8, gpus_per_node=4, policy=policy, block_nodes=2, node_group_size=4,
                    failure_rate=0.15, bad_nodes=1, seed=5)
    result = simulate(trials, cfg, hook=check)
    assert check.last == (0, 0, 0)  # every slot returned, nothing left
    done = {r.trial_id for r in result.records if r.ok}
    failed_out = {r.trial_id for r in result.records if not r.ok and r.attempt == cfg.retries + 1}
    assert done | failed_out == set(range(120))
    for tid in range(120):  # attempts of one trial never overlap
        spans = sorted((r.start, r.end) for r in result.records if r.trial_id == tid)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert result.summary["failed_attempts"] > 0
    if policy != "fixed-block":
        assert [d["node"] for d in result.summary["drained_nodes"]]  # the bad node was drained


def test_reservation_not_delayed_by_backfill_with_exact_estimates():
    trials = random_trials(200, 4, 8, seed=11, error=0.0)
    first_res = {}

    def hook(st):
        r = st.policy.reservation
        if r is not None:
            first_res.setdefault(r.trial_id, r.start)

    result = simulate(trials, SimConfig(nodes=8, gpus_per_node=4, node_group_size=4), hook=hook)
    starts = {r.trial_id: r.start for r in result.records}
    assert len(first_res) > 5
    for tid, promised in first_res.items():
        assert starts[tid] <= promised + 1e-9, f"trial {tid} started {starts[tid]} after its reservation {promised}"


def test_no_starvation_of_large_trial_under_stream_of_small_ones():
    pool = ResourcePool(4, 4)
    policy = make_policy("load-aware")
    running = {}  # tid -> end
    big_start = None
    next_id = 1
    policy.submit(TrialRequest(0, 16, predicted_seconds=5.0))  # the whole machine
    now = 0.0
    for step in range(200):
        now = step * 0.5
        for tid, end in list(running.items()):
            if end <= now:
                pool.release(tid)
                policy.finished(tid, now)
                del running[tid]
        for _ in range(3):  # small trials keep arriving, more than the machine can take
            policy.submit(TrialRequest(next_id, 1, predicted_seconds=4.0, submit_time=now))
            next_id += 1
        for d in policy.schedule(pool, now):
            pool.allocate(d.trial_id, d.slots)
            running[d.trial_id] = now + (5.0 if d.trial_id == 0 else 4.0)
            if d.trial_id == 0:
                big_start = now
    assert big_start is not None and big_start <= 4.0  # reservation: the first small ones end by 4 s


def test_fifo_blocks_and_skip_does_not():
    for name, expect in (("fifo", [0]), ("fifo-skip", [0, 2])):
        pool = ResourcePool(2, 4)
        policy = make_policy(name)
        for tid, size in enumerate([4, 8, 2]):
            policy.submit(TrialRequest(tid, size))
        pool.allocate(99, [4, 5])
        assert [d.trial_id for d in policy.schedule(pool, 0.0)] == expect


def test_fixed_block_hand_computed_makespan():
    # 4 nodes x 2 slots, blocks of 2 nodes -> 2 blocks; FIFO durations 3,1,2,4,1:
    # block A: t0 [0,3], t3 [3,7]; block B: t1 [0,1], t2 [1,3], t4 [3,4] -> makespan 7
    trials = [SimTrial(i, 1, d, d) for i, d in enumerate([3.0, 1.0, 2.0, 4.0, 1.0])]
    result = simulate(trials, SimConfig(nodes=4, gpus_per_node=2, policy="fixed-block", block_nodes=2))
    s = result.summary
    assert s["makespan_s"] == 7.0
    assert s["utilisation"] == pytest.approx(11.0 / (8 * 7.0))
    assert sorted((r.trial_id, r.start, len(r.held)) for r in result.records) == [
        (0, 0.0, 4), (1, 0.0, 4), (2, 1.0, 4), (3, 3.0, 4), (4, 3.0, 4)]


def test_unknown_policy_name():
    with pytest.raises(ValueError, match="placement 'nope' is not available"):
        make_policy("nope")


def test_moldable_tail_widens_last_trials_only():
    from scheduler.placement import LoadAwarePolicy

    pool = ResourcePool(4, 4)
    policy = LoadAwarePolicy(tail_margin=1.0)  # exact estimates: no safety margin
    alts = ((8, 5.0), (16, 2.5))
    # enough work to fill the machine for a long time: nobody is widened
    for tid in range(8):
        policy.submit(TrialRequest(tid, 4, predicted_seconds=10.0, alternatives=alts))
    first = policy.schedule(pool, 0.0)
    assert [len(d.slots) for d in first] == [4, 4, 4, 4]
    for d in first:
        pool.allocate(d.trial_id, d.slots)
    for d in first:
        pool.release(d.trial_id)
        policy.finished(d.trial_id, 10.0)
    # the last 4 trials: ideal finish = 10 + 4 x 40 / 16 = 20 -> each fits in time at its own size
    last = policy.schedule(pool, 10.0)
    assert [len(d.slots) for d in last] == [4, 4, 4, 4]
    for d in last:
        pool.allocate(d.trial_id, d.slots)
        pool.release(d.trial_id)
        policy.finished(d.trial_id, 20.0)
    # a lone trial on an idle machine: run it on all 16 slots (ends at 22.5 instead of 30)
    policy.submit(TrialRequest(99, 4, predicted_seconds=10.0, alternatives=alts))
    assert [len(d.slots) for d in policy.schedule(pool, 20.0)] == [16]


def test_next_to_queue_follows_each_policys_order():
    """The trial sent ahead behind a running one is the one the policy would start next."""
    def loaded(name):
        policy = make_policy(name)
        for tid, (size, seconds) in enumerate([(2, 1.0), (1, 3.0), (1, 9.0), (1, 5.0)]):
            policy.submit(TrialRequest(tid, size, predicted_seconds=seconds))
        return policy

    strict = loaded("fifo")
    assert strict.next_to_queue(0.0) is None  # its head needs two slots: nothing jumps it
    assert len(strict) == 4
    skip = loaded("fifo-skip")
    assert [skip.next_to_queue(0.0).trial_id for _ in range(3)] == [1, 2, 3]
    assert skip.next_to_queue(0.0) is None and [r.trial_id for r in skip.pending] == [0]
    lpt = loaded("load-aware")
    # largest work first: 9 s (trial 2), then 5 s (trial 3); trial 1 (3 s) loses to trial 0 (2 x 1 s)
    # only by work 3 > 2, so it comes third; then the two-slot head stops it
    assert [lpt.next_to_queue(0.0).trial_id for _ in range(3)] == [2, 3, 1]
    assert lpt.next_to_queue(0.0) is None and [r.trial_id for r in lpt.pending] == [0]
    assert make_policy("fixed-block").next_to_queue(0.0) is None  # the baseline never prefetches


def test_load_aware_tracks_a_queued_trial_once_it_holds_its_slot():
    pool = ResourcePool(1, 2)
    policy = make_policy("load-aware")
    policy.submit(TrialRequest(0, 1, predicted_seconds=4.0))
    policy.submit(TrialRequest(1, 1, predicted_seconds=4.0))
    for d in policy.schedule(pool, 0.0):
        pool.allocate(d.trial_id, d.slots)
    policy.submit(TrialRequest(2, 1, predicted_seconds=10.0))
    policy.submit(TrialRequest(3, 2, predicted_seconds=1.0))  # will need both slots
    assert policy.next_to_queue(0.0).trial_id == 2
    # trial 0 ends at 4 s; trial 2 takes its slot (predicted end 14 s)
    pool.release(0)
    policy.finished(0, 4.0)
    pool.allocate(2, (0,))
    policy.queued_started(2, (0,), 4.0)
    # trial 1 ends at 5 s: trial 3 (both slots) does not fit and is reserved for when trial 2 ends
    pool.release(1)
    policy.finished(1, 5.0)
    assert policy.schedule(pool, 5.0) == []
    assert policy.reservation is not None and policy.reservation.start == pytest.approx(14.0)
    assert policy.next_to_queue(5.0) is None  # a reserved head is never jumped by a trial sent ahead


def test_a_cluster_of_bad_nodes_stops_the_campaign_with_the_reason():
    # every node fails its trials for a node-level reason: each is drained after 3 strikes, and the
    # loop stops (the machine's fault) instead of waiting for ever or blaming placement
    trials = random_trials(60, 2, 4, seed=4)
    result = simulate(trials, SimConfig(nodes=3, gpus_per_node=4, node_group_size=3, bad_nodes=3, retries=5,
                                        failure_threshold=1.0))
    assert sorted(d["node"] for d in result.summary["drained_nodes"]) == [0, 1, 2]
    assert all(d["failures"] == 3 for d in result.summary["drained_nodes"])
    assert not any(r.ok for r in result.records)
    assert len(result.records) < 60  # stopped, not every trial tried
