"""``hydragnn-ensemble predict ENSEMBLE_DIR INPUT... -o predictions.csv [--forces-out F.extxyz]``.

Inputs: any structure file ASE reads (several structures per file allowed) and ``.bp`` datasets.
Each structure's graph is built once and every member predicts it. Writes one CSV row per structure
(graph heads: mean, std, epistemic std; see ``ensemble.outputs``) and, with ``--forces-out``, the
node heads (forces) per atom as extxyz arrays ``<head>_mean`` / ``<head>_std``.

Bad inputs (unreadable file, invalid structure) are listed on stderr as ``FILE[INDEX]: reason``
and the good ones are still predicted.

Exit codes: 0 every input predicted; 1 some inputs bad (the others were predicted and written);
2 user error: bad ensemble directory, or no input could be predicted (nothing written).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

NAME = "predict"
HELP = "predict structures / datasets with an ensemble: mean and uncertainty per head"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ensemble_dir", type=Path, help="ensemble directory (from `select`)")
    parser.add_argument("inputs", nargs="+", type=Path, help="structure files (anything ASE reads) or .bp datasets")
    parser.add_argument("-o", "--output", required=True, type=Path, help="predictions CSV to write")
    parser.add_argument("--forces-out", type=Path, default=None,
                        help="extxyz with per-atom node-head predictions (mean and std arrays)")
    parser.add_argument("--batch-size", type=int, default=32, help="structures per forward pass (default 32)")
    parser.add_argument("--device", action="append", default=None, metavar="DEV",
                        help="torch device for members (repeat to spread members over GPUs; default cpu)")
    parser.add_argument("--allow-isolated", action="store_true",
                        help="accept atoms without any neighbour within the ensemble's cutoff")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def paths(args: argparse.Namespace):
    """The ensemble directory and the inputs are read; the CSV (and --forces-out) written."""
    from ensemble.outputs import is_node_extxyz, is_predictions_csv
    from hydragnn_ensemble.path_guard import CommandPaths, Output

    outputs = [Output(args.output, "predictions CSV", is_predictions_csv)]
    if args.forces_out is not None:
        outputs.append(Output(args.forces_out, "per-atom predictions file", is_node_extxyz))
    return CommandPaths(inputs=(args.ensemble_dir, *args.inputs), outputs=tuple(outputs))


def run(args: argparse.Namespace) -> int:
    import torch

    from graph_builders.atomic import atoms_to_graph
    from graph_builders.schema import MEV_PER_ATOM, in_mev_per_atom
    from hydragnn_ensemble.cli import UserError
    from ensemble.predictor import EnsemblePredictor
    from ensemble.inputs import load_inputs
    from ensemble.outputs import reference_errors, write_node_extxyz, write_predictions_csv

    torch.set_num_threads(1)
    builder = partial(atoms_to_graph, allow_isolated=True) if args.allow_isolated else None
    try:
        predictor = EnsemblePredictor(args.ensemble_dir, devices=args.device, batch_size=args.batch_size,
                                      progress=not args.no_progress, graph_builder=builder)
    except (ValueError, OSError) as exc:
        raise UserError(str(exc)) from exc
    items, bad = load_inputs(args.inputs, predictor)
    for b in bad:
        print(f"bad input: {b.describe()}", file=sys.stderr)
    if not items:
        raise UserError(f"none of the {len(args.inputs)} input file(s) could be predicted")
    prediction = predictor.predict_graphs([item.graph for item in items])
    write_predictions_csv(items, prediction, args.output)
    print(f"{len(items)} structure(s) predicted by {predictor.num_members} member(s) -> {args.output}")
    for head, error in reference_errors(items, prediction).items():
        unit = predictor.heads[head].unit
        per_atom = ("" if error.mae_per_atom is None else
                    f" ({in_mev_per_atom(error.mae_per_atom, unit):.4g} {MEV_PER_ATOM})")
        print(f"  {head}: MAE {error.mae:.4g}{' ' + unit if unit else ''}{per_atom} against the labels of "
              f"{error.count} input structure(s) "
              f"(columns {head}_ref/_error{'' if predictor.heads[head].level == 'graph' else ', _mae'})")
    if prediction.in_domain is not None and not prediction.in_domain.all():
        outside = [k for k, inside in enumerate(prediction.in_domain) if not inside]
        print(f"{len(outside)} of {len(items)} outside the ensemble's applicability domain (in_domain = no; "
              "their std includes the out-of-domain term):")
        for k in outside[:10]:
            print(f"  {items[k].source}[{items[k].index}] {items[k].name}: {'; '.join(prediction.reasons[k])}")
        if len(outside) > 10:
            print(f"  ... and {len(outside) - 10} more (all in the CSV's domain_reasons)")
    if args.forces_out is not None:
        written = write_node_extxyz(items, prediction, args.forces_out)
        if written is None:
            print("no node-level heads: --forces-out not written", file=sys.stderr)
        else:
            print(f"per-atom predictions -> {written}")
    if bad:
        print(f"{len(bad)} bad input(s) skipped (listed above)", file=sys.stderr)
        return 1
    return 0
