"""``hydragnn-ensemble build-graphs``: graphs from structure, microstructure or mesh files into one dataset."""

from __future__ import annotations

import argparse
from pathlib import Path

from hydragnn_ensemble.cli.build_checks import (
    build_metadata,
    check_heads,
    errors_path,
    no_heads_message,
    report_failures,
)

NAME = "build-graphs"
HELP = "Build graphs from atomic structures, grain microstructures or FEM meshes into an ADIOS2 dataset."
EPILOG = """\
inputs (a directory stands for every non-hidden file under it):
  atomic     any file ASE reads (format from the extension, else the name: POSCAR*, data.*,
             OUTCAR, ..., else the content), and pymatgen Structure/Molecule JSON (one object or
             a list); several structures per file are fine; every label stored in the file
             becomes a head: energy (graph, eV, the structure's total), free_energy, forces
             (node, eV/A), stress (graph, Voigt xx yy zz yz xz xy, eV/A^3), other calculator
             results, numbers in the frame's info (graph) and numeric per-atom arrays (node)
             other than inputs (momenta, masses, tags, initial_*, a CIF's spacegroup_kinds);
             --heads chooses among them; labels without a unit get one with --units NAME=UNIT;
             what is left out is listed with the reason
  mesoscale  .npz with seeds [G,3] + box ([3] or scalar), optional orientations ([G,4] quaternions
             or [G,3] Euler), phases [G], periodic (default true); or labels (3-D int voxel map) with
             optional orientations/phases per label, voxel_size, periodic (default false);
             arrays y_<head> become targets (length G: node head, otherwise graph head)
  continuum  any mesh file meshio reads; --features/--targets name point-data arrays

Every structure that builds is stored. Bad files, and bad structures of multi-structure files
(as FILE[INDEX]), do not stop the run: they are listed with the reason in OUTPUT.errors.tsv
(file<TAB>reason). OUTPUT may not be, contain or lie inside an input; an existing OUTPUT is
replaced only when it is a dataset this program wrote.

A dataset without heads has nothing to train on and is refused (files that hold structures but
no labels, such as POSCAR or CIF) unless --predict-only says it is for prediction only.

streaming (--shard-size N): graphs are written as they are built, N per shard, into a sharded
dataset: a directory OUTPUT holding shards.json and the shards (.bp), which train, describe and
HydraGNN (one loader per shard) read; memory holds one shard's graphs whatever the inputs' size.
Under `mpiexec -n P hydragnn-ensemble build-graphs ... --shard-size N` each rank builds a share
(structure i of file f on rank (f + i) mod P) and writes its own shards; without mpiexec it runs in
one process. It differs from the in-memory build (without --shard-size) in three ways:
  - the heads and the graphs' attributes are decided from the first --heads-from graphs (default
    1000) of the inputs (files in order, structures in order), not from all graphs ("the most
    common layout"); a later structure that does not fit them is a failure, listed as
    FILE[INDEX] with the reason;
  - each structure's split comes from a hash of (--seed, the input file path as given, the
    structure's number) against --fractions: it does not depend on the number of processes or the
    shard size, and the split sizes are the fractions approximately, not exactly;
  - there is no check for duplicate structures across the splits.
A fresh dataset is written beside OUTPUT and moved there when complete. --append adds the new
graphs as new shards of the sharded dataset at OUTPUT (same heads, attributes, layout, scale and
cutoff, else an error saying what differs); its index is replaced when the append is complete, so
shards a crashed append wrote stay out of the dataset (files part-aNNN-* not listed in shards.json,
which may be deleted). OUTPUT.errors.tsv lists the failures of this run.

exit status: 0 everything built; 1 some files or structures failed, the others were written;
             2 nothing could be built, no labels without --predict-only, an unknown --heads
             name (or a usage error); nothing is written then.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="input files or directories")
    parser.add_argument("-o", "--output", required=True, type=Path,
                        help="dataset to write (.bp; with --shard-size a directory of shards)")
    parser.add_argument("--scale", required=True, choices=("atomic", "mesoscale", "continuum"),
                        help="what the inputs hold: atomic structures, grain microstructures or FEM meshes")
    parser.add_argument("--cutoff", type=float, default=5.0, help="atomic: neighbour radius in Å (default 5.0)")
    parser.add_argument("--max-neighbours", type=int, default=None, help="atomic: keep the K nearest per atom")
    parser.add_argument("--allow-isolated", action="store_true",
                        help="atomic: accept atoms without any neighbour within the cutoff")
    parser.add_argument("--units", action="append", default=[], metavar="NAME=UNIT",
                        help="atomic: the unit of a label (repeatable, or comma-separated), e.g. "
                             "REF_energy=eV; energies: eV is a total, eV/atom per atom")
    parser.add_argument("--heads", default=None, metavar="NAME[,NAME...]",
                        help="atomic: the labels that become heads (default: every label); may name an "
                             "input array such as momenta; an unknown name is an error listing the labels")
    parser.add_argument("--predict-only", action="store_true",
                        help="build a dataset without labels (for predict, not for training) instead of "
                             "refusing it")
    parser.add_argument("--features", default="", help="continuum: point-data arrays forming x, comma-separated")
    parser.add_argument("--targets", default="", help="continuum: point-data arrays stored as node heads")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes of the in-memory build (default 1); a streaming build runs "
                             "in parallel under mpiexec instead")
    parser.add_argument("--shard-size", type=int, default=None, metavar="N",
                        help="stream: write graphs as they are built, N per shard, into a sharded dataset "
                             "directory (bounded memory; in parallel under mpiexec -n P); splits drawn per "
                             "structure, no duplicate check across splits (see below)")
    parser.add_argument("--append", action="store_true",
                        help="with --shard-size: add the graphs as new shards of the sharded dataset at OUTPUT")
    parser.add_argument("--layout", default=None, metavar="NAME",
                        help="how compactly graphs are stored (graph_builders.store.layouts): hydragnn (the "
                             "default; HydraGNN reads it as written) or compact (int32 edge_index, edge "
                             "lengths recomputed on read: about half the bytes, for training here; HydraGNN's "
                             "EGNN refuses int32 edge_index); with --append the dataset's")
    parser.add_argument("--heads-from", type=int, default=1000, metavar="N",
                        help="with --shard-size: decide the heads and graph attributes from the first N "
                             "graphs (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random train/val/test split")
    parser.add_argument("--fractions", default="0.8,0.1,0.1",
                        help="train,val,test fractions (default 0.8,0.1,0.1); a fourth number adds a calibration "
                             "split that select --calibrate fits the uncertainty on, e.g. 0.7,0.1,0.1,0.1")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _chosen_heads(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The names of --heads (None when not given); UserError for an empty list or another scale."""
    from hydragnn_ensemble.cli import UserError

    if args.heads is None:
        return None
    if args.scale != "atomic":
        raise UserError(f"--heads applies to --scale atomic; for {args.scale} the heads are "
                        + ("the y_<head> arrays of the .npz files" if args.scale == "mesoscale" else "--targets"))
    names = _names(args.heads)
    if not names:
        raise UserError(f"--heads takes label names, e.g. energy,forces; got {args.heads!r}")
    return names


