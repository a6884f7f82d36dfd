"""What every figure of the campaign report shares: matplotlib's file backend, one colour per trial
status, and the text colour that stays readable on a bar of a given colour."""

from __future__ import annotations

from typing import Any

from hpo.status import ALL_STATUSES, PendingStatus, Status, TrialStatus

#: one colour per status, every final and pending one (the Gantt chart, the curves, the objective plot)
STATUS_COLOURS: dict[Status, str] = {
    TrialStatus.COMPLETED: "#2ca02c",
    TrialStatus.DIVERGED: "#ff7f0e",
    TrialStatus.TIMEOUT: "#9467bd",
    TrialStatus.STOPPED: "#8c564b",
    TrialStatus.FAILED: "#d62728",
    PendingStatus.INTERRUPTED: "#7f7f7f",
    PendingStatus.RUNNING: "#1f77b4",
    PendingStatus.RETRYING: "#bcbd22",
    PendingStatus.MOVED: "#17becf",
    PendingStatus.SUGGESTED: "#c7c7c7",
}
assert set(STATUS_COLOURS) == set(ALL_STATUSES)

#: WCAG's minimum contrast ratio for normal text (level AA); black or white on any colour reaches it
MIN_CONTRAST = 4.5


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (figures are files; no display is needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def relative_luminance(colour: str) -> float:
    """WCAG 2 relative luminance of a ``#rrggbb`` colour (0 black .. 1 white)."""
    channels = [int(colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 .. 21)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_colour_on(background: str) -> str:
    """Black or white, whichever contrasts more with ``background`` (at least 4.58:1 on any colour)."""
    return max(("#000000", "#ffffff"), key=lambda c: contrast_ratio(c, background))
