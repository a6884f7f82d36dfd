"""``simulate CAMPAIGN.yaml --nodes N --hours T``: the campaign's own search, limits and resources
on a simulated allocation (scheduler.simulator.campaign_plan)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from hydragnn_ensemble.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "alloy"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    """The demo's campaign file on a 24-structure EMT alloy dataset, 12 trials, 2 slots."""
    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.store import write_dataset

    root = tmp_path_factory.mktemp("plan")
    ds = make_alloy_dataset(num_structures=24, elements=("Cu", "Ni", "Pd"), components=(2, 3), sizes=(32,), seed=0,
                            progress=False)
    write_dataset(root / "alloy.bp", ds.graphs, ds.heads, metadata=ds.metadata, fractions=(0.6, 0.2, 0.2))
    shutil.copy(EXAMPLES / "formation_energy.json", root / "formation_energy.json")
    data = yaml.safe_load((EXAMPLES / "campaign.yaml").read_text())
    data.update(dataset="alloy.bp", max_trials=12, optimizer={"name": "random"})
    data["resources"].update(slots_per_node=2, slots_per_trial=[1, 2])
    (root / "campaign.yaml").write_text(yaml.safe_dump(data))
    return root / "campaign.yaml"


def _plan(capsys, campaign: Path, out: Path, *extra: str) -> tuple[str, dict]:
    assert main(["simulate", str(campaign), "--no-progress", "-o", str(out), *extra]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def test_a_long_allocation_finishes_every_trial_a_short_one_fewer(campaign, tmp_path, capsys):
    text, sim = _plan(capsys, campaign, tmp_path / "long.json", "--nodes", "1", "--hours", "10")
    assert "plan for 1 node(s) x 10 h: 12 trials finish" in text
    assert sim["slots"] == 2 and sim["trials"] == 12 and sim["early_stopping"] == "asha"
    assert "sizes started: " in text and all(f"x {n} slot" not in text for n in (4, 8))  # slots_per_trial [1, 2]
    # the campaign's max_time_s (600 s) cuts the allocation: 10 h or 1 h end alike
    _, again = _plan(capsys, campaign, tmp_path / "hour.json", "--nodes", "1", "--hours", "1")
    assert again["makespan_s"] == pytest.approx(sim["makespan_s"])
    short_text, short = _plan(capsys, campaign, tmp_path / "short.json", "--nodes", "1", "--hours", "0.002")
    finished = int(short_text.split("trials finish")[0].rsplit(":", 1)[1])
    assert finished < 12 and short["makespan_s"] > 0.002 * 3600  # running trials end after the cut


def test_what_a_campaign_plan_cannot_take_is_named(campaign, tmp_path, capsys):
    assert main(["simulate", str(campaign), "--nodes", "1", "-o", str(tmp_path / "x.json")]) == 2
    assert "--hours" in capsys.readouterr().err
    assert main(["simulate", str(campaign), "--hours", "1", "--trials", "5", "-o", str(tmp_path / "x.json")]) == 2
    assert "--trials: the campaign file" in capsys.readouterr().err
    bad = campaign.with_name("bad.yaml")
    data = yaml.safe_load(campaign.read_text())
    data["max_trails"] = 3
    bad.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(bad), "--hours", "1", "-o", str(tmp_path / "x.json")]) == 2
    assert "max_trails" in capsys.readouterr().err
    assert main(["simulate", str(campaign), "--hours", "1", "--dataset", str(tmp_path / "none.bp"),
                 "-o", str(tmp_path / "x.json")]) == 2
    assert "none.bp" in capsys.readouterr().err


def test_learning_from_a_campaign_takes_start_ups_from_attempts_trained_from_epoch_1(tmp_path):
    """``simulate --learn-from``: an attempt that resumed from the trial's training state reports
    its elapsed seconds over every attempt; its first report is no start-up (it would be 50 s here),
    so only the attempt that trained from epoch 1 teaches one (2 s)."""
    from hpo.events import CampaignStarted, TrialProgress, TrialStarted, TrialSuggested
    from hpo.campaign import FrozenCampaign
    from hpo.journal import Journal
    from hydragnn_ensemble.result import EpochReport
    from scheduler.cost_model import CostModel
    from scheduler.dataset_stats import DatasetStats
    from scheduler.efficiency import ParallelEfficiency
    from scheduler.simulator.campaign_plan import learn_campaign
    from scheduler.simulator.workload import SIM_ANCHORS

    shutil.copy(Path(__file__).resolve().parents[2] / "examples" / "alloy" / "formation_energy.json",
                tmp_path / "base_config.json")
    events = [CampaignStarted(time=0.0, campaign=FrozenCampaign.from_dict({}), resume=False, ranks=2, slots=1),
              TrialSuggested(time=0.0, trial_id=0, params={})]
    for attempt, epochs in ((0, (1, 2, 3, 4)), (1, (5, 6))):
        events.append(TrialStarted(time=0.0, trial_id=0, attempt=attempt, slots=(0,), hosts=("n0",), size=1))
        events += [TrialProgress(time=0.0, trial_id=0, attempt=attempt,
                                 report=EpochReport(e, 0.5, elapsed_s=2.0 + 10.0 * e, epoch_s=10.0, train_s=9.0))
                   for e in epochs]
    with Journal(tmp_path / "journal.jsonl") as journal:
        journal.append_many(events)
    model = CostModel(DatasetStats(num_graphs=1000, mean_nodes=30.0, mean_edges=600.0), device_speedup=1.0,
                      efficiency=ParallelEfficiency(slots_per_node=1), anchors=SIM_ANCHORS)
    assert learn_campaign(model, tmp_path) == 2
    assert model.startup_s == pytest.approx(2.0)
