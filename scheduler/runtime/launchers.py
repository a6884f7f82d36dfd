"""The trial launcher a campaign names (``trial_launcher``): one place that knows them all."""

from __future__ import annotations

from scheduler.runtime.fork_server import ForkServerLauncher
from scheduler.runtime.launch import ExecLauncher, Launcher

LAUNCHERS: tuple[str, ...] = ("fork-server", "exec")


def make_launcher(kind: str, binding: dict[str, str], preload: list[str]) -> Launcher:
    """The launcher named by the campaign's ``trial_launcher``: "fork-server" or "exec"."""
    if kind == "exec":
        return ExecLauncher(binding)
    if kind == "fork-server":
        return ForkServerLauncher(binding, preload)
    raise ValueError(f"unknown trial launcher {kind!r} ({', '.join(LAUNCHERS)})")
