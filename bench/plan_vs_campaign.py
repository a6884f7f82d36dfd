"""``simulate CAMPAIGN.yaml`` against the campaign it plans (issue #49): the plan's trials finished,
statuses and utilisation, and those of the real campaign run here with the same file.

    python -m bench.plan_vs_campaign --dataset demo_out/alloy.bp            # ~15 minutes
    python -m bench.plan_vs_campaign --dataset demo_out/alloy.bp --minutes 5

The campaign: ``examples/slurm/campaign_small.yaml`` (its search space: SchNet, PaiNN, EGNN at hidden
32-128 and 2-4 layers, its learning rates, DeepHyper CBO, ASHA at 5 epochs with reduction factor 3,
64 trials) scaled to this machine: CPU slots, 2 agents (``mpiexec -n 3``), one slot per trial,
``max_time_s`` of ``--minutes``, ``trial_time_limit_s`` a quarter of it, and the demo's potential-
mode config (``examples/alloy/potential.json``: the alloy data's heads) as the base config.

1. ``plan_campaign`` (what ``simulate CAMPAIGN.yaml --nodes 1 --hours H`` prints) with the
   allocation ``H`` = ``max_time_s`` + ``trial_time_limit_s``: the time the real campaign can take
   (no trial starts after ``max_time_s``; the last ones end within their limit);
2. the real campaign under ``mpiexec -n 3``; its trials finished and statuses from its journal, its
   utilisation from ``report``;
3. the plan again, learnt from the real campaign's epochs (``--learn-from``): how much of the
   difference is the cost model's anchors.

Goal (issue #49): predicted trials finished within 25% of the real campaign's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def scaled_campaign(work: Path, dataset: Path, minutes: float) -> Path:
    """``campaign_small.yaml`` scaled to this machine (module docstring), written into ``work``."""
    spec = yaml.safe_load((REPO / "examples/slurm/campaign_small.yaml").read_text())
    shutil.copy(REPO / "examples/alloy/potential.json", work / "config.json")
    max_time = 60.0 * minutes
    spec.update(dataset=str(dataset.resolve()), base_config="config.json", max_time_s=max_time,
                trial_time_limit_s=max_time / 4, resources={"device": "cpu", "slots_per_node": 2,
                                                             "slots_per_trial": [1]})
    path = work / "campaign.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _plan(campaign: Path, hours: float, learn_from: Path | None):
    from scheduler.simulator.campaign_plan import plan_campaign

    _, plan = plan_campaign(campaign, nodes=1, hours=hours, learn_from=learn_from)
    return plan


def _real(campaign: Path, out: Path) -> tuple[int, dict[str, int], float, float]:
    """Run the campaign; (trials finished, statuses, utilisation, seconds)."""
    from hpo.report import load_state, summarize

    t0 = time.perf_counter()
    mpiexec = Path(sys.executable).parent / "mpiexec"  # pip's MPICH, as the README installs it
    subprocess.run([str(mpiexec), "-n", "3", sys.executable, "-m", "hydragnn_ensemble", "hpo", str(campaign),
                    "-o", str(out), "--no-progress"], cwd=REPO, check=True)
    seconds = time.perf_counter() - t0
    summary = summarize(load_state(out))
    statuses = {str(k): v for k, v in summary.counts.items() if str(k) not in ("running", "suggested")}
    return sum(statuses.values()), statuses, summary.utilisation or 0.0, seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.plan_vs_campaign", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True, help="the demo's alloy data (demo-data alloy)")
    parser.add_argument("--minutes", type=float, default=10.0, help="the campaign's max_time_s in minutes")
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "plan_vs_campaign")
    args = parser.parse_args(argv)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    campaign = scaled_campaign(args.work, args.dataset, args.minutes)
    spec = yaml.safe_load(campaign.read_text())
    hours = (spec["max_time_s"] + spec["trial_time_limit_s"]) / 3600.0
    before = _plan(campaign, hours, None)
    print("\n".join(before.lines()), flush=True)
    finished, statuses, utilisation, seconds = _real(campaign, args.work / "campaign")
    after = _plan(campaign, hours, args.work / "campaign")
    print(f"\nreal campaign: {finished} trials finished ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))}) "
          f"in {seconds:.0f} s; slots busy {100 * utilisation:.1f}%")
    for label, plan in (("plan from the cost anchors", before), ("plan learnt from the real campaign", after)):
        ratio = plan.finished / max(1, finished)
        print(f"{label}: {plan.finished} trials finish ({', '.join(f'{n} {s}' for s, n in sorted(plan.statuses.items()))}); "
              f"slots busy {100 * plan.utilisation:.1f}%; predicted / real trials {ratio:.2f} "
              f"({'within' if abs(ratio - 1) <= 0.25 else 'outside'} 25%)")
    (args.work / "figures.json").write_text(json.dumps({
        "real": {"finished": finished, "statuses": statuses, "utilisation": utilisation, "seconds": seconds},
        "plan": {"finished": before.finished, "statuses": before.statuses, "utilisation": before.utilisation},
        "plan_learnt": {"finished": after.finished, "statuses": after.statuses, "utilisation": after.utilisation},
    }, indent=1))


if __name__ == "__main__":
    main()
