"""The ``hydragnn-ensemble`` command line.

Each sub-command lives in its own module under ``hydragnn_ensemble/cli/commands/`` and provides::

    NAME: str                                   # the sub-command, e.g. "build-graphs"
    HELP: str                                   # one line for --help
    def add_arguments(parser) -> None           # its options
    def run(args) -> int                        # exit code; imports heavy modules inside
    def paths(args) -> CommandPaths             # optional: what it reads and writes

When a command has ``paths``, :func:`main` checks them before ``run`` (see
:mod:`hydragnn_ensemble.path_guard`): no output may be an input, contain one or lie inside one, and
an existing output is replaced only when it is what the same command wrote before (``--force``
where the command asks for it).

Command modules are listed once, in :data:`COMMAND_MODULES`, in the order ``--help`` shows them.
Errors a user can fix (bad input, bad config) are raised as :class:`UserError` and printed as one
line without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterable
from typing import Sequence, overload

COMMAND_MODULES: tuple[str, ...] = (
    "demo_data",
    "build_graphs",
    "train",
    "hpo",
    "simulate",
    "select",
    "export",
    "predict",
    "report",
)


class RegistryNames(Sequence[str]):
    """The names of a registry, read from it (``read``) the first time they are needed: when argparse
    checks an option's value against them (``choices``) or lists them in ``--help``. Building the
    parser imports no registry (``ensemble`` loads torch, the placement policies numpy); ``str()``
    lists them, comma-separated."""

    def __init__(self, read: Callable[[], Iterable[str]]) -> None:
        self._read = read
        self._names: tuple[str, ...] | None = None

    def _all(self) -> tuple[str, ...]:
        if self._names is None:
            self._names = tuple(self._read())
        return self._names

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __str__(self) -> str:
        return ", ".join(self._all())


class StoreListingNames(argparse.Action):
    """Stores an option's value as ``store`` does; its help lists ``names`` with ``%(names)s`` (read
    only when ``--help`` is shown). Unlike ``choices``, argparse does not check the value: the
    command does, with its own message."""

    def __init__(self, option_strings: list[str], dest: str, names: RegistryNames, **kwargs) -> None:
        self.names = names
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values)


class UserError(Exception):
    """A problem with the user's input: printed as ``error: <message>`` and exit code 2."""


class _OldName(argparse.Action):
    """An option's former name: stores into the new option's destination and says to use the new one."""

    def __init__(self, option_strings, dest, new_name: str = "", **kwargs) -> None:
        self.new_name = new_name
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"warning: {option_string} is the old name of {self.new_name}; use {self.new_name}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_old_name(parser: argparse.ArgumentParser, old: str, new: str, dest: str, **kwargs) -> None:
    """Accept ``old`` (e.g. ``--data``) as a hidden alias of the option ``new`` (``--dataset``, stored in
    ``dest``), with a warning when used; ``kwargs`` as for the new option (``type``...)."""
    parser.add_argument(old, dest=dest, action=_OldName, new_name=new, help=argparse.SUPPRESS, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hydragnn-ensemble",
        description="Graphs, HPO campaigns and ensembles of HydraGNN-style multi-headed GNNs.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod_name in COMMAND_MODULES:
        mod = importlib.import_module(f"hydragnn_ensemble.cli.commands.{mod_name}")
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _paths=getattr(mod, "paths", None))
    return parser


def check_paths(args: argparse.Namespace) -> None:
    """Refuse (UserError) outputs that overlap inputs or would replace something foreign."""
    from hydragnn_ensemble.path_guard import PathGuardError

    paths = getattr(args, "_paths", None)
    if paths is None:
        return
    try:
        paths(args).check(force=bool(getattr(args, "force", False)))
    except PathGuardError as exc:
        raise UserError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_paths(args)
        return int(args._run(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stopped by Ctrl-C", file=sys.stderr)
        return 130
