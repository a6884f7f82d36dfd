"""``hydragnn-ensemble hpo CAMPAIGN.yaml [-o DIR] [--resume]``: run an HPO campaign under MPI.

Run it with one rank more than the slots you want: ``mpiexec -n 5 hydragnn-ensemble hpo c.yaml``
gives rank 0 (scheduler) and 4 agents (one trial slot each).

Exit codes: 0 the campaign ended (budget, max_trials); 1 the failure threshold stopped it; 2 it could
not start (bad campaign file, configs that do not fit the dataset, directory in use); 75 an
infrastructure fault stopped it (disk full, I/O error, trial processes that cannot start, every node
that could run the waiting trials drained after node-level failures): fix it and run the same
command with --resume.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.runtime import CampaignSummary

NAME = "hpo"
HELP = "run (or --resume) a hyperparameter-optimization campaign under mpirun/srun"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", help="campaign YAML file")
    parser.add_argument("-o", "--output", default=None,
                        help="campaign directory (default: ./<campaign file stem>_campaign)")
    parser.add_argument("--dataset", default=None,
                        help="dataset file to use instead of the campaign's 'dataset' (give it again on --resume)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the campaign in the directory after a crash or a stop")
    parser.add_argument("--force-unlock", action="store_true",
                        help="take over a lock held by a campaign on another host (only if it is dead)")
    parser.add_argument("--no-progress", action="store_true", help="no live progress line")


def _summary_lines(summary: "CampaignSummary") -> list[str]:
    """The campaign's closing lines: how it ended (and why it ran past max_time_s), the trials per
    status with those that had no objective, the best, and the failures by reason (which add up to
    the trials without an objective, status by status)."""
    from hpo.failures import failures_heading, status_words

    counts = status_words(summary.statuses, summary.without_objective, number_first=True)
    best = "-" if summary.best_objective is None else f"{summary.best_objective:.6g} (trial {summary.best_trial})"
    lines = [f"campaign finished: {summary.reason}"]
    if summary.time_note:
        lines.append(f"  {summary.time_note}")
    lines += [
        f"  trials finished: {summary.finished} ({counts})",
        f"  best objective: {best}",
        f"  this run: {summary.elapsed_s:.1f} s",
    ]
    if summary.failure_reasons:
        lines.append(f"  failures by reason ({failures_heading(summary.without_objective)}; the trials' logs: "
                     "CAMPAIGN_DIR/trials/<id>/train.log):")
        lines.extend(f"    {n:>4} x {reason}" for reason, n in summary.failure_reasons)
        rest = sum(summary.without_objective.values()) - sum(n for _, n in summary.failure_reasons)
        if rest > 0:
            lines.append(f"    {rest:>4} x (other reasons)")
    return lines


def run(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from hpo.campaign import CampaignConfigError
    from hpo.campaign_dir import CampaignDirError
    from hydragnn_ensemble.cli import UserError
    from scheduler.runtime import CampaignSetupError, run_campaign
    from scheduler.runtime.faults import EXIT_INFRASTRUCTURE, InfrastructureFault

    comm = MPI.COMM_WORLD
    try:
        summary = run_campaign(args.campaign, args.output, resume=args.resume, comm=comm,
                               force_unlock=args.force_unlock, progress=not args.no_progress,
                               dataset=args.dataset)
    except (CampaignSetupError, CampaignDirError, CampaignConfigError) as exc:
        if comm.Get_rank() != 0 and comm.Get_size() > 1:
            return 2  # rank 0 prints the reason once
        raise UserError(str(exc)) from None
    except InfrastructureFault as fault:  # rank 0: the machine's fault, not a trial's
        print(f"error: the campaign stopped on an infrastructure fault: {fault}", file=sys.stderr)
        return EXIT_INFRASTRUCTURE
    if summary is None:  # an agent rank
        return 0
    for line in _summary_lines(summary):
        print(line)
    if summary.stopped_by_failures:
        print(summary.failure_message, file=sys.stderr)
        return 1
    if summary.cannot_place is not None:
        print(f"error: the campaign stopped: no node left in service can run its trials: {summary.cannot_place}",
              file=sys.stderr)
        return EXIT_INFRASTRUCTURE
    return 0
