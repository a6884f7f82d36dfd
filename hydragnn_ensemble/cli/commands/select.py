"""``hydragnn-ensemble select CAMPAIGN_DIR --top-k K --method METHOD -o ENSEMBLE_DIR`` (METHOD: one of
:data:`ensemble.build.METHODS`).

Builds a self-contained ensemble directory (manifest.json + copied member checkpoints) from the
completed trials of a campaign and prints the ensemble's errors on the test split beside the
baselines it must beat (composition-linear energies fitted on the trainset, zero forces and stress;
energies also per atom); ``--calibrate`` then fits the uncertainty model and reports calibration
metrics on the test split (plots in ENSEMBLE_DIR/calibration/).
Exit code 0 on success, 2 for a user error (no such campaign, too few completed trials, ...).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hydragnn_ensemble.cli import RegistryNames

NAME = "select"
HELP = "pick the top-K trials of a campaign (by objective or greedy) into an ensemble directory"


def _methods() -> tuple[str, ...]:
    """The selection methods: :data:`ensemble.build.METHODS`."""
    from ensemble.build import METHODS

    return METHODS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign_dir", type=Path, help="campaign directory (journal.jsonl, trials/)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="ensemble directory to write")
    parser.add_argument("--top-k", type=int, default=5, metavar="K", help="ensemble size / greedy picks (default 5)")
    parser.add_argument("--method", choices=RegistryNames(_methods), default="topk", metavar="METHOD",
                        help="one of %(choices)s (default topk); topk: best K by objective; greedy: Caruana "
                             "selection on validation predictions; greedy-per-head: Caruana per head (own weights "
                             "per head, at most K members); "
                             "diverse: K members whose errors differ (lowest validation NLL of their spread)")
    parser.add_argument("--rounds", type=int, default=None, metavar="R",
                        help="greedy-per-head: picks per head (default K; weights are multiples of 1/R)")
    parser.add_argument("--bags", type=int, default=1, metavar="B",
                        help="greedy-per-head: repeat on B bootstrap resamples of the valset and sum the "
                             "picks (Caruana's bagged selection; default 1)")
    parser.add_argument("--candidates", type=int, default=10, metavar="M",
                        help="greedy: the best M completed trials are candidates (default 10)")
    parser.add_argument("--dataset", type=Path, default=None,
                        help="dataset for greedy selection and calibration (default: the campaign's)")
    parser.add_argument("--calibrate", action="store_true",
                        help="fit the uncertainty model (latent distances and input domain on the trainset, "
                             "term weights on the calset, or the valset when the data has none), report the testset")
    parser.add_argument("--no-plots", action="store_true", help="with --calibrate: no PNG plots")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="structures per forward pass in greedy selection and calibration (default 32)")
    parser.add_argument("--force", action="store_true",
                        help="replace an ensemble directory written by an earlier select (never anything else)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--max-inference-ms", type=float, default=None, metavar="MS",
                        help="topk / greedy: the members' summed inference time per graph (each trial's "
                             "inference_ms_per_graph) stays within MS: a cost-aware ensemble (default: no budget)")
    parser.add_argument("--include-stopped", action="store_true",
                        help="let trials the campaign's early stopping ended be members (default: not)")


def _report_left_out(excluded: list) -> None:
    """One warning per trial left out for a problem; one line for all trials the stopper ended
    (in an early-discarding campaign that is most of them)."""
    from ensemble.campaign import STOPPED_EXCLUSION

    def score(e) -> str:
        return "-" if e.objective is None else f"{e.objective:.6g}"

    stopped = [e for e in excluded if e.reason == STOPPED_EXCLUSION]
    for left_out in excluded:
        if left_out.reason != STOPPED_EXCLUSION:
            print(f"warning: trial {left_out.trial_id} (objective {score(left_out)}) would have been a "
                  f"candidate but is left out: {left_out.reason}", file=sys.stderr)
    if stopped:
        best = ", ".join(f"{e.trial_id} ({score(e)})" for e in stopped[:5])
        print(f"note: {len(stopped)} trial(s) stopped early by the campaign's stopper are not candidates "
              f"(select --include-stopped to allow them); the best of them: {best}"
              f"{' ...' if len(stopped) > 5 else ''}", file=sys.stderr)


def _note_cut_short(campaign_dir: Path, members: list[int]) -> None:
    """The campaign's trials that ended at their time limit while still improving, and the members
    among them (undertrained: a longer trial_time_limit_s would have trained them further)."""
    from hpo.report import cut_short, load_state
    from hpo.time_budget import still_improving
    from hydragnn_ensemble.result import TrialStatus

    state = load_state(campaign_dir)
    note = cut_short(state)
    if note is None:
        return
    improving = {r.trial_id for r in state.finished if r.status == TrialStatus.TIMEOUT and r.result is not None
                 and still_improving(r.result.epochs, r.result.best_epoch)}
    among = [t for t in members if t in improving]
    print(f"note: {note}" + (f"; members among them: {', '.join(map(str, among))}" if among else ""),
          file=sys.stderr)


def _warn_small_valset(dataset: str | None, method: str) -> None:
    """A warning when the valset the members were chosen on is too small to choose on."""
    from ensemble.calibration import small_split_warning
    from graph_builders.store import open_dataset

    if dataset is None:
        return
    with open_dataset(dataset) as store:
        count = store.num_graphs("valset") if "valset" in store.split_names else 0
    warning = small_split_warning("valset", count, f"choose members on ({method} selection)")
    if warning:
        print(f"warning: {warning}", file=sys.stderr)


def _print_cost(selection) -> None:
    """The members' summed inference time, against the budget when one was given."""
    if selection.inference_ms is None:
        return
    budget = "" if selection.max_inference_ms is None else f" (budget {selection.max_inference_ms:g})"
    print(f"members' summed inference time: {selection.inference_ms:.3g} ms per graph{budget}")


