"""Export of the top-K configurations."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
import yaml

from ensemble import ExportError, export_top_k, read_campaign
from ensemble.export import DatasetLayout, for_hydragnn
from hydragnn_ensemble.config import get_by_dotted_key, load_config


def test_hydragnn_configs_load_and_hold_the_trial_values(direct_campaign, tmp_path):
    files = export_top_k(direct_campaign.root, 3, "hydragnn", tmp_path / "out").files
    ranked = read_campaign(direct_campaign.root).ranked()[:3]
    assert [f.name for f in files] == ["members.csv"] + [f"trial_{t.trial_id}.json" for t in ranked]
    for trial in ranked:
        config = load_config(tmp_path / "out" / f"trial_{trial.trial_id}.json")
        for key, value in trial.params.items():
            assert get_by_dotted_key(config, key) == value
        # the trial's own config, with the layer sizes HydraGNN requires and its heads' layout written out
        assert json.loads((tmp_path / "out" / f"trial_{trial.trial_id}.json").read_text()) == \
            for_hydragnn(json.loads((trial.run_dir / "config.json").read_text()),
                         DatasetLayout.read(direct_campaign.dataset))
    rows = list(csv.DictReader((tmp_path / "out" / "members.csv").open()))
    assert [int(r["trial_id"]) for r in rows] == [t.trial_id for t in ranked]
    assert [float(r["objective"]) for r in rows] == [t.objective for t in ranked]
    assert rows[0]["p:NeuralNetwork.Architecture.mpnn_type"] == ranked[0].params["NeuralNetwork.Architecture.mpnn_type"]
    assert float(rows[0]["m:forces:val_mae"]) == ranked[0].result.heads["forces"].val_mae


def test_json_yaml_csv_formats(direct_campaign, tmp_path):
    ranked = [t.trial_id for t in read_campaign(direct_campaign.root).ranked()[:2]]
    export_top_k(direct_campaign.root, 2, "json", tmp_path / "j")
    export_top_k(direct_campaign.root, 2, "yaml", tmp_path / "y")
    files = export_top_k(direct_campaign.root, 2, "csv", tmp_path / "c").files
    as_json = json.loads((tmp_path / "j" / "top_k.json").read_text())
    as_yaml = yaml.safe_load((tmp_path / "y" / "top_k.yaml").read_text())
    assert [r["trial_id"] for r in as_json] == [r["trial_id"] for r in as_yaml] == ranked
    assert as_json[0]["config"] == as_yaml[0]["config"]
    assert [f.name for f in files] == ["members.csv"]
    with pytest.raises(ExportError, match="unknown format 'xml'"):
        export_top_k(direct_campaign.root, 2, "xml", tmp_path / "x")


def test_optuna_format_is_the_whole_campaign_for_optuna_dashboard(direct_campaign, tmp_path):
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    from hpo.campaign_reader import read_campaign_dir

    files = export_top_k(direct_campaign.root, 2, "optuna", tmp_path / "o").files
    assert [f.name for f in files] == ["members.csv", "optuna_journal.log"]
    storage = JournalStorage(JournalFileBackend(str(files[1])))
    study = optuna.load_study(study_name="hydragnn-ensemble", storage=storage)
    state = read_campaign_dir(direct_campaign.root).state
    finished = sorted(state.finished, key=lambda r: r.trial_id)
    assert [t.user_attrs["trial_id"] for t in study.trials] == [r.trial_id for r in finished]
    best = min((r for r in finished if r.status == "completed"), key=lambda r: r.objective)
    assert study.best_value == best.objective and study.best_trial.params == best.params
    assert {t.user_attrs["status"] for t in study.trials if t.state.name == "FAIL"} == {
        r.status for r in finished if r.status not in ("completed", "stopped")}
    # an export directory is replaced by a later export
    export_top_k(direct_campaign.root, 1, "optuna", tmp_path / "o")
    assert len(optuna.load_study(study_name="hydragnn-ensemble", storage=JournalStorage(
        JournalFileBackend(str(files[1])))).trials) == len(finished)


def test_disagreeing_trial_config_is_an_error(direct_campaign, tmp_path):
    copy = tmp_path / "camp"
    shutil.copytree(direct_campaign.root, copy)
    best = read_campaign(copy).ranked()[0].trial_id
    path = copy / "trials" / str(best) / "config.json"
    cfg = json.loads(path.read_text())
    cfg["NeuralNetwork"]["Training"]["num_epoch"] = 99
    path.write_text(json.dumps(cfg))
    with pytest.raises(ExportError, match=rf"trial {best}: .* differs from .* at NeuralNetwork.Training.num_epoch"):
        export_top_k(copy, 1, "hydragnn", tmp_path / "o")


def test_export_cli(direct_campaign, tmp_path, capsys):
    from hydragnn_ensemble.cli import main

    assert main(["export", str(direct_campaign.root), "--top-k", "2", "--format", "hydragnn",
                 "-o", str(tmp_path / "o")]) == 0
    assert len(list((tmp_path / "o").glob("trial_*.json"))) == 2
    assert main(["export", str(direct_campaign.root), "--top-k", "7", "-o", str(tmp_path / "p")]) == 2
    assert "only 5 completed trial(s)" in capsys.readouterr().err


def test_export_names_every_member_and_head_it_leaves_out_on_stdout(alloy_store, tmp_path, capsys):
    """A potential-mode campaign of an EGNN and a SchNet (the recommended config's layer): the EGNN's
    HydraGNN config holds the energy (forces by autograd) and not the stress, the SchNet gets none;
    export says both on stdout, one line each, and the lines agree with the files written."""
    from ensemble_testkit import TrialPlan, build_campaign, small_base_config

    from hydragnn_ensemble.cli import main

    mt, hd, lr = ("NeuralNetwork.Architecture.mpnn_type", "NeuralNetwork.Architecture.hidden_dim",
                  "NeuralNetwork.Training.Optimizer.learning_rate")
    plans = [TrialPlan(i, {mt: m, hd: 8, lr: 0.002}) for i, m in enumerate(("EGNN", "SchNet"))]
    space = {mt: {"type": "categorical", "choices": ["EGNN", "SchNet"]}, hd: {"type": "int", "low": 8, "high": 16},
             lr: {"type": "float", "low": 1e-3, "high": 1e-2, "log": True}}
    campaign = build_campaign(tmp_path / "campaign", alloy_store, small_base_config(epochs=1, potential=True),
                              plans, space)
    out = tmp_path / "out"
    assert main(["export", str(campaign.root), "--top-k", "2", "--format", "hydragnn", "-o", str(out),
                 "--no-progress"]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if line.startswith("left out: ")]
    assert "left out" not in captured.err
    written = {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in out.glob("trial_*.json")}
    assert sorted(written) == [0]  # the EGNN
    assert len(lines) == 2
    assert lines[0].startswith("left out: trial 1, no HydraGNN config written: potential mode with SchNet: "
                               "HydraGNN's SchNet refuses edge features with interatomic potentials")
    # the heads the EGNN predicts that its HydraGNN config does not: each named once, with why
    predicted = campaign.base_config["NeuralNetwork"]["Variables_of_interest"]["output_names"]
    network = written[0]["NeuralNetwork"]
    kept = set(network["Variables_of_interest"]["output_names"])
    assert kept == {"formation_energy"} and network["Architecture"]["force_weight"] > 0  # forces by autograd
    missing = [h for h in predicted if h not in kept and h != "forces"]
    assert missing == ["stress"]
    assert lines[1] == ("left out: head 'stress' of trial 0 (the HydraGNN config predicts no stress): HydraGNN's "
                        "interatomic potential trains exactly one head, the energy, with forces by autograd (its "
                        "energy_force_loss asserts num_heads == 1), and computes no stress (no strain derivative); "
                        "ours reports it as dE/dstrain")
