"""Predict a large set of inputs in bounded memory, optionally spread over MPI ranks, into one output.

:func:`screen` plans the inputs (:mod:`ensemble.input_plan`: every structure in input order, cut
into chunks of ``chunk_size`` structures) on rank 0 and hands the plan to every rank. Rank ``r`` of
``N`` reads, builds and predicts chunks ``r, r + N, r + 2N, ...`` one at a time (every rank loads the
whole ensemble) and appends its rows, frames and bad inputs, tagged with their positions, to its
partial files (:mod:`ensemble.partials`). Rank 0 then merges them in input order into the final CSV
(and extxyz), and the summary (structures predicted, MAE per labelled head, outside-the-domain
count and first lines, bad inputs) is reduced over the ranks.

A chunk is predicted the same way whichever rank holds it (the same graphs in the same batches),
so the output is the same, byte for byte, for any number of ranks at a given ``chunk_size`` and
batch size; another chunk size changes which graphs share a batch, and with it the last bits of
some values. Memory holds one chunk's structures, graphs and predictions per rank, whatever the
number of inputs (an input that is neither a dataset nor an extxyz file is read whole).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graph_builders.schema import HeadRegistry
from ensemble.combine import EnsemblePrediction
from ensemble.input_plan import BadInput, InputPlan, Position, plan_inputs
from ensemble.inputs import ChunkReader, InputItem
from ensemble.outputs import (CsvLayout, ReferenceError, ReferenceSums, frame_text, labelled_heads, node_frame,
                              node_heads, reference_sums)
from ensemble.partials import (
    PartWriter,
    make_parts_dir,
    merge_bad,
    merge_frames,
    merge_rows,
    remove_parts_dir,
)
from ensemble.predictor import EnsemblePredictor, PredictionError

#: structures per chunk by default: what one rank holds in memory at a time
DEFAULT_CHUNK_SIZE = 512
#: outside-the-domain structures listed in the summary (the CSV has them all)
OUTSIDE_SHOWN = 10


class ScreenError(RuntimeError):
    """The run stopped (a member could not predict a chunk, the output cannot be written); nothing
    was written. Raised on every rank."""


@dataclass
class ChunkTally:
    """What one chunk adds to the summary: structures predicted, per-head sums of label errors."""

    chunk: int
    predicted: int
    errors: dict[str, ReferenceSums]  # head -> its sums of label errors


@dataclass
class RankReport:
    """One rank's share of the summary, all-gathered after its chunks."""

    tallies: list[ChunkTally] = field(default_factory=list)
    bad: int = 0
    outside: int = 0
    outside_first: list[tuple[Position, str]] = field(default_factory=list)
    layout: CsvLayout | None = None
    labelled: set[str] = field(default_factory=set)
    node_heads: bool = False
    largest_chunk: int = 0  # most structures held at once
    failure: str | None = None


@dataclass
class ScreenResult:
    """The run's summary (the same on every rank)."""

    predicted: int
    bad: int
    errors: dict[str, ReferenceError]  # head -> its MAE (and per atom) against the labels
    outside: int
    outside_first: list[str]  # the first OUTSIDE_SHOWN, in input order
    output: Path | None  # None: nothing predicted, nothing written
    forces_out: Path | None  # None: not asked for, or no node-level head
    no_node_heads: bool  # --forces-out asked for, but the ensemble has no node-level head
    chunks: int
    ranks: int
    largest_chunk: int
    seconds: float = 0.0  # rank 0: from planning to the merged files (start-up and loading excluded)


def _rank_size(comm: Any) -> tuple[int, int]:
    return (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())


def _bcast(comm: Any, value: Any) -> Any:
    return value if comm is None else comm.bcast(value, root=0)


def _allgather(comm: Any, value: Any) -> list[Any]:
    return [value] if comm is None else comm.allgather(value)


def _plan_and_parts(paths: list[str | os.PathLike], output: Path, chunk_size: int
                    ) -> tuple[InputPlan | None, Path | None, str | None]:
    try:
        plan = plan_inputs(paths, chunk_size)
    except ValueError as exc:
        return None, None, str(exc)
    try:
        return plan, make_parts_dir(output), None
    except OSError as exc:
        return None, None, f"cannot write beside {output}: {exc}"


def _setup(paths: list[str | os.PathLike], output: Path, chunk_size: int, comm: Any) -> tuple[InputPlan, Path]:
    """Rank 0 plans the inputs and makes the directory of partial files; every rank gets both."""
    rank, _ = _rank_size(comm)
    setup: tuple[InputPlan | None, Path | None, str | None] = (None, None, "rank 0 failed while planning")
    try:
        if rank == 0:
            setup = _plan_and_parts(paths, output, chunk_size)
    finally:  # the other ranks wait for the plan even when rank 0 fails
        setup = _bcast(comm, setup)
    plan, parts, failure = setup
    if failure is not None:
        raise ScreenError(failure)
    return plan, parts


