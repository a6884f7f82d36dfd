"""What ``build-graphs`` checks and reports, in both of its modes (in memory, streaming): the heads
chosen, a dataset without heads, the metadata, where failures are listed and how they are shown."""

from __future__ import annotations

import argparse
from pathlib import Path


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


def no_heads_message(result, scale: str, inputs: list[str], count: int | None = None) -> str:
    """Why a dataset without heads is refused, and how to build it anyway (``count``: the
    structures looked at, default all of ``result.graphs``)."""
    count = len(result.graphs) if count is None else count
    where = ", ".join(inputs[:3]) + (f" and {len(inputs) - 3} more" if len(inputs) > 3 else "")
    if scale == "atomic" and any(note.startswith("target ") for note in result.notes):
        what = (f"no label is stored alike with every one of the {count} structures of {where} "
                "(see the notes above)")
    elif scale == "atomic":
        what = (f"no labels in the {count} structures of {where}: no energy, forces or other "
                "label is stored with them (a POSCAR or a CIF holds structures only)")
    elif scale == "mesoscale":
        what = f"no labels in {where}: no y_<head> arrays in the .npz files"
    else:
        what = f"no labels for the meshes of {where}: no --targets named"
    return (f"{what}, so there is nothing to train on; pass --predict-only to build a dataset for "
            "prediction only")


def errors_path(output: Path) -> Path:
    """Where the failures of a build of ``output`` are listed."""
    return output.with_name(output.name + ".errors.tsv")


def build_metadata(args: argparse.Namespace, good_files: int, failures: int) -> dict:
    """The dataset's metadata: how it was built."""
    metadata = {"scale": args.scale, "created_by": "build-graphs", "input_files": good_files, "failures": failures}
    if args.scale == "atomic":
        metadata["cutoff"] = args.cutoff
        if args.max_neighbours is not None:
            metadata["max_neighbours"] = args.max_neighbours
    return metadata


def report_failures(failures: list, errors: Path) -> int:
    """Print the first failures; the exit code (1 when any failed, else 0)."""
    if not failures:
        return 0
    print(f"{len(failures)} files or structures failed; reasons in {errors}:")
    for failure in failures[:10]:
        print(f"  {failure.file}: {failure.reason}")
    if len(failures) > 10:
        print(f"  ... and {len(failures) - 10} more")
    return 1
