"""Campaign file validation, freezing and the resume check."""

from __future__ import annotations

import json

import pytest
import yaml
from hpo_testdata import BASE_CONFIG, SPACE

from hpo.campaign import CampaignChangedError, CampaignConfigError, check_unchanged, freeze, load_campaign


def test_valid_campaign_defaults_and_paths(campaign_files, tmp_path):
    config = load_campaign(campaign_files())
    assert config.dataset == (tmp_path / "data.bp").resolve()
    assert config.base_config == (tmp_path / "base.json").resolve()
    assert config.optimizer.name == "deephyper-cbo" and config.optimizer.options == {}
    assert config.objective == "objective"
    assert (config.max_trials, config.retries, config.seed, config.failure_threshold) == (12, 0, 3, 0.5)
    assert config.min_trials_for_threshold == 8 and config.retry_oom_on_more_slots is True
    assert config.resources.slots_per_trial == [1] and config.resources.device == "cpu"
    assert config.placement == "load-aware" and config.pool_factor == 2.0
    assert config.trial_program == "hydragnn_ensemble"
    assert config.space.keys == list(SPACE)
    assert config.search_space["NeuralNetwork.Architecture.num_conv_layers"]["step"] == 1


def test_unknown_keys_get_a_suggestion(campaign_files):
    path = campaign_files(max_trial=5)
    with pytest.raises(CampaignConfigError) as info:
        load_campaign(path)
    assert str(info.value).startswith(str(path))
    assert "unknown key 'max_trial' (did you mean 'max_trials'?)" in str(info.value)
    with pytest.raises(CampaignConfigError, match=r"unknown key 'resources.slot_per_node' \(did you mean 'slots_per_node'\?\)"):
        load_campaign(campaign_files(resources={"slot_per_node": 4}))
    with pytest.raises(CampaignConfigError, match=r"unknown key 'optimizer.option' \(did you mean 'options'\?\)"):
        load_campaign(campaign_files(optimizer={"name": "random", "option": {}}))


def test_missing_required_and_bad_values(campaign_files):
    with pytest.raises(CampaignConfigError, match="missing required key 'max_trials'"):
        load_campaign(campaign_files(max_trials=None))
    with pytest.raises(CampaignConfigError, match="max_trials: Input should be greater than or equal to 1"):
        load_campaign(campaign_files(max_trials=0))
    with pytest.raises(CampaignConfigError, match="failure_threshold: Input should be less than or equal to 1"):
        load_campaign(campaign_files(failure_threshold=1.5))
    with pytest.raises(CampaignConfigError, match="optimizer.name: unknown optimizer 'hyperopt'; choose one of \\['deephyper-cbo', 'optuna-tpe', 'optuna-nsga2', 'random', 'pbt'\\]"):
        load_campaign(campaign_files(optimizer={"name": "hyperopt"}))
    with pytest.raises(CampaignConfigError, match="slots_per_trial: 6 slots spans nodes but is not a multiple of slots_per_node \\(4\\)"):
        load_campaign(campaign_files(resources={"slots_per_node": 4, "slots_per_trial": [1, 6]}))
    with pytest.raises(CampaignConfigError, match="objective 'val_loss': must be 'objective' or"):
        load_campaign(campaign_files(objective="val_loss"))
    losses = {**SPACE, "NeuralNetwork.Training.loss_function_type": {"type": "categorical",
                                                                       "choices": ["mse", "GaussianNLLLoss"]}}
    with pytest.raises(CampaignConfigError, match="searches NeuralNetwork.Training.loss_function_type, but "
                                                  "objective 'objective' is each trial's validation loss"):
        load_campaign(campaign_files(search_space=losses))
    head = BASE_CONFIG["NeuralNetwork"]["Variables_of_interest"]["output_names"][0]
    ok = load_campaign(campaign_files(search_space=losses, objective=f"heads.{head}.val_mae"))
    assert ok.objective == f"heads.{head}.val_mae"


