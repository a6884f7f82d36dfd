"""``hydragnn-ensemble simulate``: a campaign on a simulated cluster (real pool, policy, cost model)."""

from __future__ import annotations

import argparse

from hydragnn_ensemble.cli import RegistryNames, StoreListingNames

NAME = "simulate"
HELP = "simulate an HPO campaign's placement on a large cluster (discrete events, virtual clock)"


def _policy_names() -> list[str]:
    """The placement policies: the names of :data:`scheduler.placement.registry.POLICY_FACTORIES`."""
    from scheduler.placement.registry import policy_names

    return policy_names()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", nargs="?", default=None,
                        help="a campaign file: plan it on --nodes for --hours (its search space, limits, stopper, "
                             "resources and dataset; scheduler.simulator.campaign_plan); without it a synthetic "
                             "workload")
    parser.add_argument("--hours", type=float, default=None, help="with a campaign file: the allocation's hours")
    parser.add_argument("--dataset", default=None, help="with a campaign file: the dataset instead of its own")
    parser.add_argument("--learn-from", default=None, metavar="CAMPAIGN_DIR",
                        help="with a campaign file: a finished campaign on this machine whose epochs teach the "
                             "cost model first")
    parser.add_argument("--nodes", type=int, default=None,
                        help="nodes of the simulated machine (default 8192; 1 with a campaign file)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="slots (GPUs/GCDs) per node (default 8)")
    parser.add_argument("--trials", type=int, default=800, help="trials of the synthetic workload (default 800)")
    parser.add_argument("--policy", default="load-aware", action=StoreListingNames, names=RegistryNames(_policy_names),
                        help="a placement policy of scheduler.placement.registry: %(names)s (default load-aware)")
    parser.add_argument("--block-nodes", type=int, default=256, help="block of the fixed-block policy")
    parser.add_argument("--estimate-error", type=float, default=0.5,
                        help="sigma of the lognormal scatter of true run times around the predictions")
    parser.add_argument("--target-duration", type=float, default=1800.0, help="sizing target (s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the workload and the estimate errors")
    parser.add_argument("--space", default="hydragnn",
                        help="search space of the synthetic trials (scheduler.simulator.workload.SEARCH_SPACES): "
                             "hydragnn (hidden 64-2000, 2-6 layers) or demo (hidden 16-64, 1-3 layers; each "
                             "trial a fraction of a GPU)")
    parser.add_argument("--graphs", type=int, default=2_000_000,
                        help="training graphs every synthetic trial reads per epoch (default 2,000,000: HydraGNN's "
                             "multidataset campaigns); reading them is charged at the measured data cost")
    parser.add_argument("--gpu-sharing", default="off",
                        help="several trials per GPU: off, auto (small trials up to the GPU's memory and "
                             "utilisation, at most the curve's best k) or a fixed k; needs --colocation-curve")
    parser.add_argument("--colocation-curve", help="JSON of the aggregate throughput of k trials on one GPU "
                                                   "(bench/gpu_colocation.py writes it)")
    parser.add_argument("--device-memory-gb", type=float, default=64.0,
                        help="memory of one GPU for sharing (default 64, one MI250X GCD)")
    parser.add_argument("--replay", help="results.csv of a real campaign (m:wall_time_s, m:slots)")
    parser.add_argument("--ask-latency-ms", type=float, default=0.0, help="optimizer ask latency per batch")
    parser.add_argument("--failure-rate", type=float, default=0.0, help="fraction of trials that fail (default 0)")
    parser.add_argument("--bad-nodes", type=int, default=0, help="nodes failing every trial (drained)")
    parser.add_argument("--rank0-costs", default="measured", metavar="FILE|measured|none",
                        help="charge rank 0's own time per event (scheduler.simulator.rank0): the measurement "
                             "shipped in bench/data/rank0_costs.json (default), a file bench/rank0_handlers.py "
                             "--out wrote, or none (rank 0 is free)")
    parser.add_argument("--trial-state-costs", default="measured", metavar="FILE|measured|none",
                        help="charge the trainer's training state (scheduler.simulator.trial_state): its write "
                             "each epoch, a continuation's restart, retries that resume; the measurement shipped "
                             "in bench/data/trial_state_costs.json (default), a file of that form, or none (free)")
    parser.add_argument("--malleable", action="store_true",
                        help="running trials grow onto slots the campaign's tail leaves idle (campaign option "
                             "malleable; needs --gpus-per-node trials that may run wider)")
    parser.add_argument("--max-pending", type=int, default=None,
                        help="at most this many candidates wait for placement (default: the pool factor)")
    parser.add_argument("-o", "--output", default="sim.json",
                        help="result file (default sim.json); a path not ending in .json is a campaign directory: "
                             "its journal.jsonl, results.csv and sim.json, which `report DIR` reads like a real "
                             "campaign's")
    parser.add_argument("--plot", action="store_true", help="also write <output>_util.png and _gantt.png")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def paths(args: argparse.Namespace):
    """A replayed results.csv is read; sim.json (and with --plot its PNGs) written."""
    from pathlib import Path

    from hydragnn_ensemble.path_guard import CommandPaths, Output
    from scheduler.simulator.results import is_sim_json

    from scheduler.simulator.record import is_sim_campaign_dir

    out = Path(args.output)
    outputs = [Output(out, "simulation result", is_sim_json) if _is_json(out) else
               Output(out, "simulated campaign directory", is_sim_campaign_dir)]
    if args.plot:
        outputs += [Output(_plot_path(out, suffix), "simulation plot", lambda p: p.suffix == ".png")
                    for suffix in ("_util.png", "_gantt.png")]
    costs = args.rank0_costs if args.rank0_costs not in ("measured", "none") else None
    state_costs = args.trial_state_costs if args.trial_state_costs not in ("measured", "none") else None
    inputs = tuple(Path(p) for p in (args.replay, args.colocation_curve, args.campaign, args.dataset, args.learn_from,
                                     costs, state_costs) if p)
    return CommandPaths(inputs=inputs, outputs=tuple(outputs))


def _is_json(output) -> bool:
    """``-o`` names a sim.json file (else a campaign directory)."""
    return output.suffix == ".json"


def _plot_path(output, suffix: str):
    """Where ``--plot`` writes: beside sim.json, or inside the campaign directory."""
    return output.with_name(output.stem + suffix) if _is_json(output) else output / f"sim{suffix}"


def _trials_line(result) -> str:
    """The line ``report`` prints first for the simulated campaign (the same code reads the same
    state)."""
    from hpo.report import format_summary, summarize

    return format_summary(summarize(result.state)).splitlines()[0]


def _rank0_costs(word: str, slots: int):
    """What rank 0's events cost (None: ``none``, rank 0 is free)."""
    from pathlib import Path

    from scheduler.simulator.rank0 import MEASURED, Rank0Costs

    from hydragnn_ensemble.cli import UserError

    if word == "none":
        return None
    try:
        return Rank0Costs.read(MEASURED if word == "measured" else Path(word), slots)
    except ValueError as exc:
        raise UserError(f"--rank0-costs: {exc}") from None


def _trial_state_costs(word: str):
    """What the training state costs in the simulated world (free for ``none``)."""
    from pathlib import Path

    from scheduler.simulator.trial_state import TrialStateCosts

    from hydragnn_ensemble.cli import UserError

    if word == "none":
        return TrialStateCosts()
    try:
        return TrialStateCosts.measured() if word == "measured" else TrialStateCosts.read(Path(word))
    except ValueError as exc:
        raise UserError(f"--trial-state-costs: {exc}") from None


def _print_summary(result, out) -> None:
    """The trials line ``report`` would print, then the placement figures."""
    print(_trials_line(result))
    s = result.summary
    shared = s["gpu_sharing"]["shared_attempts"]
    print(f"{s['policy']}: U {100 * s['utilisation']:.1f}%, makespan {s['makespan_s'] / 3600:.2f} h "
          f"(/LB {s['makespan_over_lb']:.3f}), decision p99 {s['decision_latency_ms']['p99']:.3f} ms"
          + (f", {shared} attempts on shared GPUs" if shared else "") + f" -> {out}")
    rank0 = s["rank0"]
    if rank0["charged"]:
        print(f"rank 0: busy {100 * rank0['busy_fraction']:.1f}% of the campaign, reports waited p99 "
              f"{rank0['lag_s']['p99']:.3g} s, max {rank0['lag_s']['max']:.3g} s ({rank0['costs']['source']})")


def _plan(args: argparse.Namespace) -> int:
    """``simulate CAMPAIGN.yaml --nodes N --hours T``: the campaign on the allocation."""
    from pathlib import Path

    from hpo.campaign import CampaignConfigError
    from hydragnn_ensemble.cli import UserError
    from scheduler.simulator.campaign_plan import CampaignPlanError, plan_campaign

    if args.hours is None:
        raise UserError(f"simulate {args.campaign}: give the allocation's length with --hours")
    ignored = [flag for flag, given in (("--trials", args.trials != 800), ("--space", args.space != "hydragnn"),
                                        ("--replay", args.replay), ("--graphs", args.graphs != 2_000_000)) if given]
    if ignored:
        raise UserError(f"{', '.join(ignored)}: the campaign file {args.campaign} says what its trials are")
    try:
        result, plan = plan_campaign(Path(args.campaign), args.nodes or 1, args.hours,
                                     dataset=Path(args.dataset) if args.dataset else None,
                                     learn_from=Path(args.learn_from) if args.learn_from else None,
                                     estimate_error=args.estimate_error, seed=args.seed, progress=not args.no_progress)
    except (CampaignPlanError, CampaignConfigError, OSError) as exc:
        raise UserError(str(exc)) from None
    out = Path(args.output)
    result.write_json(out)
    for line in plan.lines():
        print(line)
    print(f"  (estimate error sigma {args.estimate_error:g}, synthetic learning curves) -> {out}")
    return 0


def run(args: argparse.Namespace) -> int:
    import math
    from pathlib import Path

    from hydragnn_ensemble.cli import UserError

    if args.campaign is not None:
        return _plan(args)
    if args.hours is not None or args.dataset is not None or args.learn_from is not None:
        raise UserError("--hours, --dataset and --learn-from plan a campaign file: simulate CAMPAIGN.yaml --hours T")
    args.nodes = 8192 if args.nodes is None else args.nodes
    from scheduler.placement import UnknownPolicyError, check_policy_name
    from scheduler.sharing import ColocationCurve, GpuSharing, SharingError
    from scheduler.simulator import SimConfig, SimulationError, WorkloadError, generate_workload, \
        replay_workload, simulate
    from scheduler.simulator.workload import SEARCH_SPACES, default_time_limit, make_cost_model

    if args.nodes < 1 or args.gpus_per_node < 1 or args.trials < 1:
        raise UserError("--nodes, --gpus-per-node and --trials must be >= 1")
    if args.graphs < 1:
        raise UserError(f"--graphs must be >= 1, got {args.graphs}")
    if args.estimate_error < 0 or not 0 <= args.failure_rate <= 1:
        raise UserError("--estimate-error must be >= 0 and --failure-rate within [0, 1]")
    if args.space not in SEARCH_SPACES:
        raise UserError(f"--space {args.space!r} is not a search space; choose one of {', '.join(SEARCH_SPACES)}")
    try:
        check_policy_name(args.policy)
        curve = ColocationCurve.read(Path(args.colocation_curve)) if args.colocation_curve else None
        limit = math.inf if args.replay else default_time_limit(args.target_duration)  # what the trials get
        sharing = GpuSharing.parse(args.gpu_sharing, args.device_memory_gb, curve, limit)
        if args.replay:
            trials = replay_workload(args.replay, args.gpus_per_node, args.estimate_error, args.seed)
        else:  # with sharing, small trials are sized at one slot (packed, not spread)
            trials = generate_workload(args.trials, args.nodes, args.gpus_per_node, args.estimate_error,
                                       args.seed, target_seconds=args.target_duration, space=args.space,
                                       time_limit_s=limit, cost_model=make_cost_model(args.gpus_per_node, args.graphs),
                                       packing=sharing.packing(args.trials / (args.nodes * args.gpus_per_node)))
        config = SimConfig(rank0_costs=_rank0_costs(args.rank0_costs, args.nodes * args.gpus_per_node),
                           nodes=args.nodes, gpus_per_node=args.gpus_per_node, graphs=args.graphs, policy=args.policy,
                           block_nodes=min(args.block_nodes, args.nodes), ask_latency_s=args.ask_latency_ms / 1000,
                           failure_rate=args.failure_rate, bad_nodes=args.bad_nodes,
                           max_pending=args.max_pending, seed=args.seed, estimate_error=args.estimate_error,
                           gpu_sharing=sharing, colocation=curve, malleable=args.malleable,
                           trial_state=_trial_state_costs(args.trial_state_costs))
        out = Path(args.output)
        result = simulate(trials, config, progress=not args.no_progress,
                          campaign_dir=None if _is_json(out) else out)
    except (WorkloadError, SimulationError, UnknownPolicyError, SharingError, OSError) as exc:
        raise UserError(str(exc)) from None
    if _is_json(out):
        result.write_json(out)
    _print_summary(result, out)
    if args.plot:
        from scheduler.simulator.plots import plot_sim_gantt, plot_utilisation

        plot_utilisation(result, _plot_path(out, "_util.png"))
        plot_sim_gantt(result, _plot_path(out, "_gantt.png"))
    return 0
