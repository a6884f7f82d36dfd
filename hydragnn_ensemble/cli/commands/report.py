"""``hydragnn-ensemble report CAMPAIGN_DIR``: summary table and plots of an HPO campaign."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "report"
HELP = "Summarise an HPO campaign directory: top trials, status counts, slot use, plots."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from hydragnn_ensemble.cli import add_old_name

    parser.add_argument("campaign_dir", type=Path, help="campaign directory (journal.jsonl or results.csv)")
    parser.add_argument("--top-k", type=int, default=10, metavar="K", help="trials in the table (default 10)")
    add_old_name(parser, "--top", "--top-k", "top_k", type=int)
    parser.add_argument("--watch", type=float, default=None, metavar="SECONDS",
                        help="rewrite the report every SECONDS while the campaign runs (ends when it finishes)")
    parser.add_argument("--ensemble", type=Path, default=None, metavar="DIR",
                        help="an ensemble directory (select) whose members and plots the HTML report shows")
    parser.add_argument("--no-progress", action="store_true",
                        help="accepted as by every command (report draws no progress bar)")


def run(args: argparse.Namespace) -> int:
    from hydragnn_ensemble.cli import UserError
    from hpo.campaign_reader import CampaignReadError
    from hpo.journal import JournalCorruptError, JournalEventError
    from hpo.report import watch_report, write_report
    from hydragnn_ensemble.manifest_members import read_manifest_members

    if args.top_k < 1:
        raise UserError(f"--top-k must be >= 1, got {args.top_k}")
    if not args.campaign_dir.is_dir():
        raise UserError(f"{args.campaign_dir}: not a directory")
    if args.ensemble is not None:
        try:
            read_manifest_members(args.ensemble)
        except ValueError as exc:
            raise UserError(f"--ensemble: {exc}") from None
    try:
        if args.watch is not None:
            if args.watch <= 0:
                raise UserError(f"--watch must be > 0 seconds, got {args.watch}")
            files = watch_report(args.campaign_dir, args.watch, args.top_k, args.ensemble,
                                 on_refresh=lambda f: print(f"report refreshed: {f.html}", flush=True))
        else:
            files = write_report(args.campaign_dir, top=args.top_k, ensemble_dir=args.ensemble)
    except (FileNotFoundError, CampaignReadError, JournalCorruptError, JournalEventError) as exc:
        raise UserError(str(exc)) from None
    print(files.text)
    drawn = [p for p in (files.objective_png, files.gantt_png, files.curves_png, files.cost_png,
                         files.importance_png, files.parallel_png, files.pareto_png) if p is not None and p.exists()]
    if drawn:
        print("\nplots: " + "\n       ".join(str(p) for p in drawn))
    for name, error in files.figure_errors.items():
        print(f"warning: figure {name!r} not drawn: {error}", file=sys.stderr)
    print(f"report: {files.html}")
    return 0