def parse_units(values: list[str]) -> tuple[tuple[str, str], ...]:
    """['REF_energy=eV', 'a=GPa,b=K'] -> (('REF_energy', 'eV'), ('a', 'GPa'), ('b', 'K')); UserError
    for an item without '='."""
    from hydragnn_ensemble.cli import UserError

    pairs = []
    for item in (part.strip() for value in values for part in value.split(",")):
        if not item:
            continue
        name, sep, unit = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--units takes NAME=UNIT (e.g. REF_energy=eV), got {item!r}")
        pairs.append((name.strip(), unit.strip()))
    return tuple(pairs)


def parse_fractions(text: str) -> tuple[float, ...]:
    """'0.8,0.1,0.1' -> (0.8, 0.1, 0.1); a fourth number is the calibration split's fraction.
    UserError unless three or four non-negative numbers summing to 1."""
    from hydragnn_ensemble.cli import UserError

    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"--fractions must be numbers like 0.8,0.1,0.1 or 0.7,0.1,0.1,0.1, got {text!r}") from None
    if len(values) not in (3, 4) or min(values) < 0 or abs(sum(values) - 1.0) > 1e-6:
        raise UserError("--fractions must be three (train,val,test) or four (and calibration) non-negative "
                        f"numbers summing to 1, got {text!r}")
    return values


def split_with_duplicate_check(graphs: list, splits: dict | None, seed: int,
                               fractions: tuple[float, ...]) -> dict:
    """The splits ``write_dataset`` will store, with a warning on stderr for exact duplicate
    structures across them (:mod:`graph_builders.store.duplicates`)."""
    import sys

    from graph_builders.store import resolve_splits
    from graph_builders.store.duplicates import duplicate_warning, duplicates_across_splits

    resolved = resolve_splits(len(graphs), splits, seed, fractions)
    warning = duplicate_warning(duplicates_across_splits(graphs, resolved), resolved)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    return {name: indices.tolist() for name, indices in resolved.items()}


