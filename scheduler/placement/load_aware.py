"""Load-aware placement: longest predicted duration first with EASY backfilling.

Each ``schedule`` call:

1. **Heads.** Start the pending trial with the longest predicted duration (ties: the wider one)
   while it fits (best fit for sub-node trials, whole nodes in as few network groups as possible for
   multi-node trials, :meth:`ResourcePool.pick`). A trial that starts late ends late by its
   duration, whatever its width: the long ones go first, so the last to start are the short ones.
   (``by_duration=False``: the largest predicted work ``slots x seconds`` first, the order before
   issue #27; it starts narrow long trials last, which costs up to 20 points of utilisation once the
   cost model has learnt, see docs/performance.md.)
2. **Reservation.** The first head that does not fit gets a reservation: from the predicted end
   times of the running trials, the earliest time ``S`` at which enough nodes are free for it and
   those nodes ``R``. The head keeps its reservation (it stays the head, "sticky") until it starts,
   so later, larger arrivals cannot starve it: its wait is bounded by the running trials' ends.
3. **Backfill.** Other candidates start now if they cannot delay the reservation: a candidate
   predicted to end by ``S`` may use any free slot (reserved nodes first, they would idle otherwise);
   a longer one only slots off ``R``. Among the eligible candidates the longest goes first.

4. **Moldable tail.** A trial with ``alternatives`` (larger sizes it may run at) whose predicted end
   (:attr:`LoadAwarePolicy.tail_margin` x its predicted time from now) falls after the ideal finish
   time ``F = now + (pending work + remaining running work) / slots`` is started at the smallest
   wider size that ends by ``F`` (or the widest that fits now): the last wave of a campaign runs
   wider and shorter instead of leaving a long tail on an idle machine. While the queue holds more
   work than the machine can finish soon, ``F`` is far away and every trial keeps its sized width.

5. **Growth** (:meth:`LoadAwarePolicy.grow`, malleable trials; called before ``schedule``). A
   running trial re-estimated to end after ``F`` would end the campaign late whatever else runs:
   latest end first, each is moved to the smallest wider size that ends by ``F`` (or the one that
   ends soonest) on free slots off the head's reservation, when that ends it at least
   :data:`MIN_GROWTH_GAIN` of its remaining time sooner. Its epochs (or its first epoch's pace) tell
   its true rate, so the trials grown are those that really are long, not those predicted so.

Cost: pending trials are kept per size class sorted by predicted duration, so a call touches the top
of each class and bisects for the longest candidate that ends by ``S`` (O(classes x log pending) per
started trial, never a scan of the pending queue); the reservation is one vectorised pass over the
nodes' predicted free times (kept sorted per node in numpy arrays).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from dataclasses import dataclass, replace

import numpy as np

from scheduler.placement.base import Decision, Growth, PlacementPolicy, RunningEstimate, TrialRequest, growth_key
from scheduler.resources import ResourcePool, WholeNodes

MIN_PREDICTED_S = 1e-6  # predictions below this are raised to it (work ordering needs > 0)
MAX_HORIZON_S = 1e9  # re-estimated ends are planned at most this far ahead (sums stay finite)
MIN_GROWTH_GAIN = 0.2  # a move must end a trial this share of its remaining time sooner
UNKNOWN_END = np.inf  # slots held by trials this policy did not start (never assumed to free up)


@dataclass(frozen=True)
class Reservation:
    """Where and when the head trial will start: ``nodes`` are all free by ``start``."""

    trial_id: int
    start: float
    nodes: frozenset[int]


class _SizeClasses:
    """Pending requests per slot count; each class sorted longest predicted duration first."""

    def __init__(self) -> None:
        self.classes: dict[int, list[tuple[float, int]]] = {}

    def add(self, req: TrialRequest) -> None:
        insort(self.classes.setdefault(req.slots, []), (-req.predicted_seconds, req.trial_id))

    def remove(self, req: TrialRequest) -> None:
        entries = self.classes[req.slots]
        key = (-req.predicted_seconds, req.trial_id)
        i = bisect_left(entries, key)
        if i == len(entries) or entries[i] != key:
            raise KeyError(f"trial {req.trial_id} is not queued")
        del entries[i]
        if not entries:
            del self.classes[req.slots]

    def top(self, by_duration: bool) -> int | None:
        """Trial id with the longest predicted duration, or (``by_duration`` False) the largest
        ``slots x seconds``; ties: the wider, then the lowest trial id."""
        best: tuple[float, int, int] | None = None
        for size, entries in self.classes.items():
            neg_sec, tid = entries[0]
            key = (-neg_sec if by_duration else -size * neg_sec, size, -tid)
            if best is None or key > best:
                best = key
        return None if best is None else -best[2]

    def longest(self, size: int) -> tuple[float, int]:
        neg_sec, tid = self.classes[size][0]
        return -neg_sec, tid

    def longest_at_most(self, size: int, seconds: float) -> tuple[float, int] | None:
        """The longest candidate of ``size`` slots predicted to take at most ``seconds``."""
        entries = self.classes[size]
        i = bisect_left(entries, (-seconds, float("-inf")))
        if i == len(entries):
            return None
        neg_sec, tid = entries[i]
        return -neg_sec, tid


class _EndTimes:
    """Predicted free time of every slot (-inf: free now), rows kept sorted per node."""

    def __init__(self, pool: ResourcePool) -> None:
        self.spn = pool.slots_per_node
        self.num_nodes = pool.num_nodes
        self.ends = np.full((pool.num_nodes, self.spn), -np.inf)
        self.sorted = self.ends.copy()
        self.running: dict[int, tuple[tuple[int, ...], float]] = {}
        self.busy = 0
        self.drain_version = -1
        self.drained = np.zeros(0, dtype=np.int64)
        self.rebuild(pool)

    def _set(self, slots: tuple[int, ...], value: float) -> None:
        if isinstance(slots, WholeNodes) and slots.slots_per_node == self.spn:
            rows = np.fromiter(slots.nodes, dtype=np.int64, count=len(slots.nodes))
            self.ends[rows] = value
            self.sorted[rows] = value
            return
        spn = self.spn
        idx = np.fromiter(slots, dtype=np.int64, count=len(slots))
        self.ends.flat[idx] = value
        rows = np.unique(idx // spn)
        self.sorted[rows] = np.sort(self.ends[rows], axis=1)

    def set_end(self, slots: tuple[int, ...], end: float) -> None:
        """A running trial's predicted end changed."""
        self._set(slots, end)

    def rebuild(self, pool: ResourcePool) -> None:
        """Re-read ownership from the pool (trials not started by this policy never end)."""
        self.ends.fill(-np.inf)
        running = {}
        for tid in pool.running_trials():
            slots = pool.held_by(tid)
            end = self.running[tid][1] if tid in self.running else UNKNOWN_END
            running[tid] = (slots, end)
            self.ends.flat[np.asarray(slots, dtype=np.int64)] = end
        self.running = running
        self.sorted = np.sort(self.ends, axis=1)
        self.busy = pool.busy_slots
        self.drained = np.asarray(sorted(pool.drained_nodes), dtype=np.int64)
        self.drain_version = pool.drain_version

    def sync(self, pool: ResourcePool) -> None:
        if pool.busy_slots != self.busy or pool.drain_version != self.drain_version:
            self.rebuild(pool)

    def start(self, trial_id: int, slots: tuple[int, ...], end: float) -> None:
        self.running[trial_id] = (slots, end)
        self._set(slots, end)
        self.busy += len(slots)

    def finish(self, trial_id: int) -> None:
        entry = self.running.pop(trial_id, None)
        if entry is not None:
            self._set(entry[0], -np.inf)
            self.busy -= len(entry[0])

    def node_free_times(self, need: int, now: float) -> np.ndarray:
        """Per node, the predicted time at which ``need`` of its slots are free (inf if drained)."""
        t = np.maximum(self.sorted[:, need - 1], now)
        if self.drained.size:
            t[self.drained] = np.inf
        return t


