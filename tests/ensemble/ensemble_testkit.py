"""Tiny real campaigns for the ensemble tests: a small EMT alloy dataset and trials trained with the
real trainer (a few epochs of small models), recorded in a campaign directory by hand the way the
MPI runtime records them (frozen campaign.yaml, base_config.json, journal.jsonl via hpo.journal,
trials/<id>/config.json + result.json + checkpoint)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpo.journal import Journal
from hpo.space import apply_params
from hydragnn_ensemble.result import TrialResult
from hydragnn_ensemble.train import train_trial

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "alloy" / "config.json"


def make_alloy_store(path: Path, num: int = 60, seed: int = 0, components=(2, 3)) -> Path:
    """A small EMT alloy dataset (32-atom cells of Cu, Ni, Pd, Au) written to ``path``."""
    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.store import write_dataset

    ds = make_alloy_dataset(num_structures=num, elements=("Cu", "Ni", "Pd", "Au"), components=components,
                            sizes=(32,), seed=seed, progress=False)
    write_dataset(path, ds.graphs, ds.heads, metadata=ds.metadata, seed=seed, fractions=(0.6, 0.2, 0.2))
    return path


def small_base_config(epochs: int = 4, potential: bool = False) -> dict[str, Any]:
    """The example alloy config shrunk to train in well under a second."""
    cfg = json.loads(EXAMPLE_CONFIG.read_text())
    arch, train = cfg["NeuralNetwork"]["Architecture"], cfg["NeuralNetwork"]["Training"]
    arch.update(hidden_dim=16, num_conv_layers=1)
    arch["output_heads"]["graph"].update(num_sharedlayers=1, dim_sharedlayers=16, num_headlayers=1,
                                         dim_headlayers=[16])
    arch["output_heads"]["node"].update(num_headlayers=1, dim_headlayers=[16])
    train.update(num_epoch=epochs, batch_size=8)
    if potential:
        arch["mpnn_type"] = "SchNet"
        train["compute_grad_energy"] = True
    return cfg


@dataclass
class TrialPlan:
    """One trial to record: trained for real unless ``fake`` gives the result to write."""

    trial_id: int
    params: dict[str, Any]
    fake: TrialResult | None = None
    copy_checkpoint_from: int | None = None  # a fake result that points at a copied checkpoint
    journal: str = "finished"  # "finished" | "failed" | "started" (unfinished) | "none"


@dataclass
class Campaign:
    root: Path
    dataset: Path
    base_config: dict[str, Any]
    results: dict[int, TrialResult] = field(default_factory=dict)


def build_campaign(root: Path, dataset: Path, base: dict[str, Any], plans: list[TrialPlan],
                   search_space: dict[str, Any]) -> Campaign:
    """Write a campaign directory with the given trials (see the module docstring)."""
    root.mkdir(parents=True)
    (root / "trials").mkdir()
    frozen = {"dataset": str(dataset.resolve()), "base_config": str(root / "base_config.json"),
              "search_space": search_space, "objective": "objective", "max_trials": len(plans)}
    (root / "campaign.yaml").write_text(yaml.safe_dump(frozen))
    (root / "base_config.json").write_text(json.dumps(base, indent=2))
    camp = Campaign(root, dataset, base)
    with Journal(root / "journal.jsonl") as journal:
        journal.append({"event": "campaign_started", "campaign": frozen, "resume": False, "ranks": 2,
                        "slots": 1})
        for plan in plans:
            run_dir = root / "trials" / str(plan.trial_id)
            run_dir.mkdir()
            config = apply_params(base, plan.params)
            (run_dir / "config.json").write_text(json.dumps(config, indent=2))
            if plan.journal != "none":
                journal.append({"event": "trial_suggested", "trial_id": plan.trial_id,
                                "params": plan.params, "attempt": 0})
                journal.append({"event": "trial_started", "trial_id": plan.trial_id, "attempt": 0,
                                "slots": [0], "hosts": ["localhost"], "size": 1})
            if plan.fake is None:
                result = train_trial(run_dir / "config.json", dataset, run_dir, progress=False,
                                     device="cpu")
                assert result.status == "completed", result.failure_reason
            else:
                result = plan.fake
                if plan.copy_checkpoint_from is not None:
                    src = root / "trials" / str(plan.copy_checkpoint_from) / "checkpoint.pt"
                    shutil.copyfile(src, run_dir / "checkpoint.pt")
                result.write(run_dir / "result.json")
            camp.results[plan.trial_id] = result
            if plan.journal == "finished":
                journal.append({"event": "trial_finished", "trial_id": plan.trial_id, "attempt": 0,
                                "result": result.to_dict()})
            elif plan.journal == "failed":
                journal.append({"event": "trial_failed", "trial_id": plan.trial_id, "attempt": 0,
                                "reason": result.failure_reason or "crashed", "log_tail": "",
                                "result": result.to_dict()})
    return camp
