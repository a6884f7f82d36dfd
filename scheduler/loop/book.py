"""Where every trial attempt of a run is, and the placement calls that move it.

A trial attempt is *waiting* (submitted to the placement policy), *running* (holding slots of the
:class:`ResourcePool`) or *sent ahead* (a single-slot trial queued behind a short running one on
the same slot, started by that slot's agent the moment the first one exits: prefetch). The book
keeps the pool and the policy in step with those three maps; it decides nothing about candidates,
retries or budgets (:class:`scheduler.loop.CampaignLoop` does) and does no I/O.

Shared GPUs (``sharing``, :mod:`scheduler.sharing`): a single-slot trial that placement starts on a
free slot, and that may share, makes that slot a shared GPU: the pool holds it under
:func:`~scheduler.sharing.share_key` and placement plans with it as one running holder ending with
its last resident (:meth:`PlacementPolicy.adopt`). After placement's turn, waiting trials that it
did not start join shared GPUs with room (the emptiest first: fewer residents run faster); they
never pass through placement. The GPU goes back to the pool when its last resident ends. Trials on
shared GPUs are never sent ahead behind nor grown.
"""

from __future__ import annotations

from collections import deque

from scheduler.loop.trials import QueuedTrial, RunningTrial, TrialSpec
from scheduler.placement.base import PlacementPolicy, RunningEstimate, growth_key
from scheduler.resources import ResourcePool
from scheduler.sharing import GpuSharing, ShareDemand, SharedGpu, ShareLoad, share_key
from scheduler.sizing import TrialSizer, trial_request

#: shared GPUs looked at per waiting trial and resident count before the next count is tried
JOIN_PROBES = 8
#: trials that did not fit, looked at per GPU that gained room, before a join pass gives up on it
JOIN_SCAN = 64


