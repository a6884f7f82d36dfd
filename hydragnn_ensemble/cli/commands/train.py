"""``hydragnn-ensemble train CONFIG.json --dataset DATASET.bp -o RUN_DIR``: train one trial.

Writes ``RUN_DIR/result.json`` whatever happens (exit code 0 for completed/diverged/timeout,
1 for failed), except when the machine fails it (a full disk, an I/O error): exit code 75 then.
For a data-parallel trial every process runs this command with its ``--rank``, the same
``--world-size`` and either ``--init-method`` or ``--master-addr``/``--master-port``.
"""

from __future__ import annotations

import argparse
import sys
import time

NAME = "train"
HELP = "train one HydraGNN-style model on a dataset file (one HPO trial)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from hydragnn_ensemble.cli import add_old_name

    parser.add_argument("config", help="HydraGNN JSON config")
    parser.add_argument("--dataset", default=None, help="dataset file (.bp) from build-graphs/demo-data (required)")
    add_old_name(parser, "--data", "--dataset", "dataset")
    parser.add_argument("-o", "--output", required=True, help="run directory (result.json, checkpoint, log)")
    parser.add_argument("--time-budget", type=float, default=None, metavar="S",
                        help="wall-clock budget in seconds (overrides Training.time_budget_s)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="auto: CUDA when available, else CPU (default auto)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    dist = parser.add_argument_group("data-parallel trial (torch.distributed)")
    dist.add_argument("--rank", type=int, default=0, help="this process's rank in the trial (default 0)")
    dist.add_argument("--world-size", type=int, default=1, help="processes in the trial (default 1)")
    dist.add_argument("--local-rank", type=int, default=None, help="GPU index on this node")
    dist.add_argument("--init-method", default=None,
                      help="torch.distributed init URL (tcp://HOST:PORT or file:///PATH)")
    dist.add_argument("--master-addr", default=None, help="rendezvous host (with --master-port)")
    dist.add_argument("--master-port", type=int, default=None, help="rendezvous port (with --master-addr)")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()  # the budget counts from here: importing torch is part of a trial
    import torch

    from hydragnn_ensemble.cli import UserError
    from hydragnn_ensemble.infrastructure import EXIT_INFRASTRUCTURE, infrastructure_cause
    from hydragnn_ensemble.result import TrialStatus
    from hydragnn_ensemble.train import DistributedContext, train_trial
    from hydragnn_ensemble.train.allocator import keep_freed_memory

    if args.dataset is None:
        raise UserError("train needs --dataset DATASET.bp")
    torch.set_num_threads(1)
    keep_freed_memory()
    if args.init_method and (args.master_addr or args.master_port):
        raise UserError("give either --init-method or --master-addr/--master-port, not both")
    if bool(args.master_addr) != bool(args.master_port):
        raise UserError("--master-addr and --master-port go together")
    try:
        if args.init_method:
            ctx = DistributedContext(rank=args.rank, world_size=args.world_size,
                                     init_method=args.init_method, local_rank=args.local_rank)
        else:
            ctx = DistributedContext.from_master(args.rank, args.world_size, args.master_addr,
                                                 args.master_port, local_rank=args.local_rank)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    try:
        result = train_trial(args.config, args.dataset, args.output, time_budget_s=args.time_budget,
                             device=args.device, progress=not args.no_progress, distributed=ctx,
                             started_at=started)
    except OSError as exc:  # train_trial raises only the machine's faults (full disk, I/O error)
        cause = infrastructure_cause(exc)
        if cause is None:
            raise
        print(f"error: infrastructure fault, not this trial's: {cause}", file=sys.stderr, flush=True)
        return EXIT_INFRASTRUCTURE
    if ctx.is_main:
        objective = "none" if result.objective is None else f"{result.objective:.6g}"
        resumed = f" (resumed after epoch {result.resumed_from})" if result.resumed_from else ""
        print(f"{result.status}: objective {objective}, {result.epochs} epoch(s){resumed}, "
              f"{result.wall_time_s:.1f} s -> {args.output}")
        if result.failure_reason:
            print(f"reason: {result.failure_reason}")
    return 1 if result.status == TrialStatus.FAILED else 0