def test_missing_files_are_named(campaign_files, tmp_path):
    with pytest.raises(CampaignConfigError, match=f"dataset: {tmp_path / 'nope.bp'} does not exist"):
        load_campaign(campaign_files(dataset="nope.bp"))
    with pytest.raises(CampaignConfigError, match=f"base_config: {tmp_path / 'missing.json'} is not a file"):
        load_campaign(campaign_files(base_config="missing.json"))
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(CampaignConfigError, match=f"base_config {tmp_path / 'broken.json'}: not valid JSON"):
        load_campaign(campaign_files(base_config="broken.json"))
    with pytest.raises(CampaignConfigError, match="cannot read campaign file"):
        load_campaign(tmp_path / "no_such.yaml")


def test_bad_search_space_entries_and_paths(campaign_files):
    bad_entry = {**SPACE, "NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 64, "high": 16}}
    with pytest.raises(CampaignConfigError,
                       match="search_space: search space key 'NeuralNetwork.Architecture.hidden_dim': low \\(64\\) must be <= high \\(16\\)"):
        load_campaign(campaign_files(search_space=bad_entry))
    bad_path = {**SPACE, "NeuralNetwork.Trainig.batch_size": {"type": "int", "low": 16, "high": 64}}
    with pytest.raises(CampaignConfigError) as info:
        load_campaign(campaign_files(search_space=bad_path))
    message = str(info.value)
    assert "search_space: config key 'NeuralNetwork.Trainig.batch_size': 'Trainig' not found under NeuralNetwork (did you mean 'Training'?)" in message
    assert "base.json" in message


def test_freeze_and_resume_check(campaign_files, tmp_path):
    path = campaign_files()
    config = load_campaign(path)
    campaign_dir = tmp_path / "run"
    freeze(config, campaign_dir)
    frozen = yaml.safe_load((campaign_dir / "campaign.yaml").read_text())
    assert frozen["dataset"] == str((tmp_path / "data.bp").resolve())
    assert frozen["optimizer"] == {"name": "deephyper-cbo", "options": {}, "own_process": "auto"}
    assert json.loads((campaign_dir / "base_config.json").read_text())["NeuralNetwork"]["Architecture"]["hidden_dim"] == 64
    check_unchanged(load_campaign(path), campaign_dir)  # same campaign: fine
    # frozen by an earlier version, before optimizer.own_process existed: its default, no change
    older = dict(frozen, optimizer={"name": "deephyper-cbo", "options": {}})
    (campaign_dir / "campaign.yaml").write_text(yaml.safe_dump(older))
    check_unchanged(load_campaign(path), campaign_dir)

    changed = campaign_files(max_trials=20, seed=4)
    with pytest.raises(CampaignChangedError, match="differs from its frozen copy .* in: max_trials, seed"):
        check_unchanged(load_campaign(changed), campaign_dir)
    check_unchanged(load_campaign(campaign_files(max_trials=20, seed=3)), campaign_dir, allow=["max_trials"])

    base = json.loads((tmp_path / "base.json").read_text())
    base["NeuralNetwork"]["Training"]["num_epoch"] = 50
    (tmp_path / "base.json").write_text(json.dumps(base))
    path = campaign_files()  # the original campaign file again
    with pytest.raises(CampaignChangedError, match="in: base_config:NeuralNetwork.Training.num_epoch"):
        check_unchanged(load_campaign(path), campaign_dir)


def test_optimizer_options_checked_before_launch(campaign_files):
    with pytest.raises(CampaignConfigError, match="optimizer.options: optimizer 'optuna-tpe': unknown option 'n_startup'"):
        load_campaign(campaign_files(optimizer={"name": "optuna-tpe", "options": {"n_startup": 5}}))
    with pytest.raises(CampaignConfigError, match="optimizer.options: optimizer 'random': takes no options"):
        load_campaign(campaign_files(optimizer={"name": "random", "options": {"seed": 1}}))
    config = load_campaign(campaign_files(optimizer={"name": "optuna-tpe", "options": {"n_startup_trials": 5}}))
    assert config.optimizer.options == {"n_startup_trials": 5}


def test_the_verdict_wait_is_a_campaign_setting_not_a_stopper_option(campaign_files):
    config = load_campaign(campaign_files(early_stopping={"method": "asha", "min_epochs": 1, "verdict_wait_s": 0.5}))
    assert config.early_stopping.verdict_wait_s == 0.5 and config.early_stopping.options == {"min_epochs": 1}
    assert config.early_stopping.make().decision_epochs(10) == (1, 3, 9)
    assert load_campaign(campaign_files(early_stopping={"method": "asha"})).early_stopping.verdict_wait_s == 2.0
    with pytest.raises(CampaignConfigError, match="verdict_wait_s"):
        load_campaign(campaign_files(early_stopping={"method": "asha", "verdict_wait_s": -1}))


def test_search_space_keys_and_base_config_are_checked_against_the_schema(campaign_files, tmp_path):
    """A typo under an existing section would burn trials until the failure threshold stops the
    campaign: the built-in trainer's keys are checked at campaign start, every problem listed."""
    typo = {**SPACE, "NeuralNetwork.Architecture.hiden_dim": {"type": "int", "low": 8, "high": 64}}
    base = json.loads((tmp_path / "base.json").read_text())
    base["NeuralNetwork"]["Training"]["num_epochs"] = 3
    (tmp_path / "base.json").write_text(json.dumps(base))
    with pytest.raises(CampaignConfigError) as info:
        load_campaign(campaign_files(search_space=typo))
    message = str(info.value)
    assert "search_space: NeuralNetwork.Architecture.hiden_dim: unknown key; did you mean 'hidden_dim'?" in message
    assert "NeuralNetwork.Training.num_epochs: unknown key; did you mean 'num_epoch'?" in message
    assert message.startswith(str(tmp_path / "campaign.yaml"))
    # another trial program reads its own config: only the paths into the base config are checked
    custom = load_campaign(campaign_files(search_space=typo, trial_program="my_trainer"))
    assert "NeuralNetwork.Architecture.hiden_dim" in custom.search_space


def test_values_a_library_cannot_hold_and_names_with_a_newline_are_refused(campaign_files):
    from hpo.campaign import CampaignConfigError, load_campaign

    with pytest.raises(CampaignConfigError, match=r"trial_program: 'name\\n' is not a python module name"):
        load_campaign(campaign_files(trial_program="name\n"))
    space = {"NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 1, "high": 2**63}}
    with pytest.raises(CampaignConfigError, match=r"'NeuralNetwork.Architecture.hidden_dim': 'high' must be within"):
        load_campaign(campaign_files(search_space=space))


def test_gpu_sharing_words_and_the_curve_it_needs(campaign_files, tmp_path):
    (tmp_path / "curve.json").write_text(json.dumps({"aggregate": {"1": 1.0, "2": 1.7}}))
    config = load_campaign(campaign_files(resources={"gpu_sharing": 2, "colocation_curve": "curve.json",
                                                     "device_memory_gb": 80}))
    assert config.resources.gpu_sharing == "2" and config.resources.device_memory_gb == 80
    assert config.resources.colocation_curve == (tmp_path / "curve.json").resolve()  # relative to the file
    assert load_campaign(campaign_files()).resources.gpu_sharing == "off"
    assert load_campaign(campaign_files(resources={"gpu_sharing": 1})).resources.gpu_sharing == "off"
    with pytest.raises(CampaignConfigError, match="gpu_sharing: auto needs colocation_curve, a file measured"):
        load_campaign(campaign_files(resources={"gpu_sharing": "auto", "device": "gpu"}))
    with pytest.raises(CampaignConfigError, match="gpu_sharing: auto judges each trial's predicted GPU utilisation"):
        load_campaign(campaign_files(resources={"gpu_sharing": "auto", "colocation_curve": "curve.json"}))
    with pytest.raises(CampaignConfigError, match="must be off, auto or a number of trials per GPU"):
        load_campaign(campaign_files(resources={"gpu_sharing": "lots", "colocation_curve": "curve.json"}))
    with pytest.raises(CampaignConfigError, match="resources.colocation_curve: .*missing.json is not a file"):
        load_campaign(campaign_files(resources={"gpu_sharing": 2, "colocation_curve": "missing.json"}))
