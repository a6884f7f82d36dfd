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
from typing import Mapping, Sequence

#: HydraGNN's Frontier figure: trials under this busy share of a GPU alone are "small"
SMALL_BELOW = 0.4


class SharingError(ValueError):
    """A co-location curve or sharing option that cannot be used (names the file or the value)."""


class SharingMode(str, Enum):
    """How many trials a GPU may hold."""

    OFF = "off"  # one trial per GPU
    FIXED = "fixed"  # up to k trials per GPU where their memory fits, whatever their utilisation
    AUTO = "auto"  # small trials up to the GPU's memory and a utilisation budget


@dataclass(frozen=True)
class ShareDemand:
    """A trial alone on one GPU, as predicted: peak memory (GB) and busy share in [0, 1] (None:
    not predicted, and then it never shares in ``auto``)."""

    memory_gb: float
    utilisation: float | None = None


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

    def __post_init__(self) -> None:
        if self.per_gpu < 1 or (self.mode != SharingMode.OFF and self.per_gpu < 2):
            raise SharingError(f"gpu sharing {self.mode.value}: per_gpu must be >= 2, got {self.per_gpu}")
        if self.device_memory_gb <= 0 or not 0 < self.utilisation_budget or not 0 < self.small_below <= 1:
            raise SharingError("gpu sharing: device memory and utilisation budget must be > 0, small_below in (0, 1]")

    @classmethod
    def parse(cls, text: str, device_memory_gb: float, curve: ColocationCurve | None) -> "GpuSharing":
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
            return cls(SharingMode.AUTO, curve.best_k, device_memory_gb)
        try:
            k = int(value)
        except ValueError:
            raise SharingError(f"gpu sharing must be off, auto or a number of trials per GPU, got {text!r}") from None
        curve.throughput(k)  # raises when the curve does not cover k
        return cls(SharingMode.FIXED, k, device_memory_gb)

    @property
    def enabled(self) -> bool:
        return self.mode != SharingMode.OFF

    def admits(self, demand: ShareDemand | None, residents: Sequence[ShareDemand]) -> bool:
        """Whether a trial of ``demand`` may join a GPU that holds ``residents`` (an empty GPU: whether
        it may be the first of a shared one)."""
        if not self.enabled or demand is None or len(residents) + 1 > self.per_gpu:
            return False
        if demand.memory_gb + sum(r.memory_gb for r in residents) > self.device_memory_gb:
            return False
        if self.mode == SharingMode.FIXED:
            return True
        if any(d.utilisation is None or d.utilisation >= self.small_below for d in (demand, *residents)):
            return False
        load = demand.utilisation + sum(r.utilisation for r in residents)  # type: ignore[operator]
        return load <= self.utilisation_budget


def share_key(slot: int) -> int:
    """The pool owner of a shared GPU (a negative id no trial has, distinct from growth keys)."""
    return -(2**40) - slot


@dataclass
class SharedGpu:
    """One slot holding several trials, and what each of them asks of it."""

    slot: int
    residents: dict[int, ShareDemand] = field(default_factory=dict)
