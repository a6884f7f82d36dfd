"""Record the learning curves of the alloy search space once, with the real trainer, for the
replay bench (``bench/curve_replay.py``).

    .venv/bin/python -m bench.record_curves --dataset demo_out/alloy.bp --trials 256 \
        --workdir /tmp/curves [--ranks 3] [--out bench/data/alloy_curves.json.gz]

One real campaign under ``mpiexec -n RANKS`` (rank 0 schedules, the others train one trial each):
the demo's campaign (``examples/alloy/campaign.yaml``: search space, base config with 10 epochs and
the trainer's own patience) with ``optimizer: random`` and ``early_stopping: none``, so that every
configuration trains its whole budget, and a time limit no trial reaches. Running it again with the
same ``--workdir`` resumes the campaign. Then, per finished trial: its parameters, every epoch's
validation objective and seconds (``progress.jsonl`` through the journal), its overhead (the
seconds its slot was held outside its epochs: launch, data loading, the final test pass), its status, and the formation-energy predictions of its best epoch on
the test split (its checkpoint, run as a one-member ensemble). Written as gzip'd JSON (a few hundred
kB): the data the replay needs and nothing it does not.

Where the epoch seconds come from: RANKS - 1 trials at once on this machine (the demo's setting is 3
on 2 cores; the default here is 2 on 2 cores), one torch thread each.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEMO_CAMPAIGN = ROOT / "examples" / "alloy" / "campaign.yaml"
HEAD = "formation_energy"
FORMAT = 1


def campaign_file(workdir: Path, dataset: Path, trials: int, seed: int) -> Path:
    """The recording campaign: the demo's, every trial to its budget, random search."""
    data = yaml.safe_load(DEMO_CAMPAIGN.read_text())
    data.update(dataset=str(dataset.resolve()), base_config=str((DEMO_CAMPAIGN.parent / data["base_config"]).resolve()),
                optimizer={"name": "random", "options": {}}, early_stopping={"method": "none"},
                max_trials=trials, seed=seed, trial_time_limit_s=1800, failure_threshold=0.9)
    data.pop("max_time_s", None)
    path = workdir / "record_campaign.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_campaign(campaign: Path, out: Path, ranks: int) -> None:
    """The campaign under mpiexec (resumed when ``out`` holds its journal)."""
    bin_dir = Path(sys.executable).parent
    argv = [str(bin_dir / "mpiexec"), "-n", str(ranks), str(bin_dir / "hydragnn-ensemble"), "hpo", str(campaign),
            "-o", str(out)]
    if (out / "journal.jsonl").exists():
        argv.append("--resume")
    subprocess.run(argv, check=True)


def test_predictions(checkpoint: Path, graphs) -> list[float]:
    """The formation-energy predictions of one trained trial on ``graphs`` (eV/atom)."""
    from ensemble.members import MemberModel, run_members
    from hydragnn_ensemble.inference import load_checkpoint

    loaded = load_checkpoint(checkpoint)
    preds = run_members([MemberModel(0, 1.0, loaded, float(loaded.spec.radius))], graphs, cutoff=float(loaded.spec.radius))
    return [round(float(v), 6) for v in preds[0].preds[HEAD].reshape(-1)]


def extract(out: Path, dataset: Path) -> dict:
    """The table of one recording campaign: the configurations, their curves and test predictions."""
    from tqdm import tqdm

    from ensemble.members import read_split, split_targets
    from hpo.journal import read_events
    from hpo.state import CampaignState
    from hydragnn_ensemble.inference import load_checkpoint

    state = CampaignState.replay(read_events(out / "journal.jsonl"))
    graphs = read_split(str(dataset), "testset")
    rows, targets = [], None
    for tid, record in tqdm(sorted(state.trials.items()), desc="test predictions", unit="trial"):
        last = record.last_attempt
        if last is None or last.result is None or not last.reports:
            continue
        result = last.result
        epoch_s = [r.epoch_s for r in last.reports]
        held = last.end - last.start if last.end is not None and last.start is not None else None
        # what the slot spent outside the epochs: launch, data loading, the final test pass
        overhead = None if held is None or None in epoch_s else round(max(held - sum(epoch_s), 0.0), 3)
        row = {"trial": tid, "params": record.params, "status": str(result.status),
               "objective": [r.objective for r in last.reports], "epoch_s": epoch_s,
               "overhead_s": overhead, "held_s": held, "best_epoch": result.best_epoch, "test_pred": None}
        if result.checkpoint:
            checkpoint = out / "trials" / str(tid) / result.checkpoint
            row["test_pred"] = test_predictions(checkpoint, graphs)
            if targets is None:
                heads = load_checkpoint(checkpoint).heads
                targets = [round(float(v), 6) for v in split_targets(graphs, heads)[HEAD].reshape(-1)]
        rows.append(row)
    return {"format": FORMAT, "head": HEAD, "test_targets": targets, "configs": rows,
            "search_space": yaml.safe_load(DEMO_CAMPAIGN.read_text())["search_space"],
            "recorded": {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {_cores()} cores",
                         "trials_at_once": None, "dataset": str(dataset), "campaign": "examples/alloy/campaign.yaml "
                         "with optimizer random, early_stopping none"}}


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, required=True, help="the demo's alloy.bp (demo-data alloy ... -o PATH)")
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--ranks", type=int, default=3, help="MPI ranks: rank 0 schedules, the others train")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "data" / "alloy_curves.json.gz")
    ap.add_argument("--extract-only", action="store_true", help="do not run the campaign: read what it recorded")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    out = args.workdir / "campaign"
    if not args.extract_only:
        run_campaign(campaign_file(args.workdir, args.dataset, args.trials, args.seed), out, args.ranks)
    table = extract(out, args.dataset)
    table["recorded"]["trials_at_once"] = args.ranks - 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as fh:
        json.dump(table, fh, separators=(",", ":"))
    print(f"{len(table['configs'])} configurations -> {args.out} ({args.out.stat().st_size / 1024:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