class TrialBook:
    """The waiting, running and sent-ahead trial attempts of one run.

    ``prefetch_below_s``: a single-slot trial predicted to take at most this long gets its slot's
    next trial sent ahead (0 turns prefetch off)."""

    def __init__(self, pool: ResourcePool, policy: PlacementPolicy, sizer: TrialSizer,
                 prefetch_below_s: float, sharing: GpuSharing | None = None) -> None:
        self.pool = pool
        self.policy = policy
        self.sizer = sizer
        self.prefetch_below_s = prefetch_below_s
        self.sharing = sharing or GpuSharing()
        self.shared: dict[int, SharedGpu] = {}  # slot -> the GPU's residents
        self._shared_of: dict[int, int] = {}  # running trial on a shared GPU -> its slot
        self._by_count: list[dict[int, None]] = [{} for _ in range(self.sharing.per_gpu + 1)]  # residents -> slots
        self._unprobed: dict[int, ShareDemand] = {}  # waiting trials that may share, not yet probed
        self._probed: dict[int, ShareDemand] = {}  # waiting trials no shared GPU admitted when probed
        self._roomier: dict[int, None] = {}  # shared GPUs opened or left since the last join pass
        self.waiting: dict[int, TrialSpec] = {}  # submitted to placement
        self.running: dict[int, RunningTrial] = {}
        self.queued: dict[int, QueuedTrial] = {}  # by the id of the running trial each one follows
        self._to_reprice: deque[int] = deque()  # waiting trials to size again (reprice)
        self._needs_successor: dict[int, int] = {}  # short running trial -> its slot (no successor yet)
        self._closed = False  # stopped: nothing is sent ahead any more

    @property
    def open_trials(self) -> int:
        """Trials of this run that have not ended: waiting, sent ahead or running."""
        return len(self.waiting) + len(self.queued) + len(self.running)

    def submit(self, spec: TrialSpec, now: float) -> None:
        """Hand a trial attempt to placement (sized first if it was not)."""
        self.waiting[spec.trial_id] = spec
        if spec.sized is None:
            spec.sized = self.sizer.choose(spec.params)
        self._may_share(spec)
        self.policy.submit(trial_request(spec.trial_id, spec.size, spec.sized, now, avoid_nodes=spec.avoid_nodes))

    def _may_share(self, spec: TrialSpec) -> None:
        """A waiting trial that could share a GPU is probed at the next join pass."""
        self._probed.pop(spec.trial_id, None)
        self._unprobed.pop(spec.trial_id, None)
        demand = spec.sized.demand() if self.sharing.enabled and spec.sized is not None else None
        if demand is not None and self.sharing.admits_onto(demand, ShareLoad()):
            self._unprobed[spec.trial_id] = demand

    def request_reprice(self) -> None:
        """The cost model learnt: every trial waiting now is to be sized again (:meth:`reprice`)."""
        self._to_reprice = deque(self.waiting)

    @property
    def repricing(self) -> bool:
        """Waiting trials are still to be sized again."""
        return bool(self._to_reprice)

    def reprice(self, now: float, limit: int) -> int:
        """Ask the sizer again for up to ``limit`` of the trials :meth:`request_reprice` named that
        still wait as first attempts (the cost model learnt since they were sized) and hand
        placement the new sizes and predictions; returns how many changed. Retries keep their sizes
        (an out-of-memory retry was sized up on purpose). At most ``limit`` per call: at 65,536
        waiting trials a whole pass is seconds of rank 0's time, spread over its turns."""
        changed = 0
        while self._to_reprice and limit > 0:
            spec = self.waiting.get(self._to_reprice.popleft())
            if spec is None or spec.attempt > 0 or spec.resume_epoch > 0:
                continue
            limit -= 1
            sized = self.sizer.choose(spec.params)
            if spec.sized is not None and sized == spec.sized:
                continue
            spec.sized, spec.size = sized, sized.slots
            self._may_share(spec)  # its demand changed: probed again on every shared GPU
            self.policy.update(trial_request(spec.trial_id, spec.size, sized, now))
            changed += 1
        return changed

    def grow(self, now: float) -> list[RunningTrial]:
        """Running trials placement moves onto more slots: the free ones among their new slots are
        held for them (under :func:`growth_key`) until they move; returns them (``moving_to`` set)."""
        grown = []
        for growth in self.policy.grow(self.pool, now):
            rt = self.running[growth.trial_id]
            extra = tuple(x for x in growth.slots if self.pool.owner_of(x) != growth.trial_id)
            if extra:
                self.pool.allocate(growth_key(growth.trial_id), extra)
            rt.moving_to = growth
            grown.append(rt)
        return grown

    def move(self, next_spec: TrialSpec, now: float) -> RunningTrial:
        """A growing trial left its slots: its continuation ``next_spec`` runs on the slots it was
        given from ``now`` on."""
        trial_id = next_spec.trial_id
        growth = self.running[trial_id].moving_to
        assert growth is not None
        self.end(trial_id, now)
        self.pool.allocate(trial_id, growth.slots)
        self.policy.moved(trial_id, growth.slots, now + next_spec.sized.predicted_seconds if next_spec.sized
                          else growth.end, now)
        return self._run(next_spec, growth.slots, now)

    def restart(self, next_spec: TrialSpec, now: float) -> RunningTrial:
        """A trial left its slots to go on as ``next_spec`` on the same slots (PBT's exploit): it
        holds them again from ``now`` on."""
        trial_id = next_spec.trial_id
        slots = self.end(trial_id, now).slots
        self.pool.allocate(trial_id, slots)
        end = now + (next_spec.sized.predicted_seconds if next_spec.sized is not None else 0.0)
        self.policy.moved(trial_id, slots, end, now)
        return self._run(next_spec, slots, now)

    def schedule(self, now: float) -> list[RunningTrial]:
        """Start what placement decides now (a moldable trial may start wider than it was sized),
        then waiting trials on shared GPUs with room."""
        started = []
        if self.waiting and self.pool.free_slots:
            for d in self.policy.schedule(self.pool, now):
                spec = self.waiting.pop(d.trial_id)
                spec.size = len(d.slots)
                demand = spec.sized.demand() if spec.sized is not None and len(d.slots) == 1 else None
                if self.sharing.admits(demand, ()):
                    rt = self._run(spec, tuple(d.slots), now)
                    self._open_shared(rt, demand, now)  # type: ignore[arg-type]
                else:
                    self.pool.allocate(d.trial_id, d.slots)
                    rt = self._run(spec, tuple(d.slots), now)
                started.append(rt)
        if self.shared and self.waiting:
            started += self._join_shared(now)
        return started

    def _open_shared(self, rt: RunningTrial, demand: ShareDemand, now: float) -> None:
        """``rt``'s slot becomes a shared GPU with ``rt`` its first resident."""
        slot = rt.slots[0]
        self.pool.allocate(share_key(slot), rt.slots)
        self.policy.finished(rt.spec.trial_id, now)
        self.policy.adopt(share_key(slot), rt.slots, rt.predicted_end(), now)
        self._needs_successor.pop(rt.spec.trial_id, None)
        gpu = self.shared[slot] = SharedGpu(slot)
        gpu.join(rt.spec.trial_id, demand)
        rt.on_shared_gpu = True
        self._shared_of[rt.spec.trial_id] = slot
        self._by_count[1][slot] = None
        self._roomier[slot] = None

    def _join_shared(self, now: float) -> list[RunningTrial]:
        """Waiting single-slot trials onto shared GPUs with room, each on the GPU with the fewest
        residents that admits it. A trial is probed once when it starts waiting (at most
        :data:`JOIN_PROBES` GPUs per resident count); one that no GPU admitted is tried again, oldest
        first, only on the GPUs that gained room since (a resident left, or the GPU became shared),
        looking at no more than :data:`JOIN_SCAN` trials that do not fit per such GPU."""
        started = []
        roomier = [self.shared[s] for s in self._roomier if s in self.shared]
        self._roomier = {}
        misses, done = JOIN_SCAN * len(roomier), []
        for trial_id, demand in self._probed.items() if roomier else ():  # oldest first
            if trial_id not in self.waiting:  # started by placement, sent ahead or dropped since
                done.append(trial_id)
                continue
            gpu = self._gpu_among(roomier, demand)
            if gpu is not None:
                done.append(trial_id)
                started.append(self._join(trial_id, gpu, demand, now))
                roomier = [g for g in roomier if g.load.count < self.sharing.per_gpu]
            else:
                misses -= 1
            if not roomier or misses == 0:
                break
        for trial_id in done:
            del self._probed[trial_id]
        for trial_id, demand in list(self._unprobed.items()):
            del self._unprobed[trial_id]
            if trial_id not in self.waiting:
                continue
            gpu = self._gpu_for(demand)
            if gpu is None:
                self._probed[trial_id] = demand
            else:
                started.append(self._join(trial_id, gpu, demand, now))
        return started

    def _join(self, trial_id: int, gpu: SharedGpu, demand: ShareDemand, now: float) -> RunningTrial:
        """Waiting ``trial_id`` runs on shared ``gpu`` from ``now`` on."""
        spec = self.waiting.pop(trial_id)
        self.policy.cancel(trial_id)
        spec.size = 1
        rt = self._run(spec, (gpu.slot,), now)
        rt.on_shared_gpu = True
        self._move_count(gpu, +1)
        gpu.join(trial_id, demand)
        self._shared_of[trial_id] = gpu.slot
        self._tell_end(gpu, now)
        return rt

    def _gpu_for(self, demand: ShareDemand) -> SharedGpu | None:
        for count in range(1, self.sharing.per_gpu):
            for probe, slot in enumerate(self._by_count[count]):
                if probe == JOIN_PROBES:
                    break
                gpu = self.shared[slot]
                if self.sharing.admits_onto(demand, gpu.load):
                    return gpu
        return None

    def _gpu_among(self, gpus: list[SharedGpu], demand: ShareDemand) -> SharedGpu | None:
        """The GPU of ``gpus`` with the fewest residents that admits ``demand``."""
        fits = [g for g in gpus if self.sharing.admits_onto(demand, g.load)]
        return min(fits, key=lambda g: g.load.count, default=None)

    def _move_count(self, gpu: SharedGpu, step: int) -> None:
        del self._by_count[gpu.load.count][gpu.slot]
        if 0 < gpu.load.count + step:
            self._by_count[gpu.load.count + step][gpu.slot] = None

    def _tell_end(self, gpu: SharedGpu, now: float) -> None:
        """Placement plans with the GPU free when its last resident is predicted to end."""
        end = max(self.running[t].predicted_end() for t in gpu.residents)
        self.policy.revise(RunningEstimate(share_key(gpu.slot), 1, max(end, now), max(end, now)), now)

    def revised(self, estimate: RunningEstimate, now: float) -> None:
        """A running trial's new estimate to placement; for a trial on a shared GPU, the GPU's end."""
        slot = self._shared_of.get(estimate.trial_id)
        if slot is None:
            self.policy.revise(estimate, now)
        else:
            self._tell_end(self.shared[slot], now)

    def _leave_shared(self, trial_id: int, now: float) -> None:
        gpu = self.shared[self._shared_of.pop(trial_id)]
        self._move_count(gpu, -1)
        gpu.leave(trial_id)
        if gpu.residents:
            self._roomier[gpu.slot] = None
            self._tell_end(gpu, now)
            return
        del self.shared[gpu.slot]
        self.pool.release(share_key(gpu.slot))
        self.policy.finished(share_key(gpu.slot), now)

    def send_ahead(self, now: float) -> list[tuple[QueuedTrial, RunningTrial]]:
        """Queue the next waiting first attempt behind each short single-slot trial that has no
        successor yet; returns (trial sent ahead, trial it follows) pairs. A re-run is never sent
        ahead: it goes back to placement and waits for a free slot."""
        sent = []
        while self._needs_successor:
            before_id = next(iter(self._needs_successor))
            req = self.policy.next_to_queue(now)
            if req is None:
                break
            spec = self.waiting[req.trial_id]
            if spec.attempt > 0:
                self.submit(spec, now)
                break
            del self.waiting[req.trial_id]
            slot = self._needs_successor.pop(before_id)
            spec.size = 1
            before = self.running[before_id]
            queued = QueuedTrial(spec, slot, (before.spec.trial_id, before.spec.attempt))
            self.queued[before_id] = queued
            sent.append((queued, before))
        return sent

    def end(self, trial_id: int, now: float) -> RunningTrial:
        """A running trial attempt ended: its slots (and those held for its move) go back to the pool."""
        rt = self.running.pop(trial_id)
        self._needs_successor.pop(trial_id, None)
        if trial_id in self._shared_of:
            self._leave_shared(trial_id, now)
            return rt
        if rt.moving_to is not None and self.pool.held_by(growth_key(trial_id)):
            self.pool.release(growth_key(trial_id))
            self.policy.finished(growth_key(trial_id), now)
        self.pool.release(trial_id)
        self.policy.finished(trial_id, now)
        return rt

    def promote(self, before: RunningTrial, now: float, start_time: float) -> QueuedTrial | None:
        """The trial sent ahead behind ``before`` (which just ended) started at ``start_time``: it
        holds the slot now. None when nothing was sent ahead behind it."""
        queued = self.queued.pop(before.spec.trial_id, None)
        if queued is None:
            return None
        slots = (queued.slot,)
        self.pool.allocate(queued.spec.trial_id, slots)
        self.policy.queued_started(queued.spec.trial_id, slots, now)
        self._run(queued.spec, slots, start_time)
        return queued

    def take_back_idle(self) -> list[QueuedTrial]:
        """Slots idle with nothing waiting: the trials sent ahead behind the running trials predicted
        to end last, one per idle slot (they run longer than predicted, or it is the campaign's
        tail). Marks them as being taken back; O(1) on the usual turn."""
        if self.waiting or not self.queued or self.pool.free_slots == 0:
            return []
        idle = self.pool.free_slots - sum(q.taking_back for q in self.queued.values())
        if idle <= 0:
            return []
        candidates = [b for b, q in self.queued.items() if not q.taking_back]
        latest = sorted(candidates, key=lambda b: self.running[b].predicted_end(), reverse=True)[:idle]
        return self._mark_taken_back([self.queued[b] for b in latest])

    def close(self) -> list[QueuedTrial]:
        """Stop: the waiting trials are dropped (placement forgets them), nothing more is sent
        ahead; returns the trials sent ahead, to be taken back."""
        self._closed = True
        self._needs_successor.clear()
        for trial_id in list(self.waiting):
            self.policy.cancel(trial_id)
        self.waiting.clear()
        return self._mark_taken_back(list(self.queued.values()))

    def unqueued(self, after_id: int, trial_id: int, attempt: int) -> TrialSpec:
        """The slot's agent dropped a trial sent ahead (it had not started); returns it."""
        queued = self.queued.get(after_id)
        if queued is None or (queued.spec.trial_id, queued.spec.attempt) != (trial_id, attempt):
            raise RuntimeError(f"trial {trial_id} attempt {attempt} was dropped but was not sent ahead")
        del self.queued[after_id]
        return queued.spec

    @staticmethod
    def _mark_taken_back(queued: list[QueuedTrial]) -> list[QueuedTrial]:
        fresh = [q for q in queued if not q.taking_back]
        for q in fresh:
            q.taking_back = True
        return fresh

    def _run(self, spec: TrialSpec, slots: tuple[int, ...], start_time: float) -> RunningTrial:
        rt = RunningTrial(spec, slots, start_time)
        self.running[spec.trial_id] = rt
        if (len(slots) == 1 and not self._closed and spec.sized is not None and slots[0] not in self.shared
                and spec.sized.seconds_at(1) <= self.prefetch_below_s):
            self._needs_successor[spec.trial_id] = slots[0]
        return rt
