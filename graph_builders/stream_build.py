"""Build graphs as a stream into shards: bounded memory, a share of the inputs per process.

Every process (one, or the ranks of an MPI job; ``comm`` is duck-typed on mpi4py's communicator:
``Get_rank``, ``Get_size``, ``gather``, ``bcast``) builds its share of the structures
(:mod:`graph_builders.stream_items`) and writes them as shards of ``shard_size`` graphs
(:class:`graph_builders.store.ShardWriter`), so memory holds one shard's graphs (and, at the start,
the ``heads_from`` graphs the schema is decided from), whatever the inputs' size. Two collective
steps (:class:`StreamBuild`):

1. :meth:`StreamBuild.decide`: the heads and the graphs' attributes are decided from the first
   ``heads_from`` graphs of the inputs' global order (whichever processes built them): the
   attributes (names, dtypes, shapes) most of them share, and the targets all of those have with
   one shape (as the in-memory build decides over all graphs). The decision does not depend on the
   number of processes or the shard size. Unlike the in-memory build ("the most common layout of
   all graphs"), a later graph that does not fit the decision is a failure, not a reason to decide
   otherwise: its attributes differ, or a head's target is missing or of another shape (targets
   that are not heads are left out, counted in a note).
2. :meth:`StreamBuild.write`: every process writes its graphs, in shards named
   ``PREFIX-rRRRRR-NNNNN.bp`` (rank, shard number), each graph in the split drawn from a hash of
   (seed, input file path as given, structure number) against the fractions (:func:`hashed_split`):
   a structure's split does not depend on the number of processes or the shard size, and the split
   sizes are the fractions only approximately (binomially). Rank 0 gets every process's shards (in
   rank order, then shard number) and failures (in the global order).

Writing the index, the errors list and moving the dataset into place is the caller's
(``build-graphs --shard-size``).
"""

from __future__ import annotations

import hashlib
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from graph_builders.batch_build import BatchBuildOptions, FileFailure, graph_signature, infer_heads, target_shapes
from graph_builders.schema import TARGET_PREFIX, HeadRegistry, validate_graph
from graph_builders.store._layout import SPLIT_NAMES
from graph_builders.store.sharded import ShardEntry, ShardWriter
from graph_builders.stream_items import Item, Labels, rank_items

#: graphs (the first of the inputs' global order) the heads and attributes are decided from
HEADS_FROM = 1000


class SerialComm:
    """mpi4py's communicator calls :class:`StreamBuild` makes, for one process."""

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1

    def gather(self, value: Any, root: int = 0) -> list:
        return [value]

    def bcast(self, value: Any, root: int = 0) -> Any:
        return value


class StreamBuildError(RuntimeError):
    """A process of the build failed (not an input: a bug or the machine); names the rank."""


@dataclass(frozen=True)
class StreamPlan:
    """How to build and store: the graphs' options, ``shard_size`` graphs per shard, the layout,
    the splits' seed and fractions, and the graphs the schema is decided from."""

    options: BatchBuildOptions
    shard_size: int
    layout: str = "hydragnn"
    seed: int = 0
    fractions: tuple[float, ...] = (0.8, 0.1, 0.1)
    heads_from: int = HEADS_FROM
    prefix: str = "part"
    metadata: dict = field(default_factory=dict)


@dataclass
class Decision:
    """What every graph stored must have: these heads, and these attributes (``signature``)."""

    heads: HeadRegistry
    signature: tuple
    decided_from: int  # graphs
    notes: list[str] = field(default_factory=list)
    available: set[str] = field(default_factory=set)  # every label a --heads choice can name

    def misfit(self, graph) -> str | None:
        """Why ``graph`` cannot be stored with the others (None when it fits)."""
        where = f"(decided from the first {self.decided_from} graphs)"
        signature = graph_signature(graph)
        if signature != self.signature:
            return (f"attributes {[item[0] for item in signature]} (or their shapes) differ from the dataset's "
                    f"{[item[0] for item in self.signature]} {where}")
        shapes = target_shapes(graph)
        for head in self.heads:
            got = shapes.get(head.key)
            if got is None:
                return f"no target {head.name!r}: the dataset's heads are {self.heads.names} {where}"
            if got != (head.level, head.dim):
                return (f"target {head.name!r} is a {got[0]} target of dim {got[1]}, the dataset's head a "
                        f"{head.level} target of dim {head.dim} {where}")
        return None