def _predict_chunk(c: int, items: list[InputItem], prediction: EnsemblePrediction, report: RankReport,
                   writer: PartWriter, frames: bool) -> None:
    """Write one chunk's rows (and frames) and add it to the rank's report."""
    layout = CsvLayout.of(prediction)
    report.layout = report.layout or layout
    writer.write_rows((item.position, layout.cells(item, prediction, row)) for row, item in enumerate(items))
    report.labelled |= labelled_heads(items)
    report.node_heads = report.node_heads or bool(node_heads(prediction))
    if frames and node_heads(prediction):
        for row, item in enumerate(items):
            atoms = node_frame(item, prediction, row)
            if atoms is not None:
                writer.write_frame(item.position, frame_text(atoms))
    report.tallies.append(ChunkTally(c, len(items), reference_sums(items, prediction)))
    report.largest_chunk = max(report.largest_chunk, len(items))
    if prediction.in_domain is not None:
        for row in (k for k, inside in enumerate(prediction.in_domain) if not inside):
            report.outside += 1
            if len(report.outside_first) < OUTSIDE_SHOWN:
                item = items[row]
                report.outside_first.append(
                    (item.position, f"{item.source}[{item.index}] {item.name}: {'; '.join(prediction.reasons[row])}"))


def _own_chunks(predictor: EnsemblePredictor, plan: InputPlan, parts: Path, frames: bool, comm: Any,
                progress: bool) -> tuple[RankReport, BaseException | None]:
    """Predict this rank's chunks into its partial files; a failure is reported, not raised."""
    rank, size = _rank_size(comm)
    mine = range(rank, len(plan.chunks), size)
    report = RankReport()
    try:
        writer = PartWriter(parts, rank)
    except OSError as exc:
        report.failure = (f"rank {rank} cannot write its partial files in {parts} (the output's directory must "
                          f"be one every rank sees): {exc}")
        return report, None
    bar = None
    if progress and rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=sum(plan.chunk_units(c) for c in mine), unit="structure",
                   desc="predict" if size == 1 else f"predict (rank 0 of {size})")
    try:
        with ChunkReader(plan, predictor) as reader, writer:
            for c in mine:
                items, bad = reader.read(plan.chunks[c])
                writer.write_bad(bad)
                report.bad += len(bad)
                if items:
                    prediction = predictor.predict_graphs([item.graph for item in items])
                    _predict_chunk(c, items, prediction, report, writer, frames)
                if bar is not None:
                    bar.update(plan.chunk_units(c))
    except PredictionError as exc:
        report.failure = str(exc)
        return report, None
    except Exception as exc:  # noqa: BLE001 - reported to every rank, then re-raised on this one
        report.failure = f"rank {rank}: {type(exc).__name__}: {exc}"
        return report, exc
    finally:
        if bar is not None:
            bar.close()
    return report, None


def _sum_errors(tallies: list[ChunkTally], heads: HeadRegistry) -> dict[str, ReferenceError]:
    """The errors per head over every chunk (summed in chunk order: the same for any number of ranks)."""
    sums: dict[str, ReferenceSums] = {}
    for tally in sorted(tallies, key=lambda t: t.chunk):
        for head, part in tally.errors.items():
            sums[head] = part if head not in sums else sums[head].plus(part)
    return {head: total.error(heads[head]) for head, total in sums.items()}


def screen(predictor: EnsemblePredictor, paths: list[str | os.PathLike], output: str | os.PathLike,
           forces_out: str | os.PathLike | None = None, *, chunk_size: int = DEFAULT_CHUNK_SIZE, comm: Any = None,
           on_bad: Callable[[BadInput], None] | None = None, progress: bool = False) -> ScreenResult:
    """Predict every structure of ``paths`` into the CSV ``output`` (and the per-atom extxyz
    ``forces_out``), see the module docstring. ``comm``: an mpi4py communicator whose ranks share
    the inputs (each calls ``screen`` with the same arguments; None: this process alone).
    ``on_bad`` is called on rank 0 with each bad input, in input order. Raises
    :class:`ScreenError` on every rank when the run fails (nothing written)."""
    output = Path(output)
    rank, size = _rank_size(comm)
    start = time.perf_counter()
    plan, parts = _setup(paths, output, chunk_size, comm)
    try:
        report, unexpected = _own_chunks(predictor, plan, parts, forces_out is not None, comm, progress)
        reports: list[RankReport] = _allgather(comm, report)
        failures = [r.failure for r in reports if r.failure]
        if failures:
            if unexpected is not None:
                raise unexpected
            raise ScreenError("; ".join(failures))
        layouts = [r.layout for r in reports if r.layout is not None]
        if any(layout != layouts[0] for layout in layouts):
            raise ScreenError("the ranks disagree on the CSV's columns (members loaded differently?)")
        predicted = sum(t.predicted for r in reports for t in r.tallies)
        outside_first = sorted((line for r in reports for line in r.outside_first), key=lambda x: x[0])
        with_node_heads = any(r.node_heads for r in reports)
        result = ScreenResult(
            predicted=predicted, bad=len(plan.bad) + sum(r.bad for r in reports),
            errors=_sum_errors([t for r in reports for t in r.tallies], predictor.heads),
            outside=sum(r.outside for r in reports),
            outside_first=[line for _, line in outside_first[:OUTSIDE_SHOWN]],
            output=output if predicted else None,
            forces_out=Path(forces_out) if forces_out is not None and predicted and with_node_heads else None,
            no_node_heads=forces_out is not None and predicted > 0 and not with_node_heads,
            chunks=len(plan.chunks), ranks=size, largest_chunk=max(r.largest_chunk for r in reports))
        if rank == 0:
            for bad in merge_bad(parts, size, plan.bad):
                if on_bad is not None:
                    on_bad(bad)
            if predicted:
                labelled = set().union(*(r.labelled for r in reports))
                merge_rows(parts, size, layouts[0].header(labelled), layouts[0].keep(labelled), output)
            if result.forces_out is not None:
                merge_frames(parts, size, result.forces_out)
        result.seconds = time.perf_counter() - start
        return result
    finally:
        if rank == 0:
            remove_parts_dir(parts)
