"""Several small trials on one GPU: which trials may share a GPU, and how much slower each one runs.

HydraGNN's HPO on Frontier kept its GPUs under 40% busy for every model size: most trials are small,
and one small trial per GCD leaves most of it idle. A slot (one GPU) may therefore hold more than
one trial, started as separate processes on the same device (NVIDIA MPS where the machine runs it,
else time-sliced). Three parts:

* :class:`ShareDemand`: what the cost model predicts of a trial alone on one GPU, its peak memory
  and its utilisation (the busy share of the device);
* :class:`GpuSharing`: the campaign's rule (:class:`SharingMode`): ``off``; ``fixed`` k trials per
  GPU wherever their memory fits; ``auto``: trials that use less than ``small_below`` of a GPU alone
  share one up to its memory and a utilisation budget (the sum of their utilisations alone);
* :class:`ColocationCurve`: the aggregate throughput of k co-located small trials relative to one
  alone, measured on a device (``bench/gpu_colocation.py``); each of k trials on a GPU then runs
  ``k / aggregate(k)`` times slower than alone. ``auto`` packs no more trials per GPU than the
  curve's best k.

The campaign loop's :class:`scheduler.loop.TrialBook` places the trials (a shared GPU is held in
the pool under :func:`share_key`); the simulator stretches co-located trials by the curve.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from hpo.campaign import MAX_TRIALS_PER_GPU

#: HydraGNN's Frontier figure: trials under this busy share of a GPU alone are "small"
SMALL_BELOW = 0.4
#: From this many trials per GPU on, the sizer packs small trials rigidly (no wider sizes). With
#: fewer, trials hardly queue and the slowest ones end the campaign: spreading them (placement's
#: moldable starts) ends it sooner. Simulated, 16 nodes x 8, assumed curve (bench/gpu_sharing_sim.py):
#: rigid/moldable campaign time 1.64/1.00 at 1 per GPU, 1.01/1.00 at 2, 0.95/0.91 at 3, 0.83/0.94 at 4,
#: 0.49/0.67 at 16 (ratios to one trial per GPU).
RIGID_FROM_TRIALS_PER_GPU = 4.0


class SharingError(ValueError):
    """A co-location curve or sharing option that cannot be used (names the file or the value)."""


class SharingMode(str, Enum):
    """How many trials a GPU may hold."""

    OFF = "off"  # one trial per GPU
    FIXED = "fixed"  # up to k trials per GPU where their memory fits, whatever their utilisation
    AUTO = "auto"  # small trials up to the GPU's memory and a utilisation budget


@dataclass(frozen=True)
class ShareDemand:
    """A trial alone on one GPU, as predicted: peak memory (GB), busy share in [0, 1] (None: not
    predicted, and then it never shares in ``auto``) and wall seconds."""

    memory_gb: float
    utilisation: float | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class ColocationCurve:
    """Aggregate throughput of ``k`` co-located copies of a small trial over one alone, at the
    measured ``k`` (``aggregate[1] == 1``), with where it was measured."""

    aggregate: Mapping[int, float]
    source: str = ""

    def __post_init__(self) -> None:
        if not self.aggregate or 1 not in self.aggregate:
            raise SharingError(f"a co-location curve needs k = 1 (one trial alone), got k = {sorted(self.aggregate)}")
        if any(int(k) != k or k < 1 for k in self.aggregate) or any(
                not (math.isfinite(v) and v > 0) for v in self.aggregate.values()):
            raise SharingError(f"co-location curve: k must be positive integers and throughputs positive, "
                               f"got {dict(self.aggregate)}")
        if abs(self.aggregate[1] - 1.0) > 1e-9:
            raise SharingError(f"co-location curve: aggregate[1] must be 1 (throughputs relative to one "
                               f"trial alone), got {self.aggregate[1]}")

    @classmethod
    def read(cls, path: Path) -> "ColocationCurve":
        """From a JSON file ``{"aggregate": {"1": 1.0, "2": 1.8, ...}, "source": "..."}`` (what
        ``bench/gpu_colocation.py`` writes: throughputs relative to k = 1)."""
        try:
            data = json.loads(Path(path).read_text())
            points = {int(k): float(v) for k, v in data["aggregate"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SharingError(f"{path}: not a co-location curve ({exc}); expected "
                               '{"aggregate": {"1": 1.0, "2": ...}, "source": "..."}') from None
        return cls(points, str(data.get("source", path)))

    @property
    def max_k(self) -> int:
        return max(self.aggregate)

    @property
    def best_k(self) -> int:
        """The measured k of the highest aggregate throughput (the smallest such k)."""
        return min(self.aggregate, key=lambda k: (-self.aggregate[k], k))

    def throughput(self, k: int) -> float:
        """Aggregate throughput of ``k`` co-located trials, linear between measured points; beyond
        the largest measured k a SharingError (never extrapolated)."""
        if k < 1 or k > self.max_k:
            raise SharingError(f"the co-location curve was measured for k <= {self.max_k}, not k = {k}")
        if k in self.aggregate:
            return self.aggregate[k]
        lo = max(x for x in self.aggregate if x < k)
        hi = min(x for x in self.aggregate if x > k)
        w = (k - lo) / (hi - lo)
        return (1 - w) * self.aggregate[lo] + w * self.aggregate[hi]

    def slowdown(self, k: int) -> float:
        """How many times longer each of ``k`` co-located trials takes than alone."""
        return k / self.throughput(k)


@dataclass(frozen=True)
class GpuSharing:
    """The campaign's co-location rule (see the module docstring); ``per_gpu`` is k for ``fixed``
    and the most trials per GPU for ``auto``."""

    mode: SharingMode = SharingMode.OFF
    per_gpu: int = 1
    device_memory_gb: float = 64.0
    utilisation_budget: float = 1.0
    small_below: float = SMALL_BELOW
    slowdowns: tuple[float, ...] = ()  # how many times longer than alone each of k = 1, 2, ... residents runs
    time_limit_s: float = math.inf  # the trial time limit: no resident is packed past it

    def __post_init__(self) -> None:
        if self.per_gpu < 1 or (self.mode != SharingMode.OFF and self.per_gpu < 2):
            raise SharingError(f"gpu sharing {self.mode.value}: per_gpu must be >= 2, got {self.per_gpu}")
        if self.per_gpu > MAX_TRIALS_PER_GPU:
            raise SharingError(f"gpu sharing: at most {MAX_TRIALS_PER_GPU} trials per GPU (NVIDIA MPS serves 48 "
                               f"clients per GPU), got {self.per_gpu}")
        if self.enabled and len(self.slowdowns) < self.per_gpu:
            raise SharingError(f"gpu sharing: slowdowns for k = 1..{self.per_gpu} needed, got {self.slowdowns}")
        if self.device_memory_gb <= 0 or not 0 < self.utilisation_budget or not 0 < self.small_below <= 1:
            raise SharingError("gpu sharing: device memory and utilisation budget must be > 0, small_below in (0, 1]")

    @classmethod
    def parse(cls, text: str, device_memory_gb: float, curve: ColocationCurve | None,
              time_limit_s: float = math.inf) -> "GpuSharing":
        """``off``, ``auto`` (up to the curve's best k) or a fixed k (``"4"``); ``auto`` and k > 1 need a
        measured curve that covers k (placement must know what packing costs)."""
        value = text.strip().lower()
        if value in ("off", "1"):
            return cls(device_memory_gb=device_memory_gb)
        if curve is None:
            raise SharingError(f"gpu sharing {text!r} needs a measured co-location curve (--colocation-curve FILE)")
        if value == "auto":
            if curve.best_k < 2:
                raise SharingError(f"gpu sharing auto: the curve ({curve.source}) gains nothing from sharing")
            mode, k = SharingMode.AUTO, curve.best_k
        else:
            try:
                mode, k = SharingMode.FIXED, int(value)
            except ValueError:
                raise SharingError(f"gpu sharing must be off, auto or a number of trials per GPU, got {text!r}") from None
            if not 2 <= k <= MAX_TRIALS_PER_GPU:
                raise SharingError(f"gpu sharing must be off, auto or 2..{MAX_TRIALS_PER_GPU} trials per GPU, "
                                   f"got {text!r}")
        curve.throughput(k)  # raises when the curve does not cover k
        slowdowns = tuple(curve.slowdown(n) for n in range(1, k + 1))
        return cls(mode, k, device_memory_gb, slowdowns=slowdowns, time_limit_s=time_limit_s)

    @property
    def enabled(self) -> bool:
        return self.mode != SharingMode.OFF

    def loss_warning(self) -> str | None:
        """A warning when the curve says ``per_gpu`` trials together train no faster than one alone:
        sharing would only stretch every trial (None when it gains, or is off)."""
        if not self.enabled or not self.slowdowns:
            return None
        gain = self.per_gpu / self.slowdowns[self.per_gpu - 1]
        if gain > 1.0:
            return None
        return (f"gpu_sharing {self.per_gpu}: the co-location curve gives {self.per_gpu} trials per GPU "
                f"{gain:.2f}x the throughput of one alone: sharing stretches every trial {self.per_gpu / gain:.2f}x "
                "and gains nothing (measure the curve again, or set gpu_sharing: off)")

    def packing(self, trials_per_gpu: float) -> "Packing | None":
        """What the sizer does with small trials (:class:`scheduler.sizing.Sizer`) in a campaign of
        ``trials_per_gpu`` trials per GPU; None when sharing is off."""
        if not self.enabled:
            return None
        return Packing(self.small_below, self.time_limit_s, rigid=trials_per_gpu >= RIGID_FROM_TRIALS_PER_GPU)

    def admits(self, demand: ShareDemand | None, residents: Sequence[ShareDemand]) -> bool:
        """Whether a trial of ``demand`` may join a GPU that holds ``residents`` (an empty GPU: whether
        it may be the first of a shared one); see :meth:`admits_onto`."""
        return self.admits_onto(demand, ShareLoad.of(residents))

    def admits_onto(self, demand: ShareDemand | None, load: "ShareLoad") -> bool:
        """Whether a trial of ``demand`` may join a GPU whose residents ask ``load`` of it. Count and
        memory, then time: the slowest of them, stretched by the curve's slowdown for one more
        resident, must still end within the time limit (whole predicted runs are stretched: an
        upper bound); then, for ``auto``, every one small and their utilisations within budget."""
        if self.mode == SharingMode.OFF or demand is None:
            return False
        count = load.count + 1  # (the load with it added, without building it: this runs per probe)
        if count > self.per_gpu or load.memory_gb + demand.memory_gb > self.device_memory_gb:
            return False
        if max(load.longest_s, demand.seconds) * self.slowdowns[count - 1] > self.time_limit_s:
            return False
        if self.mode == SharingMode.FIXED:
            return True
        u = demand.utilisation
        return (u is not None and max(load.peak_utilisation, u) < self.small_below
                and load.utilisation + u <= self.utilisation_budget)


@dataclass(frozen=True)
class ShareLoad:
    """What the residents of one GPU ask of it together."""

    count: int = 0
    memory_gb: float = 0.0
    utilisation: float = 0.0  # the sum of their busy shares alone
    peak_utilisation: float = 0.0  # the largest one (inf when one of them is not predicted)
    longest_s: float = 0.0  # the longest predicted run alone

    @classmethod
    def of(cls, residents: Iterable[ShareDemand]) -> "ShareLoad":
        load = cls()
        for demand in residents:
            load = load.plus(demand)
        return load

    def plus(self, demand: ShareDemand) -> "ShareLoad":
        """The load with ``demand`` added."""
        u = demand.utilisation
        return ShareLoad(self.count + 1, self.memory_gb + demand.memory_gb, self.utilisation + (u or 0.0),
                         max(self.peak_utilisation, math.inf if u is None else u),
                         max(self.longest_s, demand.seconds))


@dataclass(frozen=True)
class Packing:
    """Which trials the sizer keeps at one GPU to share it: those predicted to use less than
    ``below`` of a GPU alone and to end within ``within_s`` there; ``rigid``: without their wider
    sizes (placement cannot spread them over several GPUs)."""

    below: float
    within_s: float = math.inf
    rigid: bool = True


def share_key(slot: int) -> int:
    """The pool owner of a shared GPU (a negative id no trial has, distinct from growth keys)."""
    return -(2**40) - slot


@dataclass
class SharedGpu:
    """One slot holding several trials, what each of them asks of it and all of them together."""

    slot: int
    residents: dict[int, ShareDemand] = field(default_factory=dict)
    load: ShareLoad = field(default_factory=ShareLoad)

    def join(self, trial_id: int, demand: ShareDemand) -> None:
        self.residents[trial_id] = demand
        self.load = self.load.plus(demand)

    def leave(self, trial_id: int) -> None:
        del self.residents[trial_id]
        self.load = ShareLoad.of(self.residents.values())