@dataclass
class StreamResult:
    """What the processes built (rank 0): shards in order, failures in the global order."""

    entries: list[ShardEntry]
    failures: list[FileFailure]
    graphs: int
    files_with_graphs: int
    notes: list[str]


def hashed_split(seed: int, file: str, index: int, fractions: Sequence[float]) -> str:
    """The split of structure ``index`` of ``file`` (the path as given): a hash of (seed, file,
    index) mapped to [0, 1) against the cumulative fractions (train, val, test[, calibration])."""
    digest = hashlib.blake2b(f"{seed}\0{file}\0{index}".encode(), digest_size=8).digest()
    u = int.from_bytes(digest, "little") / 2.0**64
    total = 0.0
    for name, fraction in zip(SPLIT_NAMES, fractions):
        total += fraction
        if u < total:
            return name
    return SPLIT_NAMES[max(k for k, f in enumerate(fractions) if f > 0)]


class StreamBuild:
    """One process's part of a streaming build into ``root`` (see the module docstring); every
    process makes the same calls, in the same order."""

    def __init__(self, files: Sequence[Path], plan: StreamPlan, root: Path, comm: Any = None,
                 progress: bool = True) -> None:
        self.files = list(files)
        self.plan = plan
        self.root = Path(root)
        self.comm = comm if comm is not None else SerialComm()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.labels = Labels()
        self._bar = self._progress_bar(progress)
        self._bar_file = -1
        self._items = rank_items(self.files, plan.options, self.rank, self.size, self.labels, self._built)
        self._buffer: deque[Item] = deque()

    # -- the two collective steps -----------------------------------------------------------------
    def decide(self) -> Decision:
        """Build up to ``heads_from`` graphs here and decide the schema from the first
        ``heads_from`` of all processes' (on every process)."""
        error = None
        try:
            graphs = 0
            for item in self._items:
                self._buffer.append(item)
                graphs += item.graph is not None
                if graphs >= self.plan.heads_from:
                    break
        except Exception as exc:  # noqa: BLE001 - reported to every process by rank 0
            error = f"{type(exc).__name__}: {exc}"
        summary = [(item.key, graph_signature(item.graph), target_shapes(item.graph))
                   for item in self._buffer if item.graph is not None]
        labels = (self.labels.units, self.labels.sources, self.labels.available)
        gathered = self.comm.gather((summary, labels, error), root=0)
        decision: Decision | str | None = None
        if self.rank == 0:
            decision = _first_error(gathered) or _decide(gathered, self.plan.heads_from)
        decision = self.comm.bcast(decision, root=0)
        if isinstance(decision, str):
            self.close()
            raise StreamBuildError(decision)
        return decision

    def write(self, decision: Decision) -> StreamResult | None:
        """Write this process's graphs that fit ``decision`` as shards; rank 0 gets everything's
        :class:`StreamResult`, the others None."""
        error = None
        failures: list[tuple[tuple[int, int], FileFailure]] = []
        dropped: Counter = Counter()
        files_with_graphs: set[int] = set()
        entries: list[ShardEntry] = []
        graphs = 0
        try:
            writer = ShardWriter(self.root, decision.heads, self.plan.shard_size,
                                 prefix=f"{self.plan.prefix}-r{self.rank:05d}", metadata=self.plan.metadata,
                                 layout=self.plan.layout, seed=self.plan.seed)
            for item in self._drain():
                failure = item.failure or self._fit(item, decision, dropped)
                if failure is not None:
                    failures.append((item.key, failure))
                    continue
                f, index = item.key
                writer.add(item.graph, hashed_split(self.plan.seed, str(self.files[f]), index, self.plan.fractions))
                files_with_graphs.add(f)
                graphs += 1
            entries = writer.finish()
        except Exception as exc:  # noqa: BLE001 - reported by rank 0
            error = f"{type(exc).__name__}: {exc}"
        self.close()
        gathered = self.comm.gather((entries, failures, graphs, files_with_graphs, self.labels.left_out, dropped,
                                     error), root=0)
        problem = _first_error([(None, None, g[-1]) for g in gathered]) if self.rank == 0 else None
        problem = self.comm.bcast(problem, root=0)
        if problem:
            raise StreamBuildError(problem)
        return _merge(gathered, decision) if self.rank == 0 else None

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    # -- internals -----------------------------------------------------------------------------------
    def _drain(self):
        """The items held since :meth:`decide`, then the rest (each let go of once handed out)."""
        while self._buffer:
            yield self._buffer.popleft()
        yield from self._items

    def _fit(self, item: Item, decision: Decision, dropped: Counter) -> FileFailure | None:
        """The item's graph made to fit ``decision`` (targets that are not heads left out), or
        its failure (``FILE[INDEX]``, or ``FILE`` at the scales of one graph per file)."""
        graph = item.graph
        f, index = item.key
        where = f"{self.files[f]}[{index}]" if self.plan.options.scale == "atomic" else str(self.files[f])
        reason = decision.misfit(graph)
        if reason is None:
            for key in [k for k in graph.keys() if k.startswith(TARGET_PREFIX)]:
                if key[len(TARGET_PREFIX):] not in decision.heads.names:
                    del graph[key]
                    dropped[key[len(TARGET_PREFIX):]] += 1
            try:
                validate_graph(graph, decision.heads, str(getattr(graph, "name", where)))
            except ValueError as exc:
                reason = f"{type(exc).__name__}: {exc}"
        return None if reason is None else FileFailure(where, reason)

    def _progress_bar(self, enabled: bool) -> tqdm | None:
        if not enabled or self.rank != 0:
            return None
        what = "structures" if self.size == 1 else f"structures (rank 0 of {self.size})"
        return tqdm(desc=f"building {self.plan.options.scale} graphs: {what}", unit="structure")

    def _built(self, file_number: int) -> None:
        if self._bar is not None:
            if file_number != self._bar_file:
                self._bar_file = file_number
                self._bar.set_postfix_str(f"file {file_number + 1}/{len(self.files)}", refresh=False)
            self._bar.update(1)


