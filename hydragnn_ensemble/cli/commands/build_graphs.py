"""``hydragnn-ensemble build-graphs``: graphs from structure, microstructure or mesh files into one dataset."""

from __future__ import annotations

import argparse
from pathlib import Path

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

exit status: 0 everything built; 1 some files or structures failed, the others were written;
             2 nothing could be built, no labels without --predict-only, an unknown --heads
             name (or a usage error); nothing is written then.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="input files or directories")
    parser.add_argument("-o", "--output", required=True, type=Path, help="dataset to write (.bp)")
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
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
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


def check_heads(result, chosen: tuple[str, ...] | None) -> None:
    """UserError when a --heads name is no label of the structures, or could not become a head."""
    from hydragnn_ensemble.cli import UserError

    if chosen is None:
        return
    unknown = [name for name in chosen if name not in result.available]
    if unknown:
        labels = ", ".join(sorted(result.available)) or "none"
        raise UserError(f"--heads: no label {', '.join(map(repr, unknown))} in the structures; "
                        f"their labels: {labels}")
    missing = [name for name in chosen if name not in result.heads.names]
    if missing:
        why = [note for note in result.notes for name in missing if note.startswith(f"target {name!r} dropped")]
        raise UserError(f"--heads: {', '.join(map(repr, missing))} cannot be a head: " + "; ".join(why))


def no_heads_message(result, scale: str, inputs: list[str]) -> str:
    """Why a dataset without heads is refused, and how to build it anyway."""
    where = ", ".join(inputs[:3]) + (f" and {len(inputs) - 3} more" if len(inputs) > 3 else "")
    if scale == "atomic" and any(note.startswith("target ") for note in result.notes):
        what = (f"no label is stored alike with every one of the {len(result.graphs)} structures of {where} "
                "(see the notes above)")
    elif scale == "atomic":
        what = (f"no labels in the {len(result.graphs)} structures of {where}: no energy, forces or other "
                "label is stored with them (a POSCAR or a CIF holds structures only)")
    elif scale == "mesoscale":
        what = f"no labels in {where}: no y_<head> arrays in the .npz files"
    else:
        what = f"no labels for the meshes of {where}: no --targets named"
    return (f"{what}, so there is nothing to train on; pass --predict-only to build a dataset for "
            "prediction only")


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

    errors = args.output.with_name(args.output.name + ".errors.tsv")
    return CommandPaths(inputs=tuple(Path(p) for p in args.inputs),
                        outputs=(Output(args.output, "dataset", is_project_dataset),
                                 Output(errors, "errors list", is_errors_file)))


def run(args: argparse.Namespace) -> int:
    import torch

    from graph_builders.batch_build import BatchBuildOptions, build_graphs, expand_inputs, write_errors
    from graph_builders.store import describe, write_dataset
    from hydragnn_ensemble.cli import UserError

    torch.set_num_threads(1)
    if args.workers < 1:
        raise UserError(f"--workers must be >= 1, got {args.workers}")
    if args.cutoff <= 0:
        raise UserError(f"--cutoff must be > 0, got {args.cutoff}")
    if args.max_neighbours is not None and args.max_neighbours < 1:
        raise UserError(f"--max-neighbours must be >= 1, got {args.max_neighbours}")
    fractions = parse_fractions(args.fractions)
    chosen = _chosen_heads(args)
    options = BatchBuildOptions(args.scale, args.cutoff, args.max_neighbours, _names(args.features), _names(args.targets),
                                allow_isolated=args.allow_isolated, units=parse_units(args.units), heads=chosen)
    files = expand_inputs(args.inputs)
    if not files:
        raise UserError("no input files found in " + ", ".join(args.inputs))

    result = build_graphs(files, options, workers=args.workers, progress=not args.no_progress)
    output: Path = args.output
    errors_path = output.with_name(output.name + ".errors.tsv")
    for note in result.notes:
        print(f"note: {note}")
    if not result.graphs:
        if result.failures:
            write_errors(errors_path, result.failures)
        raise UserError(f"no graph could be built from {result.num_files} files; reasons in {errors_path}")
    check_heads(result, chosen)
    if not result.heads.names and not args.predict_only:
        raise UserError(no_heads_message(result, args.scale, [str(p) for p in args.inputs]))
    if result.failures:
        write_errors(errors_path, result.failures)
    elif errors_path.exists():
        errors_path.unlink()  # a stale list from an earlier run of the same output
    good_files = result.files_with_graphs
    metadata = {"scale": args.scale, "created_by": "build-graphs", "input_files": good_files,
                "failures": len(result.failures)}
    if args.scale == "atomic":
        metadata["cutoff"] = args.cutoff
        if args.max_neighbours is not None:
            metadata["max_neighbours"] = args.max_neighbours
    splits = split_with_duplicate_check(result.graphs, None, args.seed, fractions)
    write_dataset(output, result.graphs, result.heads, splits=splits, metadata=metadata, seed=args.seed,
                  progress=not args.no_progress)
    print(f"built {len(result.graphs)} graphs from {good_files} of {result.num_files} files -> {output}")
    print(describe(output))
    if result.failures:
        print(f"{len(result.failures)} files or structures failed; reasons in {errors_path}:")
        for failure in result.failures[:10]:
            print(f"  {failure.file}: {failure.reason}")
        if len(result.failures) > 10:
            print(f"  ... and {len(result.failures) - 10} more")
        return 1
    return 0
