"""The campaign report: summary figures, table, PNG plots and the CLI command."""

from __future__ import annotations

import shutil

import pytest
from hpo_testdata import sample_events

from hpo.journal import Journal
from hpo.state import CampaignState
from hpo.report import format_summary, load_state, summarize, write_report
from hpo.results_table import write_results_csv
from hydragnn_ensemble.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def campaign_dir(tmp_path):
    directory = tmp_path / "campaign"
    directory.mkdir()
    with Journal(directory / "journal.jsonl") as journal:
        for event in sample_events():
            journal.append(event)
    return directory


def test_summary_figures():
    state = CampaignState.replay(sample_events())
    summary = summarize(state, top=5)
    assert [r.trial_id for r in summary.top] == [2, 0]
    assert summary.best.trial_id == 2
    # trial 5 was only suggested: no trial (it is counted apart)
    assert summary.counts == {"completed": 2, "diverged": 1, "failed": 1, "running": 1}
    assert summary.num_trials == 5 and summary.suggested == 1
    # busy slot-seconds: t0 10 + t1 4 + t2 2x20 + t3 5 + t4 (running until the last event, 1038) 5 = 64
    assert summary.slot_hours == pytest.approx(64 / 3600)
    assert summary.num_slots == 2
    assert summary.utilisation == pytest.approx(64 / (2 * 38))
    assert summary.short_names["NeuralNetwork.Architecture.hidden_dim"] == "hidden_dim"


def test_table_has_best_trial_and_params():
    text = format_summary(summarize(CampaignState.replay(sample_events()), top=3))
    lines = text.splitlines()
    assert lines[0] == ("trials: 5 (completed 2, diverged 1 (1 without an objective), failed 1, running 1); "
                        "1 more suggested, never started")
    assert lines[1] == "best so far: trial 2, objective 0.25"
    assert "utilisation 84.2%" in lines[2]
    header = next(line for line in lines if line.strip().startswith("rank"))
    assert header.split() == ["rank", "trial", "objective", "mpnn_type", "hidden_dim", "num_conv_layers",
                              "learning_rate", "slots", "wall_s"]
    first = lines[lines.index(header) + 1].split()
    assert first == ["1", "2", "0.25", "SchNet", "48", "3", "0.003", "2", "20"]


def _check_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000


def test_write_report_pngs(campaign_dir):
    files = write_report(campaign_dir, top=4)
    assert files.objective_png == campaign_dir / "report" / "objective.png"
    _check_png(files.objective_png)
    _check_png(files.gantt_png)
    assert "best so far: trial 2, objective 0.25" in files.text


def test_report_from_results_csv_only(campaign_dir, tmp_path):
    """A copied directory with only results.csv still gives the table and plots."""
    write_results_csv(load_state(campaign_dir), campaign_dir / "results.csv")
    copy = tmp_path / "copied"
    copy.mkdir()
    shutil.copy(campaign_dir / "results.csv", copy / "results.csv")
    state = load_state(copy)
    assert state.best_trial.trial_id == 2 and state.best_objective == 0.25
    assert [r.trial_id for r in state.finished] == [0, 1, 2, 3]
    files = write_report(copy)
    _check_png(files.gantt_png)
    assert "best so far: trial 2, objective 0.25" in files.text


def test_cli_report(campaign_dir, tmp_path, capsys):
    assert main(["report", str(campaign_dir), "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "best so far: trial 2, objective 0.25" in out
    assert "top 2 trials:" in out
    assert str(campaign_dir / "report" / "gantt.png") in out
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "not a directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert "no journal.jsonl or results.csv" in capsys.readouterr().err


def _hostile_campaign(directory) -> None:
    """A campaign whose categorical values hold matplotlib mathtext and whose curves reach +-1e308."""
    events = sample_events()
    space = dict(events[0]["campaign"]["search_space"])
    space["NeuralNetwork.Architecture.mpnn_type"] = {"type": "categorical", "choices": [r"$\frac$", "GIN", "PNA"]}
    events[0]["campaign"] = {**events[0]["campaign"], "search_space": space}
    for e in events:
        if e["event"] == "trial_suggested" and e["params"]["NeuralNetwork.Architecture.mpnn_type"] == "GIN":
            e["params"]["NeuralNetwork.Architecture.mpnn_type"] = r"$\frac$"
    events += [{"event": "trial_progress", "time": 1034.0 + k, "trial_id": 4, "attempt": 0, "epoch": k + 1,
                "objective": v} for k, v in enumerate([1e308, -1e308, 0.5])]
    with Journal(directory / "journal.jsonl") as journal:
        for event in events:
            journal.append(event)


def test_report_draws_mathtext_labels_and_huge_curves_as_plain_data(tmp_path):
    directory = tmp_path / "hostile"
    directory.mkdir()
    _hostile_campaign(directory)
    files = write_report(directory)
    assert files.figure_errors == {}
    for png in (files.objective_png, files.gantt_png, files.curves_png, files.parallel_png):
        _check_png(png)
    assert r"$\frac$" in files.html.read_text()  # in the trials table, as text


def test_a_figure_that_fails_is_replaced_by_its_error_and_the_others_are_drawn(campaign_dir, monkeypatch, capsys):
    import hpo.report as report

    def broken(state, path):
        raise ValueError("cannot draw this")

    monkeypatch.setattr(report, "plot_gantt", broken)
    files = write_report(campaign_dir)
    assert files.figure_errors == {"gantt": "ValueError: cannot draw this"}
    _check_png(files.objective_png)
    assert "slot usage over time (Gantt): not drawn (ValueError: cannot draw this)" in files.html.read_text()
    assert main(["report", str(campaign_dir)]) == 0
    assert "figure 'gantt' not drawn: ValueError: cannot draw this" in capsys.readouterr().err


def test_report_errors_are_one_line_with_exit_code_2(campaign_dir, tmp_path, capsys):
    lines = (campaign_dir / "journal.jsonl").read_text().splitlines()
    lines[3] = lines[3][:25] + "GARBAGE"
    (campaign_dir / "journal.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["report", str(campaign_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "journal.jsonl: cannot replay the journal: line 4" in err[0]
    ensemble = tmp_path / "ens"
    ensemble.mkdir()
    (ensemble / "manifest.json").write_text("not json")
    assert main(["report", str(campaign_dir), "--ensemble", str(ensemble)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "manifest.json: not a readable ensemble manifest" in err[0]