def _first_error(gathered: list) -> str | None:
    for rank, part in enumerate(gathered):
        if part[-1]:
            return f"rank {rank} of the build failed: {part[-1]}"
    return None


def _decide(gathered: list, heads_from: int) -> Decision:
    """The schema of the first ``heads_from`` graphs of all processes' (by their global order)."""
    summary = sorted((s for part in gathered for s in part[0]), key=lambda s: s[0])[:heads_from]
    units: dict[str, str] = {}
    sources: dict[str, str] = {}
    available: set[str] = set()
    for _, (u, s, a), _ in gathered:
        units.update(u)
        sources.update(s)
        available |= a
    if not summary:
        return Decision(HeadRegistry.of([]), (), 0, [], available)
    common = Counter(s[1] for s in summary).most_common(1)[0][0]
    heads, notes = infer_heads([s[2] for s in summary if s[1] == common], units, sources)
    return Decision(heads, common, len(summary), notes, available)


def _merge(gathered: list, decision: Decision) -> StreamResult:
    """Every process's part in one result: shards by rank, failures by global order (a file
    failure several processes met, once)."""
    entries = [e for part in gathered for e in part[0]]
    failures: dict[tuple, FileFailure] = {}
    for part in gathered:
        for key, failure in part[1]:
            failures.setdefault(key, failure)  # a file's own failure: key (file, -1) on each rank that met it
    left_out: Counter = Counter()
    dropped: Counter = Counter()
    for part in gathered:
        left_out.update(part[4])
        dropped.update(part[5])
    notes = list(decision.notes)
    notes += [f"label {key} left out ({count} structure(s)): {why}" for (key, why), count in sorted(left_out.items())]
    notes += [f"target {name!r} left out of {count} graph(s): not one of the heads (decided from the first "
              f"{decision.decided_from} graphs)" for name, count in sorted(dropped.items())]
    files = set().union(*(part[3] for part in gathered))
    return StreamResult(entries, [failures[k] for k in sorted(failures)], sum(part[2] for part in gathered),
                        len(files), notes)