def paths(args: argparse.Namespace):
    """The inputs are read; the dataset and its errors list are written."""
    from graph_builders.batch_build import is_errors_file
    from graph_builders.store import is_project_dataset
    from hydragnn_ensemble.path_guard import CommandPaths, Output

    errors = errors_path(args.output)
    return CommandPaths(inputs=tuple(Path(p) for p in args.inputs),
                        outputs=(Output(args.output, "dataset", is_project_dataset),
                                 Output(errors, "errors list", is_errors_file)))


def run(args: argparse.Namespace) -> int:
    import torch
    from mpi4py import MPI

    from graph_builders.batch_build import BatchBuildOptions, expand_inputs
    from hydragnn_ensemble.cli import UserError

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    try:
        if args.workers < 1:
            raise UserError(f"--workers must be >= 1, got {args.workers}")
        if args.cutoff <= 0:
            raise UserError(f"--cutoff must be > 0, got {args.cutoff}")
        if args.max_neighbours is not None and args.max_neighbours < 1:
            raise UserError(f"--max-neighbours must be >= 1, got {args.max_neighbours}")
        _check_mode(args, comm.Get_size())
        fractions = parse_fractions(args.fractions)
        chosen = _chosen_heads(args)
        options = BatchBuildOptions(args.scale, args.cutoff, args.max_neighbours, _names(args.features),
                                    _names(args.targets), allow_isolated=args.allow_isolated,
                                    units=parse_units(args.units), heads=chosen)
        files = expand_inputs(args.inputs)
        if not files:
            raise UserError("no input files found in " + ", ".join(args.inputs))
    except UserError:
        if comm.Get_rank() != 0:
            return 2  # rank 0 says why, once
        raise
    if args.shard_size is not None:
        from hydragnn_ensemble.cli.build_stream import run_streaming

        return run_streaming(args, options, files, fractions, comm)
    return _run_in_memory(args, options, files, fractions, chosen)


def _check_mode(args: argparse.Namespace, ranks: int) -> None:
    """UserError for options of the streaming build without --shard-size, and the reverse."""
    from hydragnn_ensemble.cli import UserError

    if args.layout is not None:
        from graph_builders.store.layouts import LAYOUTS

        if args.layout not in LAYOUTS:
            raise UserError(f"--layout: unknown layout {args.layout!r}; layouts: {', '.join(LAYOUTS)}")
    if args.shard_size is None:
        if ranks > 1:
            raise UserError(f"build-graphs runs under mpiexec ({ranks} processes) only with --shard-size N "
                            "(the streaming build); without it, run one process (--workers for more)")
        if args.append:
            raise UserError("--append adds shards to a sharded dataset: give --shard-size N too")
        return
    if args.shard_size < 1:
        raise UserError(f"--shard-size must be >= 1, got {args.shard_size}")
    if args.heads_from < 1:
        raise UserError(f"--heads-from must be >= 1, got {args.heads_from}")
    if args.workers != 1:
        raise UserError("--workers applies to the in-memory build; a streaming build (--shard-size) runs in "
                        "parallel under mpiexec -n P")


def _run_in_memory(args: argparse.Namespace, options, files: list[Path], fractions: tuple[float, ...],
                   chosen: tuple[str, ...] | None) -> int:
    """Build every graph, then write one dataset file (the default mode)."""
    from graph_builders.batch_build import build_graphs, write_errors
    from graph_builders.store import DEFAULT_LAYOUT, describe, write_dataset
    from hydragnn_ensemble.cli import UserError

    result = build_graphs(files, options, workers=args.workers, progress=not args.no_progress)
    output: Path = args.output
    errors = errors_path(output)
    for note in result.notes:
        print(f"note: {note}")
    if not result.graphs:
        if result.failures:
            write_errors(errors, result.failures)
        raise UserError(f"no graph could be built from {result.num_files} files; reasons in {errors}")
    check_heads(result, chosen)
    if not result.heads.names and not args.predict_only:
        raise UserError(no_heads_message(result, args.scale, [str(p) for p in args.inputs]))
    if result.failures:
        write_errors(errors, result.failures)
    elif errors.exists():
        errors.unlink()  # a stale list from an earlier run of the same output
    good_files = result.files_with_graphs
    metadata = build_metadata(args, good_files, len(result.failures))
    splits = split_with_duplicate_check(result.graphs, None, args.seed, fractions)
    write_dataset(output, result.graphs, result.heads, splits=splits, metadata=metadata, seed=args.seed,
                  progress=not args.no_progress, layout=args.layout or DEFAULT_LAYOUT)
    print(f"built {len(result.graphs)} graphs from {good_files} of {result.num_files} files -> {output}")
    print(describe(output))
    return report_failures(result.failures, errors)
