"""``report/gantt.png``: the campaign's slots over time, one bar per trial attempt and slot, coloured
by status, with the trial id on every bar wide enough to hold it readably and a legend of what is
drawn (the statuses of the bars; the resume line only where the campaign was resumed).

:func:`gantt_legend` is the legend as data: the figure draws it and the HTML page repeats it as text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hpo.figure_style import STATUS_COLOURS, pyplot, text_colour_on
from hpo.state import AttemptRecord, CampaignState
from hpo.status import ALL_STATUSES, Status

#: trial ids are written in this size (points) or not at all: at the figure's 100 dpi, 11 px tall
LABEL_POINTS = 8.0
#: the legend entry of the dashed line drawn at each restart of the campaign
RESUME_LABEL = "dashed line: campaign resumed"


@dataclass(frozen=True)
class LegendEntry:
    """One entry of the chart's legend: a status's colour, or the resume line (``colour`` None)."""

    label: str
    colour: str | None


@dataclass(frozen=True)
class GanttBar:
    """One attempt on one slot, in seconds since the campaign started."""

    trial_id: int
    slot: int
    start: float
    width: float
    status: Status


@dataclass(frozen=True)
class GanttLabel:
    """A trial id written on its bar (``colour``: black or white, whichever contrasts more)."""

    trial_id: int
    x: float
    slot: int
    colour: str


def _attempt_end(attempt: AttemptRecord, state: CampaignState) -> float | None:
    return attempt.end if attempt.end is not None else state.last_time


def gantt_bars(state: CampaignState) -> list[GanttBar]:
    """Every attempt that started, once per slot it held."""
    t0 = state.start_time or 0.0
    bars = []
    for record in state.trials.values():
        for attempt in record.attempts.values():
            end = _attempt_end(attempt, state)
            if attempt.start is None or end is None:
                continue
            for slot in attempt.slots:
                bars.append(GanttBar(record.trial_id, slot, attempt.start - t0, max(end - attempt.start, 0.0),
                                     attempt.status))
    return bars


def resumed(state: CampaignState) -> bool:
    """The campaign ran more than once (a dashed line marks each restart)."""
    return len(state.segments) > 1


def gantt_legend(state: CampaignState) -> list[LegendEntry]:
    """The statuses of the bars drawn (in the reports' status order), then the resume line when
    the campaign was resumed: nothing that is not drawn."""
    drawn = {bar.status for bar in gantt_bars(state)}
    entries = [LegendEntry(str(s), STATUS_COLOURS[s]) for s in ALL_STATUSES if s in drawn]
    if resumed(state):
        entries.append(LegendEntry(RESUME_LABEL, None))
    return entries


def plot_gantt(state: CampaignState, path: str | os.PathLike) -> list[GanttLabel]:
    """Slots (y) over time since the campaign started (x); one bar per trial attempt and slot.
    Returns the trial-id labels written (``LABEL_POINTS``, black or white on the bar, only where the
    text fits inside its bar; none on a chart of more than 150 attempts or 64 slots)."""
    plt = pyplot()
    from matplotlib.collections import PolyCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    bars = gantt_bars(state)
    t0 = state.start_time or 0.0
    num_slots = max((b.slot for b in bars), default=0) + 1
    attempts = {(b.trial_id, b.start) for b in bars}
    fig, ax = plt.subplots(figsize=(10, min(2.0 + 0.3 * num_slots, 12)), dpi=100)
    by_status: dict[Status, list[GanttBar]] = {}
    for bar in bars:
        by_status.setdefault(bar.status, []).append(bar)
    for status, items in by_status.items():  # one collection per status: 10,000 bars draw in well under a second
        boxes = [[(b.start, b.slot - 0.4), (b.start + b.width, b.slot - 0.4), (b.start + b.width, b.slot + 0.4),
                  (b.start, b.slot + 0.4)] for b in items]
        ax.add_collection(PolyCollection(boxes, facecolors=STATUS_COLOURS[status],
                                         edgecolors="white", linewidths=0.5 if len(items) < 2000 else 0.0))
    for start, _, _ in state.segments[1:]:
        ax.axvline(start - t0, color="black", linestyle="--", linewidth=1)
    span = (state.last_time or t0) - t0
    ax.set_xlim(0, max(span, 1e-9))
    ax.set_ylim(-0.6, num_slots - 0.4)
    ax.set_xlabel("seconds since the campaign started")
    ax.set_ylabel("slot")
    if num_slots <= 32:
        ax.set_yticks(range(num_slots))
    ax.invert_yaxis()
    handles: list[Any] = []
    for entry in gantt_legend(state):
        handles.append(Patch(color=entry.colour, label=entry.label) if entry.colour is not None else
                       Line2D([], [], color="black", linestyle="--", linewidth=1, label=entry.label))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    title = f"slot usage: {len(attempts)} trial attempts on {num_slots} slots"
    ax.set_title(f"{title} (trial ids on the bars wide enough to hold them)")  # the longer title, for the layout
    fig.tight_layout()
    labels = _label_bars(fig, ax, bars) if len(attempts) <= 150 and num_slots <= 64 else []
    if not labels:
        ax.set_title(f"{title} (no trial ids drawn)")
    fig.savefig(path)
    plt.close(fig)
    return labels


def _label_bars(fig: Any, ax: Any, bars: list[GanttBar]) -> list[GanttLabel]:
    """Write each attempt's trial id on its first slot's bar, where the text fits inside the bar."""
    renderer = fig.canvas.get_renderer()
    first: dict[tuple[int, float], GanttBar] = {}
    for bar in bars:
        key = (bar.trial_id, bar.start)
        if key not in first or bar.slot < first[key].slot:
            first[key] = bar
    labels = []
    for bar in first.values():
        colour = text_colour_on(STATUS_COLOURS[bar.status])
        x = bar.start + bar.width / 2
        text = ax.text(x, bar.slot, str(bar.trial_id), ha="center", va="center", fontsize=LABEL_POINTS,
                       color=colour, clip_on=True)
        box = text.get_window_extent(renderer)
        (left, top), (right, bottom) = ax.transData.transform([(bar.start, bar.slot - 0.4),
                                                               (bar.start + bar.width, bar.slot + 0.4)])
        if box.width > abs(right - left) - 2 or box.height > abs(bottom - top):
            text.remove()
            continue
        labels.append(GanttLabel(bar.trial_id, x, bar.slot, colour))
    return labels
