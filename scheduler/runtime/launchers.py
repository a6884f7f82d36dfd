"""The trial launchers a campaign names (``trial_launcher``): one place that knows them all, one
launcher under each name of :data:`hpo.campaign.TRIAL_LAUNCHERS` (the campaign file's list; a test,
``tests/campaign/test_fork_server.py``, checks that the two name the same launchers)."""

from __future__ import annotations

from typing import Callable

from scheduler.runtime.fork_server import ForkServerLauncher
from scheduler.runtime.launch import ExecLauncher, Launcher


def _exec_launcher(binding: dict[str, str], preload: list[str]) -> Launcher:
    """A new interpreter per trial process: nothing is preloaded."""
    return ExecLauncher(binding)


#: launcher name -> factory(binding, preload)
LAUNCHER_FACTORIES: dict[str, Callable[[dict[str, str], list[str]], Launcher]] = {
    "fork-server": ForkServerLauncher,
    "exec": _exec_launcher,
}


def make_launcher(kind: str, binding: dict[str, str], preload: list[str]) -> Launcher:
    """The launcher named by the campaign's ``trial_launcher`` (a name of :data:`LAUNCHER_FACTORIES`)."""
    if kind not in LAUNCHER_FACTORIES:
        raise ValueError(f"unknown trial launcher {kind!r} ({', '.join(LAUNCHER_FACTORIES)})")
    return LAUNCHER_FACTORIES[kind](binding, preload)