class LoadAwarePolicy(PlacementPolicy):
    """Longest predicted duration first, EASY backfilling, best-fit packing, group-local
    multi-node trials.

    ``tail_margin``: in the moldable tail a trial counts as ending by the ideal finish time only
    with this multiple of its predicted time (1: as predicted; 2 was the default before issue #27,
    and widened trials that did not need it once predictions were learnt); ``by_duration``: the
    order of heads and backfill (False: largest predicted work first)."""

    name = "load-aware"

    def __init__(self, tail_margin: float = 1.0, by_duration: bool = True) -> None:
        super().__init__()
        if tail_margin < 1:
            raise ValueError(f"tail_margin must be >= 1, got {tail_margin}")
        self.tail_margin = tail_margin
        self.by_duration = by_duration
        self._queue = _SizeClasses()
        self._ends: _EndTimes | None = None
        self._head_id: int | None = None
        self.reservation: Reservation | None = None
        self._pending_work = 0.0  # sum of predicted slot-seconds of the pending trials
        self._run_sum_end = 0.0  # sum of slots x predicted end over the trials this policy started
        self._run_slots = 0
        self._run: dict[int, tuple[int, float]] = {}  # trial -> (slots, predicted end)
        self._queued: dict[int, TrialRequest] = {}  # handed out by next_to_queue, not started yet
        self._growable: dict[int, RunningEstimate] = {}  # running trials that may move to more slots
        self._moving: set[int] = set()  # trials given a growth, not moved yet
        self._grow_seen: tuple[int, int] | None = None  # (version, free slots) of the last grow() call
        self._version = 0  # bumped by every change grow() depends on

    # -- queue ---------------------------------------------------------------------------------------
    @staticmethod
    def _checked(request: TrialRequest) -> TrialRequest:
        if request.slots < 1 or not math.isfinite(request.predicted_seconds):
            raise ValueError(f"trial {request.trial_id}: needs slots >= 1 and a finite predicted_seconds, "
                             f"got {request.slots} and {request.predicted_seconds}")
        if request.predicted_seconds < MIN_PREDICTED_S:  # a zero prediction (e.g. no history yet)
            request = replace(request, predicted_seconds=MIN_PREDICTED_S)
        return request

    def submit(self, request: TrialRequest) -> None:
        request = self._checked(request)
        super().submit(request)
        self._queue.add(request)
        self._pending_work += request.predicted_work
        self._version += 1

    def update(self, request: TrialRequest) -> None:
        old = self._pending.get(request.trial_id)
        if old is None:
            raise KeyError(f"trial {request.trial_id} is not pending")
        request = self._checked(request)
        self._queue.remove(old)
        self._queue.add(request)
        self._pending[request.trial_id] = request
        self._pending_work += request.predicted_work - old.predicted_work
        self._version += 1

    def cancel(self, trial_id: int) -> None:
        req = self._pending.get(trial_id)
        if req is not None:
            self._queue.remove(req)
            self._pending_work -= req.predicted_work
        super().cancel(trial_id)
        if trial_id == self._head_id:
            self._head_id, self.reservation = None, None

    def finished(self, trial_id: int, now: float) -> None:
        self._growable.pop(trial_id, None)
        self._moving.discard(trial_id)  # moved, or ended before it could
        self._version += 1
        if self._ends is not None:
            self._ends.finish(trial_id)
        entry = self._run.pop(trial_id, None)
        if entry is not None:
            self._run_slots -= entry[0]
            self._run_sum_end -= entry[0] * entry[1]

    def revise(self, estimate: RunningEstimate, now: float) -> None:
        """Plan with a running trial's re-estimated end (reservations, the ideal finish time) and
        keep its wider sizes for :meth:`grow`."""
        trial_id = estimate.trial_id
        entry = self._run.get(trial_id)
        if entry is None:
            return
        if estimate.wider and trial_id not in self._moving:
            self._growable[trial_id] = estimate
        else:
            self._growable.pop(trial_id, None)
        self._version += 1
        slots, old_end = entry
        end = min(max(estimate.end, now), now + MAX_HORIZON_S)  # an end past any horizon: far, finite
        self._run[trial_id] = (slots, end)
        self._run_sum_end += slots * (end - old_end)
        if self._ends is not None and trial_id in self._ends.running:
            held, _ = self._ends.running[trial_id]
            self._ends.running[trial_id] = (held, end)
            self._ends.set_end(held, end)

    def _dequeue(self, req: TrialRequest) -> None:
        self._queue.remove(req)
        del self._pending[req.trial_id]
        self._pending_work -= req.predicted_work

    # -- growth --------------------------------------------------------------------------------------
    def grow(self, pool: ResourcePool, now: float) -> list[Growth]:
        """Move the running trials that would end after the ideal finish time onto more slots (see
        the module docstring, step 5)."""
        seen = (self._version, pool.free_slots)
        if not self._growable or pool.free_slots == 0 or seen == self._grow_seen:
            return []
        self._grow_seen = seen
        finish = self.ideal_finish(pool, now)
        reserved = self.reservation.nodes if self.reservation is not None and self._head_id in self._pending \
            else frozenset()
        growths = []
        with pool.tentative():
            for est in sorted(self._growable.values(), key=lambda e: (-e.end, e.trial_id)):
                if est.end <= finish or pool.free_slots == 0:
                    break
                choice = self._growth(pool, est, finish, now, reserved)
                if choice is None:
                    continue
                growths.append(choice)
                extra = [x for x in choice.slots if pool.owner_of(x) != est.trial_id]
                pool.allocate(growth_key(est.trial_id), extra)  # tentative: undone on return
                self._moving.add(est.trial_id)
                del self._growable[est.trial_id]
        for g in growths:  # the extra slots are busy until the move, when they become the trial's
            extra = tuple(x for x in g.slots if pool.owner_of(x) != g.trial_id)
            self._running(growth_key(g.trial_id), extra, g.end)
        self._version += 1
        return growths

    def _growth(self, pool: ResourcePool, est: RunningEstimate, finish: float, now: float,
                reserved: frozenset[int]) -> Growth | None:
        """The smallest wider size ending by ``finish``, else the one ending soonest, that its own and
        the free slots off ``reserved`` allow; None when none gains :data:`MIN_GROWTH_GAIN` of its
        remaining time."""
        best: Growth | None = None
        for size, end in est.wider:
            if best is not None and end >= best.end:
                continue
            slots = self._growth_slots(pool, est.trial_id, size, reserved)
            if slots is None:
                continue
            best = Growth(est.trial_id, slots, end)
            if end <= finish:
                break
        if best is None or est.end - best.end < MIN_GROWTH_GAIN * (est.end - now):
            return None
        return best

    @staticmethod
    def _growth_slots(pool: ResourcePool, trial_id: int, size: int, reserved: frozenset[int]) -> tuple[int, ...] | None:
        """``size`` slots for a trial to move onto: on one node (its own, if it has room there) or
        whole nodes (keeping those it holds whole); None when the free slots do not allow it."""
        spn = pool.slots_per_node
        held = pool.held_by(trial_id)
        if isinstance(held, WholeNodes) and held.slots_per_node == spn:
            per_node = dict.fromkeys(held.nodes, spn)
        else:
            per_node = {}
            for x in held:
                per_node[x // spn] = per_node.get(x // spn, 0) + 1
        if size <= spn:
            if len(per_node) == 1:
                node = next(iter(per_node))
                if node not in reserved and pool.free_on_node(node) >= size - len(held):
                    return tuple(sorted((*held, *pool.free_slots_of_node(node)[:size - len(held)])))
            return pool.pick(size, exclude=reserved or None) if pool.can_fit(size) else None
        whole = [nd for nd, n in per_node.items() if n == spn]
        need = size // spn - len(whole)
        if need > pool.whole_free_nodes:
            return None
        more = pool.pick(need * spn, exclude=reserved or None) if need > 0 else ()
        if more is None:
            return None
        extra = list(more.nodes) if isinstance(more, WholeNodes) else sorted({x // spn for x in more})
        return WholeNodes(sorted(whole + extra), spn)

    def moved(self, trial_id: int, slots: tuple[int, ...], end: float, now: float) -> None:
        """A trial it grew runs on ``slots`` now, predicted to end at ``end``."""
        self._running(trial_id, slots, end)
        self._version += 1

    def _running(self, trial_id: int, slots: tuple[int, ...], end: float) -> None:
        """Track a started trial's predicted end (reservations, ideal finish time)."""
        if self._ends is not None:
            self._ends.start(trial_id, slots, end)
        self._run[trial_id] = (len(slots), end)
        self._run_slots += len(slots)
        self._run_sum_end += len(slots) * end

    def _start(self, pool: ResourcePool, req: TrialRequest, slots: tuple[int, ...], now: float,
               decisions: list[Decision], seconds: float | None = None) -> None:
        pool.allocate(req.trial_id, slots)  # tentative: undone when schedule() returns
        self._dequeue(req)
        self._running(req.trial_id, slots, now + (req.predicted_seconds if seconds is None else seconds))
        decisions.append(Decision(req.trial_id, slots))

    def next_to_queue(self, now: float) -> TrialRequest | None:
        """The trial placement would start next (see ``top``) if it needs one slot and no head holds a
        reservation (a reserved head must not wait behind trials committed ahead of it)."""
        if self._head_id in self._pending or not self._pending:
            return None
        tid = self._queue.top(self.by_duration)
        req = self._pending[tid]
        if req.slots != 1:
            return None
        self._dequeue(req)
        self._queued[tid] = req
        return req

    def queued_started(self, trial_id: int, slots: tuple[int, ...], now: float) -> None:
        req = self._queued.pop(trial_id)
        self._running(trial_id, slots, now + req.predicted_seconds)

    def adopt(self, owner: int, slots: tuple[int, ...], end: float, now: float) -> None:
        self._running(owner, slots, end)
        self._version += 1

    def ideal_finish(self, pool: ResourcePool, now: float) -> float:
        """When the machine would finish the pending and running work if perfectly packed."""
        running = max(0.0, self._run_sum_end - now * self._run_slots)
        usable = max(1, pool.total_slots - len(pool.drained_nodes) * pool.slots_per_node)
        return now + (max(0.0, self._pending_work) + running) / usable

    def _widen(self, req: TrialRequest, now: float, finish: float, fits) -> tuple[int, float]:
        """The size to start ``req`` at: its own, or a wider alternative in the tail (see module doc);
        ``fits(slots, seconds)`` says whether that size can start now. A trial counts as ending by
        ``finish`` only with :attr:`tail_margin` x its predicted time (run times scatter)."""
        m = self.tail_margin
        if not req.alternatives or now + m * req.predicted_seconds <= finish:
            return req.slots, req.predicted_seconds
        best = (req.slots, req.predicted_seconds)
        for slots, seconds in req.alternatives:
            if slots <= req.slots or seconds >= best[1] or not fits(slots, seconds):
                continue
            best = (slots, seconds)
            if now + m * seconds <= finish:
                break
        return best

    # -- schedule ------------------------------------------------------------------------------------
    def schedule(self, pool: ResourcePool, now: float) -> list[Decision]:
        if self._ends is None or self._ends.num_nodes != pool.num_nodes or self._ends.spn != pool.slots_per_node:
            self._ends = _EndTimes(pool)
        self._ends.sync(pool)
        decisions: list[Decision] = []
        if not self._pending or pool.free_slots == 0:
            return decisions
        with pool.tentative():
            head = self._start_heads(pool, now, decisions)
            if head is not None and pool.free_slots > 0:
                self._queue.remove(head)
                try:
                    self._backfill(pool, now, head, decisions)
                finally:
                    self._queue.add(head)
        return decisions

    def _start_heads(self, pool: ResourcePool, now: float, decisions: list[Decision]) -> TrialRequest | None:
        """Start heads in placement order while they fit; returns the first that does not (or None)."""
        while self._pending:
            tid = self._head_id if self._head_id in self._pending else self._queue.top(self.by_duration)
            assert tid is not None
            head = self._pending[tid]
            if not pool.can_fit(head.slots, head.avoid_nodes):
                return head
            size, seconds = self._widen(head, now, self.ideal_finish(pool, now),
                                        lambda n, _: pool.can_fit(n, head.avoid_nodes))
            slots = pool.pick(size, avoid=head.avoid_nodes)
            assert slots is not None
            self._start(pool, head, slots, now, decisions, seconds)
            if tid == self._head_id:
                self._head_id, self.reservation = None, None
        return None

    def _reserve(self, pool: ResourcePool, head: TrialRequest, now: float) -> Reservation | None:
        """Earliest predicted start of ``head`` and the nodes it will use (None: it never fits)."""
        assert self._ends is not None
        spn = pool.slots_per_node
        if head.slots <= spn:
            t = self._ends.node_free_times(head.slots, now)
            node = int(np.argmin(t))
            if not np.isfinite(t[node]):
                return None
            return Reservation(head.trial_id, float(t[node]), frozenset((node,)))
        k = head.slots // spn
        if head.slots % spn or k > pool.num_nodes:
            return None
        t = self._ends.node_free_times(spn, now)
        start = float(np.partition(t, k - 1)[k - 1])  # the k-th earliest node
        if not np.isfinite(start):
            return None
        early, ties = np.flatnonzero(t < start), np.flatnonzero(t == start)
        # ties go to the highest node ids, which lowest-id-first picks reach last
        nodes = np.concatenate((early, ties[len(ties) - (k - len(early)):]))
        return Reservation(head.trial_id, start, frozenset(nodes.tolist()))

    def _backfill(self, pool: ResourcePool, now: float, head: TrialRequest, decisions: list[Decision]) -> None:
        res = self._reserve(pool, head, now)
        if res is None:  # the head can never run here: no reservation, nothing to protect
            self._head_id, self.reservation = None, None
            reserved: frozenset[int] = frozenset()
            window = np.inf
        else:
            self._head_id, self.reservation = head.trial_id, res
            reserved = res.nodes
            window = res.start - now
        spn = pool.slots_per_node
        res_count = pool.free_histogram(reserved)  # reserved nodes by their current free count

        def fits_open(size: int) -> bool:
            if size <= spn:
                return any(pool.nodes_with_free(f) > res_count[f] for f in range(size, spn + 1))
            return pool.whole_free_nodes - res_count[spn] >= size // spn

        active = sorted(self._queue.classes, reverse=True)
        held_back: list[TrialRequest] = []  # kept off the nodes it failed on, none free elsewhere
        try:
            self._backfill_loop(pool, now, decisions, active, window, reserved, res_count, fits_open, held_back)
        finally:
            for req in held_back:
                self._queue.add(req)

    def _backfill_loop(self, pool: ResourcePool, now: float, decisions: list[Decision], active: list[int],
                       window: float, reserved: frozenset[int], res_count: list[int], fits_open,
                       held_back: list[TrialRequest]) -> None:
        """Start the best eligible candidate of the active size classes until none is left (the
        third step of the module docstring)."""
        spn = pool.slots_per_node
        while active and pool.free_slots > 0:
            best: tuple[float, int, int, bool] | None = None  # (work, -tid, size, short)
            for size in list(active):
                choice = self._eligible(pool, size, window, fits_open)
                if choice is None:
                    active.remove(size)  # capacity only shrinks in this call: never eligible again
                    continue
                seconds, tid, short = choice
                key = (seconds if self.by_duration else size * seconds, -tid, size, short)
                if best is None or key[:2] > best[:2]:
                    best = key
            if best is None:
                break
            _, neg_tid, cls, short = best
            req = self._pending[-neg_tid]
            size, seconds = cls, req.predicted_seconds
            if req.alternatives:
                size, seconds = self._widen(
                    req, now, self.ideal_finish(pool, now),
                    lambda n, sec: pool.can_fit(n) if sec <= window else fits_open(n))
                short = seconds <= window
            slots = self._place(pool, size, short, reserved, res_count, req.avoid_nodes)
            if slots is None:  # it waits for a node it did not fail on: out of this call's queue
                self._queue.remove(req)
                held_back.append(req)
                if cls not in self._queue.classes:
                    active.remove(cls)
                continue
            nodes = slots.nodes if isinstance(slots, WholeNodes) else {pool.node_of(s) for s in slots}
            before = {nd: pool.free_on_node(nd) for nd in nodes if nd in reserved}
            self._start(pool, req, slots, now, decisions, seconds)
            for nd, free in before.items():
                res_count[free] -= 1
                res_count[pool.free_on_node(nd)] += 1
            if cls not in self._queue.classes:
                active.remove(cls)

    def _eligible(self, pool: ResourcePool, size: int, window: float, fits_open) -> tuple[float, int, bool] | None:
        """The best candidate of a size class now: (seconds, trial id, ends by the reservation)."""
        seconds, tid = self._queue.longest(size)
        fits_any = pool.can_fit(size)
        if not fits_any:
            return None
        if seconds <= window:
            return seconds, tid, True
        if fits_open(size):
            return seconds, tid, False
        short = self._queue.longest_at_most(size, window) if window > 0 else None
        return None if short is None else (short[0], short[1], True)

    @staticmethod
    def _place(pool: ResourcePool, size: int, short: bool, reserved: frozenset[int],
               res_count: list[int], avoid: frozenset[int] = frozenset()) -> tuple[int, ...] | None:
        """Slots for an eligible candidate: a short one prefers the reserved nodes (they would idle
        until the reservation), a long one never touches them; ``avoid``: nodes it failed on (None
        when it must wait for others, :meth:`ResourcePool.pick`)."""
        spn = pool.slots_per_node
        if short and reserved and not avoid:
            if size <= spn:
                fitting = [(pool.free_on_node(nd), nd) for nd in reserved if pool.free_on_node(nd) >= size]
                if fitting:
                    _, node = min(fitting)
                    return tuple(pool.free_slots_of_node(node)[:size])
            else:
                k = size // spn
                whole = sorted(nd for nd in reserved if pool.free_on_node(nd) == spn)[:k]
                if whole:
                    rest = k - len(whole)
                    extra = pool.pick(rest * spn, exclude=reserved) if rest else ()
                    if extra is not None:  # whole free nodes (one node's worth comes as plain slot ids)
                        more = list(extra.nodes) if isinstance(extra, WholeNodes) else [s // spn for s in extra[::spn]]
                        return WholeNodes(whole + more, spn)
        slots = pool.pick(size, exclude=None if short else reserved, avoid=avoid)
        if slots is None and avoid:
            return None
        if slots is None:
            raise AssertionError(f"size {size} was eligible but no slots were found")
        return slots
