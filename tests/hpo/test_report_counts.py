"""The report's counts agree with each other: a trial suggested and never started is no trial; the
failures by reason add up, status by status, to the trials without an objective that the status
counts name (a timeout in epoch 0 is such a failure); a campaign that ran past ``max_time_s`` says
why."""

from __future__ import annotations

from hpo_testdata import SPACE, params, result

from hpo.report import format_summary, summarize
from hpo.state import CampaignState

MAX_TIME_S, TRIAL_LIMIT_S = 420.0, 100.0
EPOCH0 = f"time budget of {TRIAL_LIMIT_S:g} s reached in epoch 0"
#: trial id -> (start, end, status, objective, reason); trial 7 is suggested and never started
TRIALS = {
    0: (0.0, 100.0, "timeout", 0.5, f"time budget of {TRIAL_LIMIT_S:g} s reached after epoch 3"),
    1: (0.0, 100.0, "timeout", None, EPOCH0),
    2: (100.0, 200.0, "timeout", 0.4, f"time budget of {TRIAL_LIMIT_S:g} s reached after epoch 4"),
    3: (100.0, 150.0, "stopped", 0.9, "asha: rung 0"),
    4: (200.0, 300.0, "timeout", None, EPOCH0),
    5: (400.0, 500.0, "timeout", 0.3, f"time budget of {TRIAL_LIMIT_S:g} s reached after epoch 5"),
    6: (410.0, 530.0, "failed", None, "out of memory"),
}


def campaign_events() -> list[dict]:
    campaign = {"dataset": "/data/x.bp", "base_config": "/data/base.json", "search_space": SPACE,
                "max_trials": 8, "max_time_s": MAX_TIME_S, "trial_time_limit_s": TRIAL_LIMIT_S}
    events = [{"event": "campaign_started", "time": 0.0, "campaign": campaign, "resume": False, "ranks": 3,
               "slots": 2}]
    for tid in range(8):
        events.append({"event": "trial_suggested", "time": 0.0, "trial_id": tid, "params": params(tid),
                       "attempt": 0})
    for tid, (start, end, status, objective, reason) in sorted(TRIALS.items(), key=lambda kv: kv[1][0]):
        events.append({"event": "trial_started", "time": start, "trial_id": tid, "attempt": 0, "slots": [tid % 2],
                       "hosts": ["n0"], "size": 1})
    for tid, (start, end, status, objective, reason) in sorted(TRIALS.items(), key=lambda kv: kv[1][1]):
        kind = "trial_failed" if status == "failed" else "trial_finished"
        event = {"event": kind, "time": end, "trial_id": tid, "attempt": 0,
                 "result": result(status, objective, end - start, reason)}
        if status == "failed":
            event.update(reason=reason, log_tail="Killed")
        events.append(event)
    events.append({"event": "campaign_finished", "time": 530.0, "reason": f"max_time_s ({MAX_TIME_S:g} s) reached"})
    return events


def test_the_trials_line_leaves_out_a_suggestion_and_counts_failures_per_status():
    summary = summarize(CampaignState.replay(campaign_events()))
    assert summary.num_trials == 7 and summary.suggested == 1
    lines = format_summary(summary).splitlines()
    assert lines[0] == ("trials: 7 (timeout 5 (2 without an objective), stopped 1, failed 1); "
                        "1 more suggested, never started")


def test_failures_by_reason_add_up_to_the_trials_without_an_objective_of_each_status():
    summary = summarize(CampaignState.replay(campaign_events()))
    text = format_summary(summary)
    lines = text.splitlines()
    at = lines.index("failures by reason (3 trials without an objective: timeout 2, failed 1):")
    assert lines[at + 1:at + 3] == [f"      2 x timeout: {EPOCH0}", "      1 x out of memory"]
    # the independent count: the trials written above that ended without an objective, per status
    expected: dict[str, int] = {}
    for start, end, status, objective, reason in TRIALS.values():
        if objective is None:
            expected[status] = expected.get(status, 0) + 1
    assert {str(k): v for k, v in summary.without_objective.items()} == expected
    listed: dict[str, int] = {}
    for reason, n in summary.failures:
        status = reason.split(":")[0] if reason.startswith("timeout:") else "failed"
        listed[status] = listed.get(status, 0) + n
    assert listed == expected


def test_a_campaign_past_max_time_s_says_why_with_the_trials_running_at_the_limit():
    lines = format_summary(summarize(CampaignState.replay(campaign_events()))).splitlines()
    at = lines.index(f"campaign finished: max_time_s ({MAX_TIME_S:g} s) reached")
    running = sum(1 for start, end, *_ in TRIALS.values() if start <= MAX_TIME_S < end)  # trials 5 and 6
    assert running == 2
    assert lines[at + 1] == ("campaign time 530 s, 110 s past max_time_s (420 s): max_time_s stops new trials "
                             "from starting; the 2 trials running then were left to finish within their own time "
                             "limit (trial_time_limit_s 100 s)")


def test_no_time_note_within_the_budget():
    events = [e for e in campaign_events() if e.get("trial_id") not in (5, 6) and e["event"] != "campaign_finished"]
    assert CampaignState.replay(events).last_time == 300.0
    text = format_summary(summarize(CampaignState.replay(events)))
    assert "past max_time_s" not in text


def test_the_html_page_lists_the_same_failures(tmp_path):
    from hpo.journal import Journal
    from hpo.report import write_report

    with Journal(tmp_path / "journal.jsonl") as journal:
        for event in campaign_events():
            journal.append(event)
    page = write_report(tmp_path).html.read_text()
    assert '<p class="failures">3 trials without an objective: timeout 2, failed 1 (each told to the optimizer' in page
    assert f'<tr><td>2</td><td class="text">timeout: {EPOCH0}</td></tr>' in page
    assert '<tr><td>1</td><td class="text">out of memory</td></tr>' in page


def test_timeouts_still_improving_are_counted_in_the_report():
    """A timeout whose best epoch was its last one was still improving: the limit cut it short."""
    #: trial -> (epochs trained, best epoch counted from 0) of the timeouts above
    trained = {0: (3, 1), 1: (0, None), 2: (4, 3), 4: (0, None), 5: (5, 4)}
    events = campaign_events()
    for event in events:
        if event["event"] == "trial_finished" and event["trial_id"] in trained:
            event["result"]["epochs"], event["result"]["best_epoch"] = trained[event["trial_id"]]
    improving = sum(1 for epochs, best in trained.values() if best is not None and best == epochs - 1)
    assert improving == 2  # trials 2 and 5
    lines = format_summary(summarize(CampaignState.replay(events))).splitlines()
    assert (f"5 trial(s) ended at their time limit (trial_time_limit_s {TRIAL_LIMIT_S:g} s), 2 of them still "
            "improving (best epoch = last epoch): the limit cut their training short; a longer "
            "trial_time_limit_s (or fewer epochs) would let them finish") in lines
