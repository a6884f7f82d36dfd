"""Every example a user copies starts: each campaign.yaml under examples/ validates with its paths
resolved, and its configs pass the check a campaign runs before trial 1 against a dataset with the
heads the example expects; every batch script parses and names files that exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from torch_geometric.data import Data

from graph_builders.schema import HeadRegistry, HeadSpec
from graph_builders.store import write_dataset
from hpo.campaign import load_campaign
from hpo.preflight import check_against_dataset

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CAMPAIGNS = sorted(EXAMPLES.rglob("campaign*.yaml"))
SCRIPTS = sorted([*EXAMPLES.rglob("*.sbatch"), *EXAMPLES.rglob("*.sh")])

#: the datasets the examples are written for: the demo alloys, and one's own data from build-graphs
HEAD_SETS = {
    "demo alloy": HeadRegistry.of([HeadSpec("formation_energy", "graph", 1, "eV/atom"),
                                   HeadSpec("stress", "graph", 6, "GPa"), HeadSpec("forces", "node", 3, "eV/Å")]),
    "build-graphs": HeadRegistry.of([HeadSpec("energy", "graph", 1, "eV"), HeadSpec("forces", "node", 3, "eV/Å"),
                                     HeadSpec("stress", "graph", 6, "eV/Å^3")]),
}


def _cell(k: int, heads: HeadRegistry) -> Data:
    """A 4-atom periodic Cu cell with edges in the schema's layout and one target per head."""
    n = 4
    pos = torch.tensor([[0, 0, 0], [1.8, 1.8, 0], [1.8, 0, 1.8], [0, 1.8, 1.8]], dtype=torch.float32)
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = i != j
    edge_index = torch.stack([j[keep], i[keep]])
    d = Data(x=torch.full((n, 1), 29.0), z=torch.full((n,), 29), pos=pos, edge_index=edge_index,
             edge_attr=torch.full((edge_index.shape[1], 1), 2.55), edge_shift=torch.zeros(edge_index.shape[1], 3),
             cell=(torch.eye(3) * 3.6).unsqueeze(0), pbc=torch.ones(1, 3, dtype=torch.bool))
    for h in heads:
        d[h.key] = torch.full((1 if h.level == "graph" else n, h.dim), float(k))
    return d


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name, heads in HEAD_SETS.items():
        path = tmp_path_factory.mktemp("examples") / f"{name.replace(' ', '_')}.bp"
        write_dataset(path, [_cell(k, heads) for k in range(10)], heads, metadata={"cutoff": 5.0})
        out[name] = path
    return out


def test_the_examples_are_found() -> None:
    names = {p.relative_to(EXAMPLES).as_posix() for p in CAMPAIGNS}
    assert {"alloy/campaign.yaml", "workstation/campaign.yaml", "slurm/campaign_small.yaml",
            "slurm/campaign_frontier.yaml"} <= names
    assert {"slurm/hpo_small.sbatch", "slurm/hpo_frontier.sbatch"} <= {p.relative_to(EXAMPLES).as_posix() for p in SCRIPTS}


@pytest.mark.parametrize("campaign", CAMPAIGNS, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_every_example_campaign_validates_and_passes_the_check_before_trial_1(campaign, datasets) -> None:
    data = yaml.safe_load(campaign.read_text())
    base = (campaign.parent / data["base_config"]).resolve()
    assert base.is_file(), f"{campaign}: base_config {data['base_config']} does not resolve to a file"
    names = yaml.safe_load(base.read_text())["NeuralNetwork"]["Variables_of_interest"]["output_names"]
    kind = next(k for k, heads in HEAD_SETS.items() if set(names) <= set(heads.names))
    # the dataset is the user's (a placeholder path in the example): given as hpo --dataset would
    config = load_campaign(campaign, {"dataset": str(datasets[kind])})
    report = check_against_dataset(config.load_base_config(), config.space, config.dataset)
    assert report.errors == [], report.errors


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_every_batch_script_parses_and_its_campaign_file_exists(script) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    for name in re.findall(r"[\w./$\"{}-]*?(campaign[\w]*\.yaml)", text):
        assert (script.parent / name).is_file() or (EXAMPLES / name).is_file() or \
            any(p.name == name for p in CAMPAIGNS), f"{script}: {name} not found"
    assert "--data " not in text and "--top " not in text  # the current flag names
