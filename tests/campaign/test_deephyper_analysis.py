"""DeepHyper's own analysis helpers (``deephyper.analysis.hpo``), with their default arguments, on the
results.csv of a real MPI campaign: they must find the best trials (DeepHyper maximises, our loss is
minimised), skip failures, and plot the trajectory and worker utilisation."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from campaign_testkit import fault_objective, run_hpo, write_campaign  # noqa: E402
from deephyper.analysis.hpo import (  # noqa: E402
    filter_failed_objectives,
    parameters_at_max,
    parameters_at_topk,
    parameters_from_row,
    plot_search_trajectory_single_objective_hpo,
    plot_worker_utilization,
    read_results_from_csv,
)

pytestmark = pytest.mark.mpi


def test_deephyper_analysis_on_a_campaigns_results_csv(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path, modes={1: "raise", 4: "nan"}, max_trials=10, sleep_s=0.1)
    out = tmp_path / "out"
    proc = run_hpo(campaign, out, ranks=4)
    assert proc.returncode == 0, proc.stderr
    losses = {}
    for tid in range(10):
        if tid not in (1, 4):
            losses[tid] = fault_objective(json.loads((out / "trials" / str(tid) / "config.json").read_text()))

    df = read_results_from_csv(str(out / "results.csv"))
    assert sorted(df["job_id"]) == list(range(10))
    good, failed = filter_failed_objectives(df)
    assert sorted(failed["job_id"]) == [1, 4] and sorted(good["job_id"]) == sorted(losses)
    assert np.allclose(good["objective"], -good["loss"])

    best = min(losses, key=losses.get)
    params, objective = parameters_at_max(df)
    assert objective == pytest.approx(-losses[best])
    row = good[good["job_id"] == best].iloc[0]
    assert params == parameters_from_row(row)
    top3 = [p for p, _ in parameters_at_topk(df, k=3)]
    expected = sorted(losses, key=losses.get)[:3]
    assert top3 == [parameters_from_row(good[good["job_id"] == t].iloc[0]) for t in expected]

    # the plots DeepHyper users open, with default arguments
    fig, ax = plot_search_trajectory_single_objective_hpo(df)
    trajectory = ax.get_lines()[0].get_ydata()
    assert np.max(trajectory) == pytest.approx(-losses[best])
    plt.close(fig)
    fig, ax = plot_worker_utilization(df)
    active = ax.get_lines()[0].get_ydata()
    assert active.max() <= 3 and active.max() >= 1 and active[-1] == 0  # 3 workers, all done at the end
    plt.close(fig)
    # times are relative to the campaign's start; submit/start is when the trial got its slot
    assert (df["m:timestamp_suggested"] >= 0).all()
    assert (df["m:timestamp_suggested"] <= df["m:timestamp_submit"]).all()
    assert (df["m:timestamp_submit"] == df["m:timestamp_start"]).all()
    assert (df["m:timestamp_start"] < df["m:timestamp_end"]).all()
    # gathered when rank 0 journaled the end, after the processes ended; rows in gather order
    assert (df["m:timestamp_end"] <= df["m:timestamp_gather"]).all()
    assert df["m:timestamp_gather"].is_monotonic_increasing
