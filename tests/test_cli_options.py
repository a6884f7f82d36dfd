"""The command line as a whole: every option says what it does, and one flag name means one thing."""

from __future__ import annotations

import argparse

import pytest

from hydragnn_ensemble.cli import build_parser, main


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_of_every_command_has_help() -> None:
    missing = [f"{name} {'/'.join(a.option_strings) or a.dest}"
               for name, sub in _subparsers().items() for a in sub._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert missing == []


def test_one_flag_name_per_meaning_across_commands() -> None:
    """The dataset is --dataset and the number of trials taken --top-k in every command."""
    flags = {name: {s for a in sub._actions for s in a.option_strings if a.help != argparse.SUPPRESS}
             for name, sub in _subparsers().items()}
    assert all("--data" not in f and "--top" not in f for f in flags.values())
    assert {"train", "hpo", "select"} <= {n for n, f in flags.items() if "--dataset" in f}
    assert {"select", "export", "report"} <= {n for n, f in flags.items() if "--top-k" in f}


@pytest.mark.parametrize("argv, dest, value", [
    (["train", "c.json", "--data", "d.bp", "-o", "r"], "dataset", "d.bp"),
    (["report", "camp", "--top", "3"], "top_k", 3),
])
def test_old_flag_names_still_work_and_say_the_new_one(argv, dest, value, capsys) -> None:
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    new = "--dataset" if dest == "dataset" else "--top-k"
    assert f"use {new}" in capsys.readouterr().err


def test_a_usage_error_is_one_line_and_exit_code_2(tmp_path, capsys) -> None:
    code = main(["report", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "nowhere" in err[0]


def test_every_command_accepts_no_progress() -> None:
    """``--no-progress`` is accepted by every command (``export --no-progress`` was refused)."""
    lacking = [name for name, sub in _subparsers().items()
               if "--no-progress" not in {s for a in sub._actions for s in a.option_strings}]
    assert lacking == []
    args = build_parser().parse_args(["export", "camp", "-o", "out", "--no-progress"])
    assert args.no_progress is True


def _help_of(command: str) -> str:
    """The command's --help without white space (argparse wraps lines, also at hyphens)."""
    return "".join(_subparsers()[command].format_help().split())


def test_lists_of_choices_are_read_from_their_registries(monkeypatch) -> None:
    """``select --method`` takes and lists :data:`ensemble.build.METHODS`, ``export --format``
    :data:`ensemble.export.FORMATS`, ``simulate --policy`` lists the placement registry: a method,
    format or policy added there is offered with no other edit."""
    import ensemble.build
    import ensemble.export
    from scheduler.placement import registry

    monkeypatch.setattr(ensemble.export, "FORMATS", (*ensemble.export.FORMATS, "newest-format"))
    assert "oneofhydragnn,json,yaml,csv,optuna,newest-format(defaulthydragnn)" in _help_of("export")
    assert build_parser().parse_args(["export", "c", "-o", "e", "--format", "newest-format"]).format == "newest-format"
    monkeypatch.setattr(ensemble.build, "METHODS", (*ensemble.build.METHODS, "newest-method"))
    monkeypatch.setitem(registry.POLICY_FACTORIES, "newest-policy", registry.FifoPolicy)
    assert "oneoftopk,greedy,greedy-per-head,diverse,newest-method(defaulttopk)" in _help_of("select")
    assert build_parser().parse_args(["select", "c", "-o", "e", "--method", "newest-method"]).method == "newest-method"
    assert "fifo,fifo-skip,first-fit,fixed-block,load-aware,newest-policy(defaultload-aware)" in _help_of("simulate")


def test_building_the_parser_imports_no_registry_that_loads_torch() -> None:
    """The lists of choices are read when a value is checked or --help is shown, not when the parser
    is built (every command, every MPI rank of a campaign builds it)."""
    import subprocess
    import sys
    from pathlib import Path

    probe = ("import sys; from hydragnn_ensemble.cli import build_parser; build_parser(); "
             "print(sorted(m for m in ('torch', 'ensemble') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
