"""The Gantt chart: trial ids readable where they are drawn (8 pt, black or white by contrast with
their bar, only on bars wide enough), and a legend of only what is drawn (the resume line only in a
resumed campaign)."""

from __future__ import annotations

from hpo.figure_style import STATUS_COLOURS, contrast_ratio, relative_luminance, text_colour_on
from hpo.gantt import LABEL_POINTS, RESUME_LABEL, gantt_legend, plot_gantt
from hpo.state import CampaignState
from hpo.status import TrialStatus
from hpo_testdata import params, result

#: trial id -> (start, end, status, slot); trial 3 lasts 1 s of a 1,000 s chart: no room for its id
TRIALS = {0: (0.0, 400.0, "completed", 0), 1: (0.0, 300.0, "timeout", 1), 2: (400.0, 1000.0, "stopped", 0),
          3: (300.0, 301.0, "completed", 1), 4: (301.0, 1000.0, "timeout", 1)}


def events(resume_at: float | None = None) -> list[dict]:
    out = [{"event": "campaign_started", "time": 0.0, "campaign": {}, "resume": False, "ranks": 3, "slots": 2}]
    for tid, (start, end, status, slot) in TRIALS.items():
        out += [{"event": "trial_suggested", "time": start, "trial_id": tid, "params": params(tid), "attempt": 0},
                {"event": "trial_started", "time": start, "trial_id": tid, "attempt": 0, "slots": [slot],
                 "hosts": ["n0"], "size": 1},
                {"event": "trial_finished", "time": end, "trial_id": tid, "attempt": 0,
                 "result": result(status, 0.5, end - start)}]
    if resume_at is not None:
        out.append({"event": "campaign_started", "time": resume_at, "campaign": {}, "resume": True, "ranks": 3,
                    "slots": 2})
    return sorted(out, key=lambda e: e["time"])


def test_the_wcag_contrast_of_black_and_white():
    assert relative_luminance("#ffffff") == 1.0 and relative_luminance("#000000") == 0.0
    assert round(contrast_ratio("#ffffff", "#000000"), 6) == 21.0
    # white on the timeout purple is 4.2:1 (below WCAG's 4.5): the ids were white on it; black is 5.0:1
    assert 4.1 < contrast_ratio("#ffffff", STATUS_COLOURS[TrialStatus.TIMEOUT]) < 4.5
    assert text_colour_on(STATUS_COLOURS[TrialStatus.TIMEOUT]) == "#000000"
    assert text_colour_on("#1f1f1f") == "#ffffff"


def test_trial_ids_are_8_point_high_contrast_and_only_where_they_fit(tmp_path):
    state = CampaignState.replay(events())
    labels = plot_gantt(state, tmp_path / "gantt.png")
    assert (tmp_path / "gantt.png").read_bytes()[:4] == b"\x89PNG"
    assert LABEL_POINTS >= 8
    assert sorted(label.trial_id for label in labels) == [0, 1, 2, 4]  # not 3: 1 s of 1,000 s is 1 px wide
    for label in labels:
        bar = STATUS_COLOURS[TrialStatus(TRIALS[label.trial_id][2])]
        assert contrast_ratio(label.colour, bar) >= 4.5


def test_the_legend_shows_the_statuses_drawn_and_the_resume_line_only_after_a_resume(tmp_path):
    drawn = [entry.label for entry in gantt_legend(CampaignState.replay(events()))]
    assert drawn == ["completed", "timeout", "stopped"]  # no failed, running ... and no resume line
    resumed = [entry.label for entry in gantt_legend(CampaignState.replay(events(resume_at=1000.0)))]
    assert resumed == ["completed", "timeout", "stopped", RESUME_LABEL]
