"""``hydragnn-ensemble demo-data``: build one of the built-in labelled datasets and store it."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "demo-data"
HELP = "Build a built-in labelled dataset (alloy: EMT alloys, polycrystal: grains, fem: heat conduction)."
KINDS = ("alloy", "polycrystal", "fem")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=KINDS, help="which dataset")
    parser.add_argument("-o", "--output", required=True, type=Path, help="dataset to write (.bp)")
    parser.add_argument("--num", type=int, default=None,
                        help="number of samples (default: 2000 alloy, 200 polycrystal, 200 fem)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (samples and split)")
    parser.add_argument("--elements", default=None, help="alloy only: comma-separated elements, e.g. Cu,Ni,Pd")
    parser.add_argument("--components", default=None, help="alloy only: components per alloy, e.g. 2-3 or 2")
    parser.add_argument("--fractions", default="0.8,0.1,0.1",
                        help="train,val,test fractions (default 0.8,0.1,0.1); a fourth number adds a calibration "
                             "split, e.g. 0.7,0.1,0.1,0.1 (what make demo uses)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def parse_components(text: str) -> tuple[int, int]:
    """'2-3' -> (2, 3); '2' -> (2, 2)."""
    from hydragnn_ensemble.cli import UserError

    parts = text.split("-")
    try:
        low, high = (int(parts[0]), int(parts[-1])) if len(parts) in (1, 2) else (0, -1)
    except ValueError:
        low, high = 0, -1
    if not 1 <= low <= high:
        raise UserError(f"--components must look like 2-3 or 2 (1 <= low <= high), got {text!r}")
    return low, high


def paths(args: argparse.Namespace):
    """Nothing is read; the dataset is written (replacing only a dataset this program wrote)."""
    from graph_builders.store import is_project_dataset
    from hydragnn_ensemble.path_guard import CommandPaths, Output

    return CommandPaths(outputs=(Output(args.output, "dataset", is_project_dataset),))


def run(args: argparse.Namespace) -> int:
    import torch

    from graph_builders.store import describe, write_dataset
    from hydragnn_ensemble.cli import UserError
    from hydragnn_ensemble.cli.commands.build_graphs import parse_fractions, split_with_duplicate_check

    torch.set_num_threads(1)
    if args.num is not None and args.num < 1:
        raise UserError(f"--num must be >= 1, got {args.num}")
    if args.kind != "alloy" and (args.elements or args.components):
        raise UserError("--elements and --components apply to the alloy dataset only")
    progress = not args.no_progress
    fractions = parse_fractions(args.fractions)
    kwargs: dict[str, object] = {"seed": args.seed, "progress": progress}
    if args.num is not None:
        kwargs["num_structures" if args.kind == "alloy" else "num_samples"] = args.num
    if args.elements:
        kwargs["elements"] = tuple(e.strip() for e in args.elements.split(",") if e.strip())
    if args.components:
        kwargs["components"] = parse_components(args.components)
    if args.kind == "alloy":
        from graph_builders.datasets.alloy import make_alloy_dataset as make
    elif args.kind == "polycrystal":
        from graph_builders.datasets.polycrystal import make_polycrystal_dataset as make
    else:
        from graph_builders.datasets.fem import make_fem_dataset as make
    try:
        labelled = make(**kwargs)
    except ValueError as exc:  # bad elements / components etc. are the user's to fix
        raise UserError(str(exc)) from exc
    metadata = {**labelled.metadata, "dataset": labelled.name, "seed": args.seed, "created_by": "demo-data"}
    splits = split_with_duplicate_check(list(labelled.graphs), labelled.splits, args.seed, fractions)
    write_dataset(args.output, labelled.graphs, labelled.heads, splits=splits, metadata=metadata,
                  seed=args.seed, progress=progress)
    print(describe(args.output))
    return 0
