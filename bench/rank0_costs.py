"""Rank 0's periodic and per-start work at two campaign sizes (issue #45), each timed against the way
it was done before in the same run.

- ``results.csv`` every 5 s: appended rows for the trials gathered since the last write
  (:class:`hpo.results_table.ResultsCsv`) against the whole table rewritten
  (:func:`hpo.results_table.write_results_csv`, what rank 0 did on every tick), with ``--sizes``
  trials already finished and ``--new`` more since the last tick;
- a trial's start on rank 0: its config made and serialised (:func:`hpo.space.apply_params`, compact
  JSON) against ``copy.deepcopy`` of the base config and ``json.dumps(indent=2)``.

Run: ``python -m bench.rank0_costs`` (about a minute). Medians of ``--repeat`` runs; CPU time of this
thread (``time.thread_time``) and wall time.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from hpo.events import CampaignStarted, TrialFinished, TrialStarted, TrialSuggested
from hpo.campaign import FrozenCampaign
from hpo.results_table import ResultsCsv, write_results_csv
from hpo.space import apply_params
from hpo.state import CampaignState
from hydragnn_ensemble.result import HeadMetrics, TrialResult

BASE_CONFIG = Path(__file__).resolve().parents[1] / "examples" / "alloy" / "config.json"
PARAMS = {"NeuralNetwork.Architecture.hidden_dim": 64, "NeuralNetwork.Training.learning_rate": 1e-3,
          "NeuralNetwork.Architecture.num_conv_layers": 3, "NeuralNetwork.Architecture.mpnn_type": "SchNet"}
SPACE = {"NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 16, "high": 128},
         "NeuralNetwork.Training.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
         "NeuralNetwork.Architecture.num_conv_layers": {"type": "int", "low": 1, "high": 6},
         "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["SchNet", "EGNN"]}}


def _finish(state: CampaignState, trial_id: int, t: float) -> None:
    """One trial suggested, started on one slot and finished with two heads' errors."""
    heads = {"energy": HeadMetrics(val_mae=0.01 * trial_id, val_rmse=0.02), "forces": HeadMetrics(val_mae=0.1)}
    result = TrialResult("completed", objective=1.0 / (1 + trial_id), heads=heads, epochs=30, wall_time_s=60.0)
    for event in (TrialSuggested(time=t, trial_id=trial_id, params=dict(PARAMS)),
                  TrialStarted(time=t, trial_id=trial_id, attempt=0, slots=(trial_id % 65536,),
                               hosts=(f"node{trial_id % 65536 // 8}",), size=1),
                  TrialFinished(time=t + 60.0, trial_id=trial_id, attempt=0, result=result)):
        state.apply(event)


def _campaign(n: int) -> CampaignState:
    state = CampaignState()
    state.apply(CampaignStarted(time=0.0, campaign=FrozenCampaign.from_dict({"objective": "objective", "search_space": SPACE}),
                                resume=False, ranks=65536, slots=65536))
    for i in range(n):
        _finish(state, i, float(i))
    return state


def _median(run: Callable[[], None], repeat: int) -> tuple[float, float]:
    """Median CPU and wall seconds of ``run``."""
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.thread_time(), time.perf_counter()
        run()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def bench_results_csv(size: int, new: int, repeat: int, workdir: Path) -> dict[str, float]:
    """One 5-s tick with ``size`` trials finished before and ``new`` since the last tick."""
    state = _campaign(size)
    table = ResultsCsv(workdir / f"appended_{size}.csv")
    table.update(state)
    next_id = size

    def append() -> None:
        nonlocal next_id
        for _ in range(new):
            _finish(state, next_id, float(next_id))
            next_id += 1
        c0 = time.thread_time()
        table.update(state)
        times.append(time.thread_time() - c0)

    times: list[float] = []
    _median(append, repeat)
    appended = statistics.median(times)
    whole_cpu, _ = _median(lambda: write_results_csv(state, workdir / f"whole_{size}.csv"), repeat)
    assert (workdir / f"appended_{size}.csv").read_text() == (workdir / f"whole_{size}.csv").read_text()
    return {"appended_ms": 1e3 * appended, "whole_ms": 1e3 * whole_cpu}


def bench_start_config(repeat: int) -> dict[str, float]:
    """A trial's config made and serialised, per start."""
    base = json.loads(BASE_CONFIG.read_text())
    n = 2000

    def new() -> None:
        for _ in range(n):
            json.dumps(apply_params(base, PARAMS))

    def before() -> None:
        for _ in range(n):
            config = copy.deepcopy(base)
            config["NeuralNetwork"]["Architecture"]["hidden_dim"] = 64
            json.dumps(config, indent=2)

    ours, _ = _median(new, repeat)
    theirs, _ = _median(before, repeat)
    return {"ours_us": 1e6 * ours / n, "before_us": 1e6 * theirs / n}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--new", type=int, default=100, help="trials finished between two ticks (default 100)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"results.csv per 5-s tick, {args.new} trials gathered since the last (CPU ms, median of {args.repeat})")
    print(f"{'finished before':>16} {'appended':>10} {'whole rewrite':>14} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            row = bench_results_csv(size, args.new, args.repeat, Path(tmp))
            print(f"{size:>16,} {row['appended_ms']:>10.2f} {row['whole_ms']:>14.1f} "
                  f"{row['whole_ms'] / row['appended_ms']:>6.0f}x")
    row = bench_start_config(args.repeat)
    print(f"a start's config (made + serialised): {row['ours_us']:.1f} us, before (deepcopy + indent=2) "
          f"{row['before_us']:.1f} us: {row['before_us'] / row['ours_us']:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