def _print_accuracy(ensemble_dir: Path, dataset: str | None, batch_size: int, progress: bool) -> None:
    """The ensemble's errors on the testset beside the baselines (one line when it cannot be run)."""
    from ensemble.accuracy import evaluate_split

    if dataset is None:
        print("no accuracy on the testset: the manifest records no dataset (select --dataset)", file=sys.stderr)
        return
    try:
        report = evaluate_split(ensemble_dir, dataset, "testset", batch_size=batch_size, progress=progress)
    except ValueError as exc:  # no testset, an empty one
        print(f"no accuracy on the testset: {exc}", file=sys.stderr)
        return
    print()
    print(report.format_table())


def run(args: argparse.Namespace) -> int:
    import torch

    from hydragnn_ensemble.cli import UserError
    from ensemble.build import BuildOptions, build_ensemble
    from ensemble.calibration import calibrate

    torch.set_num_threads(1)
    if args.top_k < 1:
        raise UserError(f"--top-k must be >= 1, got {args.top_k}")
    if args.candidates < 1:
        raise UserError(f"--candidates must be >= 1, got {args.candidates}")
    if args.rounds is not None and args.rounds < 1:
        raise UserError(f"--rounds must be >= 1, got {args.rounds}")
    if args.bags < 1:
        raise UserError(f"--bags must be >= 1, got {args.bags}")
    if args.max_inference_ms is not None and not args.max_inference_ms > 0:
        raise UserError(f"--max-inference-ms must be > 0, got {args.max_inference_ms}")
    options = BuildOptions(top_k=args.top_k, method=args.method, candidates=args.candidates,
                           include_stopped=args.include_stopped, max_inference_ms=args.max_inference_ms,
                           rounds=args.rounds, bags=args.bags,
                           dataset=args.dataset, batch_size=args.batch_size, overwrite=args.force,
                           progress=not args.no_progress)
    try:
        manifest = build_ensemble(args.campaign_dir, args.output, options)
    except (ValueError, FileNotFoundError) as exc:
        raise UserError(str(exc)) from exc
    _report_left_out(manifest.selection.excluded)
    _note_cut_short(args.campaign_dir, [m.trial_id for m in manifest.members])
    if args.method != "topk":
        _warn_small_valset(manifest.dataset, args.method)
    print(f"ensemble of {len(manifest.members)} member(s) ({manifest.selection.method}) in {args.output}")
    _print_cost(manifest.selection)
    print(f"{'trial':>6} {'weight':>7} {'objective':>11}  mpnn_type  hidden_dim")
    for m in manifest.members:
        arch = m.config.get("NeuralNetwork", {}).get("Architecture", {})
        per_head = "  " + " ".join(f"{h}={w:.2f}" for h, w in m.head_weights.items()) if m.head_weights else ""
        lineage = f"  lineage {';'.join(m.lineage)}" if m.lineage else ""  # PBT: <epoch>:<donor>@<its epoch>
        print(f"{m.trial_id:>6} {m.weight:>7.3f} {m.objective:>11.5g}  {arch.get('mpnn_type', '?'):<9}  "
              f"{arch.get('hidden_dim', '?')}{per_head}{lineage}")
    if not args.calibrate:
        dataset = str(args.dataset) if args.dataset is not None else manifest.dataset
        _print_accuracy(args.output, dataset, args.batch_size, not args.no_progress)
    if args.calibrate:
        try:
            report = calibrate(args.output, args.dataset, plots=not args.no_plots,
                               progress=not args.no_progress)
        except ValueError as exc:
            raise UserError(str(exc)) from exc
        if report.accuracy is not None:
            print()
            print(report.accuracy.format_table())
        print(f"\nuncertainty (fitted on the trainset and {report.fit_split}, metrics on {report.eval_split}):")
        print(report.format_table())
        for warning in report.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if report.plots:
            print(f"plots in {args.output / 'calibration'}")
    return 0
