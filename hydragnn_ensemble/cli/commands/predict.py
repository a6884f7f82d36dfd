"""``[mpiexec -n N] hydragnn-ensemble predict ENSEMBLE_DIR INPUT... -o predictions.csv [--forces-out F.extxyz]``.

Inputs: any structure file ASE reads (several structures per file allowed) and ``.bp`` datasets
(or sharded dataset directories). Each structure's graph is built once and every member predicts
it. Writes one CSV row per structure, in input order (files in the order given, structures in
file order, a dataset's splits in its order; graph heads: mean, std, epistemic std; see
``ensemble.outputs``) and, with ``--forces-out``, the node heads (forces) per atom as extxyz arrays
``<head>_mean`` / ``<head>_std``.

At scale (``ensemble.screening``): the inputs are read, built and predicted ``--chunk-size``
structures at a time (bounded memory whatever their number; an extxyz file is read chunk by chunk,
any other structure file whole). Under ``mpiexec -n N`` every rank loads the ensemble and rank
``r`` predicts chunks ``r, r + N, ...``; rank 0 merges the ranks' rows into the one output, which is
the same, byte for byte, as one process's at the same ``--chunk-size`` and ``--batch-size``. The
partial files lie in a temporary directory beside the output (which every rank must see) and are
removed at the end; the outputs appear only complete. The summary is printed once, by rank 0.

Bad inputs (unreadable file, invalid structure) are listed on stderr as ``FILE[INDEX]: reason``
(once, in input order) and the good ones are still predicted.

Exit codes: 0 every input predicted; 1 some inputs bad (the others were predicted and written);
2 user error: bad ensemble directory, or no input could be predicted, or a member cannot predict
an input (nothing written).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Any

NAME = "predict"
HELP = "predict structures / datasets with an ensemble: mean and uncertainty per head"
#: structures per chunk by default (ensemble.screening.DEFAULT_CHUNK_SIZE; not imported: --help stays light)
DEFAULT_CHUNK_SIZE = 512


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ensemble_dir", type=Path, help="ensemble directory (from `select`)")
    parser.add_argument("inputs", nargs="+", type=Path, help="structure files (anything ASE reads) or .bp datasets")
    parser.add_argument("-o", "--output", required=True, type=Path, help="predictions CSV to write")
    parser.add_argument("--forces-out", type=Path, default=None,
                        help="extxyz with per-atom node-head predictions (mean and std arrays)")
    parser.add_argument("--batch-size", type=int, default=32, help="structures per forward pass (default 32)")
    parser.add_argument("--chunk-size", type=_positive, default=DEFAULT_CHUNK_SIZE,
                        help="structures read and predicted at a time, per MPI rank (bounds memory; "
                             f"default {DEFAULT_CHUNK_SIZE})")
    parser.add_argument("--device", action="append", default=None, metavar="DEV",
                        help="torch device for members (repeat to spread members over GPUs; default cpu)")
    parser.add_argument("--allow-isolated", action="store_true",
                        help="accept atoms without any neighbour within the ensemble's cutoff")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def paths(args: argparse.Namespace):
    """The ensemble directory and the inputs are read; the CSV (and --forces-out) written."""
    from ensemble.outputs import is_node_extxyz, is_predictions_csv
    from hydragnn_ensemble.path_guard import CommandPaths, Output

    outputs = [Output(args.output, "predictions CSV", is_predictions_csv)]
    if args.forces_out is not None:
        outputs.append(Output(args.forces_out, "per-atom predictions file", is_node_extxyz))
    return CommandPaths(inputs=(args.ensemble_dir, *args.inputs), outputs=tuple(outputs))


def _world() -> Any:
    """MPI's world communicator under mpiexec with several ranks, else None (one process)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    return comm if comm.Get_size() > 1 else None


def run(args: argparse.Namespace) -> int:
    import torch

    from graph_builders.atomic import atoms_to_graph
    from hydragnn_ensemble.cli import UserError
    from ensemble.predictor import EnsemblePredictor
    from ensemble.screening import ScreenError, screen

    torch.set_num_threads(1)
    comm = _world()
    rank = 0 if comm is None else comm.Get_rank()
    builder = partial(atoms_to_graph, allow_isolated=True) if args.allow_isolated else None
    predictor, problem = None, None
    try:
        predictor = EnsemblePredictor(args.ensemble_dir, devices=args.device, batch_size=args.batch_size,
                                      progress=False, graph_builder=builder)
    except (ValueError, OSError) as exc:
        problem = str(exc)
    problems = [problem] if comm is None else comm.allgather(problem)
    try:
        if any(problems):
            raise UserError(next(p for p in problems if p))
        result = screen(predictor, args.inputs, args.output, args.forces_out, chunk_size=args.chunk_size,
                        comm=comm, progress=not args.no_progress,
                        on_bad=lambda bad: print(f"bad input: {bad.describe()}", file=sys.stderr))
        if not result.predicted:
            raise UserError(f"none of the {len(args.inputs)} input file(s) could be predicted")
    except (UserError, ScreenError) as exc:
        if rank != 0:
            return 2  # rank 0 prints the reason once
        raise UserError(str(exc)) from None
    if rank == 0:
        _print_summary(result, predictor)
    return 1 if result.bad else 0


def _print_summary(result: Any, predictor: Any) -> None:
    from graph_builders.schema import MEV_PER_ATOM, in_mev_per_atom

    rate = f" ({result.predicted / result.seconds:.1f}/s)" if result.seconds > 0 else ""
    print(f"{result.predicted} structure(s) predicted by {predictor.num_members} member(s) in {result.seconds:.1f} s"
          f"{rate} -> {result.output}")
    if result.ranks > 1:
        print(f"  on {result.ranks} MPI ranks: {result.chunks} chunk(s) of at most {result.largest_chunk} "
              "structure(s) each, merged in input order")
    for head, error in result.errors.items():
        unit = predictor.heads[head].unit
        per_atom = ("" if error.mae_per_atom is None else
                    f" ({in_mev_per_atom(error.mae_per_atom, unit):.4g} {MEV_PER_ATOM})")
        print(f"  {head}: MAE {error.mae:.4g}{' ' + unit if unit else ''}{per_atom} against the labels of "
              f"{error.count} input structure(s) "
              f"(columns {head}_ref/_error{'' if predictor.heads[head].level == 'graph' else ', _mae'})")
    if result.outside:
        print(f"{result.outside} of {result.predicted} outside the ensemble's applicability domain (in_domain = no; "
              "their std includes the out-of-domain term):")
        for line in result.outside_first:
            print(f"  {line}")
        if result.outside > len(result.outside_first):
            print(f"  ... and {result.outside - len(result.outside_first)} more (all in the CSV's domain_reasons)")
    if result.no_node_heads:
        print("no node-level heads: --forces-out not written", file=sys.stderr)
    elif result.forces_out is not None:
        print(f"per-atom predictions -> {result.forces_out}")
    if result.bad:
        print(f"{result.bad} bad input(s) skipped (listed above)", file=sys.stderr)
