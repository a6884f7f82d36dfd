"""Helpers of the campaign runtime tests: tiny campaigns around the fault trainer, real mpiexec."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
MPIEXEC = VENV_BIN / "mpiexec"
CLI = VENV_BIN / "hydragnn-ensemble"
FAULT_TRAINER = "tests.campaign.fault_trainer"

BASE_CONFIG = {
    "NeuralNetwork": {
        "Architecture": {"mpnn_type": "GIN", "hidden_dim": 32, "num_conv_layers": 2},
        "Training": {"learning_rate": 0.001, "batch_size": 32, "num_epoch": 10},
    },
    "Fault": {"mode": "succeed", "sleep_s": 0.2},
}
SEARCH_SPACE = {
    "NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 8, "high": 64},
    "NeuralNetwork.Training.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
    "NeuralNetwork.Architecture.num_conv_layers": {"type": "int", "low": 1, "high": 4},
}


def write_campaign(tmp: Path, modes: dict[int, str] | None = None, mode: str = "succeed",
                   sleep_s: float = 0.2, **campaign: Any) -> Path:
    """A campaign YAML (plus base config and a dummy dataset file) in ``tmp``; returns its path."""
    tmp.mkdir(parents=True, exist_ok=True)
    base = json.loads(json.dumps(BASE_CONFIG))
    base["Fault"].update(mode=mode, sleep_s=sleep_s)
    if modes:
        base["Fault"]["modes"] = {str(k): v for k, v in modes.items()}
    (tmp / "base.json").write_text(json.dumps(base))
    (tmp / "data.bp").write_text("not read by the fault trainer")
    data = {
        "dataset": "data.bp", "base_config": "base.json", "search_space": SEARCH_SPACE,
        "optimizer": {"name": "random"}, "max_trials": 8, "trial_time_limit_s": 20,
        "trial_program": FAULT_TRAINER, "seed": 1,
    }
    data.update(campaign)
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def write_asha_campaign(tmp: Path, max_trials: int, epoch_s: float, verdict_wait_s: float = 2.0) -> Path:
    """A campaign of fault-trainer trials that report 9 epochs ``epoch_s`` apart, under ASHA
    (min 1 epoch, reduction factor 3: rungs at 1, 3 and 9 epochs; the trials wait up to
    ``verdict_wait_s`` for the verdict after epochs 1 and 3); returns its path."""
    campaign = write_campaign(tmp, max_trials=max_trials, mode="epochs",
                              early_stopping={"method": "asha", "min_epochs": 1, "reduction_factor": 3,
                                              "verdict_wait_s": verdict_wait_s})
    base = json.loads((tmp / "base.json").read_text())
    base["Fault"].update(epochs=9, epoch_s=epoch_s)
    (tmp / "base.json").write_text(json.dumps(base))
    return campaign


def hpo_argv(campaign: Path, out: Path, ranks: int, *extra: str) -> list[str]:
    return [str(MPIEXEC), "-n", str(ranks), str(CLI), "hpo", str(campaign), "-o", str(out),
            "--no-progress", *extra]


def run_hpo(campaign: Path, out: Path, ranks: int = 4, *extra: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the CLI under real mpiexec from the repository root (so the fault trainer is importable)."""
    return subprocess.run(hpo_argv(campaign, out, ranks, *extra), cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def events(out: Path) -> list[dict]:
    from hpo.journal import read_journal

    contents = read_journal(out / "journal.jsonl")
    assert contents.torn_line is None
    return contents.events


def of(evs: list[dict], name: str) -> list[dict]:
    return [e for e in evs if e["event"] == name]


def results_rows(out: Path) -> list[dict[str, str]]:
    import csv

    with open(out / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def fault_objective(config: dict) -> float:
    """The objective the fault trainer computes (from the trainer module itself)."""
    from fault_trainer import objective_of

    return objective_of(config)


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of the ``(start, end)`` intervals open at one moment."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    open_now = most = 0
    for _, step in edges:
        open_now += step
        most = max(most, open_now)
    return most


def trial_processes_alive(marker: str) -> list[int]:
    """Pids of live processes whose command line mentions ``marker`` (a campaign directory)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            pids.append(int(entry))
    return pids


def replay_asha(progress, min_epochs: int = 1, reduction_factor: int = 3) -> dict[int, int]:
    """The trials a fresh ASHA stops when fed a journal's epoch reports in order, and the epoch of
    each decision (a re-run, whose epochs start again at 1, is judged afresh)."""
    from hpo.stoppers import AshaStopper

    return AshaStopper(min_epochs, reduction_factor).replay(
        (t, e, math.nan if v is None else v) for t, e, v, *_ in progress)


def tiny_alloy_dataset(path: Path, n: int = 48) -> None:
    """Rattled 4-atom Cu/Ni FCC cells with EMT energies per atom, as atomic graphs with periodic edges."""
    import numpy as np
    import torch
    from ase.build import bulk
    from ase.calculators.emt import EMT
    from ase.neighborlist import neighbor_list
    from torch_geometric.data import Data

    from graph_builders.schema import HeadRegistry, HeadSpec
    from graph_builders.store import write_dataset

    rng = np.random.default_rng(0)
    graphs = []
    for k in range(n):
        atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
        atoms.set_chemical_symbols(rng.choice(["Cu", "Ni"], size=len(atoms)))
        atoms.rattle(0.05, seed=k)
        atoms.calc = EMT()
        energy = atoms.get_potential_energy() / len(atoms)
        i, j, shift = neighbor_list("ijS", atoms, 3.0)
        pos = torch.tensor(atoms.positions, dtype=torch.float32)
        cell = torch.tensor(np.asarray(atoms.cell), dtype=torch.float32)
        edge_shift = torch.tensor(shift, dtype=torch.float32)
        edge_index = torch.tensor(np.stack([j, i]), dtype=torch.int64)
        vec = pos[edge_index[0]] + edge_shift @ cell - pos[edge_index[1]]
        z = torch.tensor(atoms.numbers, dtype=torch.int64)
        graphs.append(Data(pos=pos, x=(z.float() / 29.0).unsqueeze(1), z=z, edge_index=edge_index,
                           edge_attr=vec.norm(dim=1, keepdim=True), cell=cell.unsqueeze(0),
                           pbc=torch.ones(1, 3, dtype=torch.bool), edge_shift=edge_shift,
                           y_energy=torch.tensor([[energy]], dtype=torch.float32)))
    heads = HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV/atom")])
    write_dataset(path, graphs, heads, splits={"trainset": list(range(32)), "valset": list(range(32, 40)),
                                               "testset": list(range(40, n))})


def tiny_gin_config(epochs: int) -> dict:
    """A one-layer GIN with an energy head, the smallest trial the built-in trainer runs on
    :func:`tiny_alloy_dataset`."""
    return {"NeuralNetwork": {
        "Architecture": {"mpnn_type": "GIN", "hidden_dim": 8, "num_conv_layers": 1,
                         "output_heads": {"graph": {"num_sharedlayers": 1, "dim_sharedlayers": 8,
                                                    "num_headlayers": 1, "dim_headlayers": [8]}},
                         "task_weights": [1.0]},
        "Variables_of_interest": {"input_node_features": [0], "output_names": ["energy"],
                                  "type": ["graph"], "output_dim": [1]},
        "Training": {"num_epoch": epochs, "batch_size": 8, "Optimizer": {"learning_rate": 0.005}}}}
