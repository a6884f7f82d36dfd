"""``hydragnn-ensemble export CAMPAIGN_DIR --top-k K --format FORMAT -o DIR`` (FORMAT: one of
:data:`ensemble.export.FORMATS`).

Writes the K best completed trials' configurations (the base config with each trial's values,
checked against the trial's own config.json) and ``members.csv`` (hyperparameters and metrics).
With ``--format hydragnn`` every member and every head HydraGNN cannot take is named on stdout, one
``left out: ...`` line each with the reason, before the files written.
Exit code 0 on success, 2 for a user error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hydragnn_ensemble.cli import RegistryNames

NAME = "export"
HELP = "export the top-K configurations of a campaign (HydraGNN JSON, json, yaml, csv) or the whole campaign for Optuna"


def _formats() -> tuple[str, ...]:
    """The export formats: :data:`ensemble.export.FORMATS`."""
    from ensemble.export import FORMATS

    return FORMATS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign_dir", type=Path, help="campaign directory")
    parser.add_argument("-o", "--output", required=True, type=Path, help="output directory")
    parser.add_argument("--top-k", type=int, default=5, metavar="K", help="number of trials (default 5)")
    parser.add_argument("--format", choices=RegistryNames(_formats), default="hydragnn", metavar="FORMAT",
                        help="one of %(choices)s (default hydragnn); "
                             "hydragnn: one HydraGNN JSON per trial; json/yaml: one file with all; "
                             "csv: the table only (always written as members.csv); optuna: the whole "
                             "campaign as an Optuna journal file for optuna-dashboard")
    parser.add_argument("--with-dataset", action="store_true",
                        help="with --format hydragnn: also write hydragnn_dataset.bp, the campaign's dataset "
                             "in the layout the configs describe (node-head targets as columns of x, the "
                             "exported heads in y), which HydraGNN's AdiosDataset reads with var_config")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (--with-dataset has them)")


def run(args: argparse.Namespace) -> int:
    from hydragnn_ensemble.cli import UserError
    from ensemble.export import export_top_k

    if args.top_k < 1:
        raise UserError(f"--top-k must be >= 1, got {args.top_k}")
    try:
        result = export_top_k(args.campaign_dir, args.top_k, args.format, args.output, args.with_dataset,
                              progress=not args.no_progress)
    except (ValueError, FileNotFoundError) as exc:
        raise UserError(str(exc)) from exc
    from ensemble.campaign import STOPPED_EXCLUSION

    stopped = [t for t in result.excluded if t.excluded_because == STOPPED_EXCLUSION]
    for trial in result.excluded:
        if trial.excluded_because != STOPPED_EXCLUSION:
            objective = "-" if trial.reported_objective is None else f"{trial.reported_objective:.6g}"
            print(f"warning: trial {trial.trial_id} (objective {objective}) would have ranked in the top "
                  f"{args.top_k} but is left out: {trial.excluded_because}", file=sys.stderr)
    if stopped:
        print(f"note: {len(stopped)} trial(s) that would have ranked in the top {args.top_k} were stopped early "
              f"by the campaign's stopper and are not exported: {', '.join(str(t.trial_id) for t in stopped)}",
              file=sys.stderr)
    for line in result.left_out_lines():
        print(line)
    for path in result.files:
        print(path)
    return 0
