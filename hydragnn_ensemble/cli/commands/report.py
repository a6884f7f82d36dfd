"""``hydragnn-ensemble report CAMPAIGN_DIR``: summary table and plots of an HPO campaign."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "report"
HELP = "Summarise an HPO campaign directory: top trials, status counts, slot use, plots."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign_dir", type=Path, help="campaign directory (journal.jsonl or results.csv)")
    parser.add_argument("--top", type=int, default=10, metavar="N", help="trials in the table (default 10)")
    parser.add_argument("--watch", type=float, default=None, metavar="SECONDS",
                        help="rewrite the report every SECONDS while the campaign runs (ends when it finishes)")
    parser.add_argument("--ensemble", type=Path, default=None, metavar="DIR",
                        help="an ensemble directory (select) whose members and plots the HTML report shows")


def run(args: argparse.Namespace) -> int:
    from hydragnn_ensemble.cli import UserError
    from hpo.journal import JournalCorruptError, JournalEventError
    from hpo.report import watch_report, write_report

    if args.top < 1:
        raise UserError(f"--top must be >= 1, got {args.top}")
    if not args.campaign_dir.is_dir():
        raise UserError(f"{args.campaign_dir}: not a directory")
    try:
        if args.watch is not None:
            if args.watch <= 0:
                raise UserError(f"--watch must be > 0 seconds, got {args.watch}")
            files = watch_report(args.campaign_dir, args.watch, args.top, args.ensemble,
                                 on_refresh=lambda f: print(f"report refreshed: {f.html}", flush=True))
        else:
            files = write_report(args.campaign_dir, top=args.top, ensemble_dir=args.ensemble)
    except (FileNotFoundError, JournalCorruptError, JournalEventError) as exc:
        raise UserError(str(exc)) from exc
    print(files.text)
    print(f"\nplots: {files.objective_png}\n       {files.gantt_png}")
    for extra in (files.curves_png, files.importance_png):
        if extra is not None:
            print(f"       {extra}")
    print(f"report: {files.html}")
    return 0
