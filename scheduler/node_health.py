"""Which nodes keep failing: a failure reason that points at the node rather than at the trial
(:func:`is_node_level_failure`, :data:`NODE_LEVEL_PATTERNS`), and :class:`NodeHealth`, which drains
a node in the :class:`scheduler.resources.ResourcePool` after enough such failures in a row and
reports it (:class:`DrainReport`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from scheduler.resources import ResourcePool

__all__ = ["NODE_LEVEL_PATTERNS", "DrainReport", "NodeHealth", "is_node_level_failure"]


@dataclass(frozen=True)
class DrainReport:
    """A node taken out of service by :class:`NodeHealth`."""

    node: int
    hostname: str
    failures: int
    last_reason: str

NODE_LEVEL_PATTERNS: tuple[str, ...] = (
    r"hip error", r"hiperror", r"cuda error", r"ecc error", r"uncorrectable",
    r"no (gpu|hip|cuda)[- ]capable device", r"device (not found|unavailable|lost)",
    r"rccl", r"nccl", r"bus error", r"illegal memory access", r"gpu (hang|hung|fell off)",
    r"input/output error", r"node failure", r"read-only file system", r"no space left on device",
)
_NODE_LEVEL_RE = re.compile("|".join(NODE_LEVEL_PATTERNS), re.IGNORECASE)


def is_node_level_failure(reason: str | None) -> bool:
    """Whether a trial's failure reason points at the node (device, interconnect, local disk)
    rather than at the trial's hyperparameters (:data:`NODE_LEVEL_PATTERNS`, case-insensitive)."""
    return bool(reason) and _NODE_LEVEL_RE.search(reason) is not None


class NodeHealth:
    """Counts node-level failures per node; after ``threshold`` in a row (no successful trial on the
    node in between) the node is drained in ``pool`` and reported in :attr:`reports`."""

    def __init__(self, pool: ResourcePool, threshold: int = 3) -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be >= 1, got {threshold}")
        self.pool = pool
        self.threshold = threshold
        self._strikes: dict[int, int] = {}
        self.reports: list[DrainReport] = []

    def record(self, slots: Sequence[int], ok: bool, reason: str | None = None) -> list[DrainReport]:
        """Record the outcome of a trial that ran on ``slots``; returns the nodes drained now.

        A success clears the nodes' strikes; a failure whose reason is node-level
        (:func:`is_node_level_failure`) adds one strike to each node of the trial; other failures
        (the trial's own fault) change nothing.
        """
        nodes = sorted({self.pool.node_of(s) for s in slots})
        if ok:
            for node in nodes:
                self._strikes.pop(node, None)
            return []
        if not is_node_level_failure(reason):
            return []
        drained = []
        for node in nodes:
            strikes = self._strikes.get(node, 0) + 1
            self._strikes[node] = strikes
            if strikes >= self.threshold and node not in self.pool.drained_nodes:
                drained.append(self.drain(node, strikes, reason or ""))
        return drained

    def drain(self, node: int, failures: int, reason: str) -> DrainReport:
        """Take ``node`` out of service now (also: a node an earlier run of the campaign drained)."""
        self.pool.drain(node)
        report = DrainReport(node, self.pool.hostname(node), failures, reason)
        self.reports.append(report)
        return report

    def strikes(self, node: int) -> int:
        return self._strikes.get(node, 0)
