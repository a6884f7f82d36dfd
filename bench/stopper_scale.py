"""One early-discarding decision at scale: the stoppers of issue #45 against the O(n) originals.

    .venv/bin/python -m bench.stopper_scale [--sizes 65536 500000] [--pareto-sizes 1000 10000]
                                            [--repeats 101] [--full]

Per stopper and size, a rung (or, for the median rule, an epoch) holds ``n`` values of random
trials, then new trials report there one at a time; each such report is one decision, timed alone
(``time.perf_counter``), and the median over the repeats is printed for ours and for the anchor,
in the same process, with the ratio:

- ``asha`` (min 1 epoch, reduction factor 3), at rung 0; ``median`` (min 1 epoch, 3 trials) at
  epoch 5: sizes ``--sizes`` (65,536 and 500,000 values);
- ``pareto-asha`` (min 1 epoch, reduction factor 3), pairs (loss, seconds) drawn independently, at
  rung 0: sizes ``--pareto-sizes`` (1,000 and 10,000 trials).

Ours is filled through ``report`` (its mean cost per report over the fill is printed too); the
anchor, ``tests/hpo/reference_stoppers.py`` (each decision sorts its rung, or sorts it into fronts),
gets the same values written into its rung directly (filling it by reports would take hours). The
anchor is repeated ``--repeats`` times at most and for at most ~5 s per row; pareto-asha's anchor
at 10,000 trials takes minutes for one decision, so it runs only with ``--full`` (default run:
about 1 minute on a shared 2-core machine). Both give the same decisions on the timed reports
(checked; the equivalence over whole campaigns is tests/hpo/test_stopper_equivalence.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

import numpy as np

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from hpo.stoppers import AshaStopper, MedianStopper, ParetoAshaStopper, Stopper  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MEDIAN_EPOCH = 5
ANCHOR_BUDGET_S = 5.0  # stop repeating the anchor once a row has spent this long on it
PARETO_FULL_ONLY = 5000  # pareto-asha's anchor above this many trials only with --full


def reference_module() -> ModuleType:
    """``tests/hpo/reference_stoppers.py`` (the tests are no package)."""
    path = ROOT / "tests" / "hpo" / "reference_stoppers.py"
    spec = importlib.util.spec_from_file_location("reference_stoppers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Row:
    stopper: str
    size: int
    fill_us: float  # ours: mean seconds per report while filling, in microseconds
    ours_s: float
    anchor_s: float | None  # None: not run
    anchor_repeats: int
    same: bool


def values_for(kind: str, count: int, rng: np.random.Generator) -> list:
    """``count`` values a rung of ``kind`` holds: losses, or (loss, seconds) pairs."""
    losses = rng.uniform(0.05, 1.0, count).round(6)
    if kind != "pareto-asha":
        return [float(v) for v in losses]
    seconds = rng.uniform(10.0, 100.0, count).round(3)
    return [(float(a), float(b)) for a, b in zip(losses, seconds)]


def fill(kind: str, stopper: Stopper, values: list) -> float:
    """Report ``values`` to ``stopper`` (trial i the i-th value); mean seconds per report."""
    epoch = MEDIAN_EPOCH if kind == "median" else 1
    start = time.perf_counter()
    for trial, value in enumerate(values):
        stopper.report(trial, epoch, value)
    return (time.perf_counter() - start) / max(len(values), 1)


def preload(kind: str, anchor: Stopper, values: list) -> None:
    """Write ``values`` into the anchor's rung (or epoch) as its reports would have."""
    held = dict(enumerate(values))
    if kind == "median":
        anchor.at_epoch[MEDIAN_EPOCH] = held
    else:
        anchor.rungs.values = [held]
        anchor.rungs.last_epoch = dict.fromkeys(held, 1)


def time_decisions(stopper: Stopper, reports: list[tuple[int, int, object]],
                   budget_s: float) -> tuple[list[float], list[bool]]:
    """Each report timed alone, until the reports or ``budget_s`` run out (at least one)."""
    times, stops, spent = [], [], 0.0
    for trial, epoch, value in reports:
        start = time.perf_counter()
        stops.append(stopper.report(trial, epoch, value))
        times.append(time.perf_counter() - start)
        spent += times[-1]
        if spent > budget_s:
            break
    return times, stops


def measure(kind: str, size: int, repeats: int, run_anchor: bool, seed: int, ref: ModuleType) -> Row:
    ours_class: dict[str, Callable[[], Stopper]] = {
        "asha": lambda: AshaStopper(1, 3), "median": lambda: MedianStopper(1, 3),
        "pareto-asha": lambda: ParetoAshaStopper(1, 3)}
    anchor_class: dict[str, Callable[[], Stopper]] = {
        "asha": lambda: ref.ReferenceAshaStopper(1, 3), "median": lambda: ref.ReferenceMedianStopper(1, 3),
        "pareto-asha": lambda: ref.ReferenceParetoAshaStopper(1, 3)}
    rng = np.random.default_rng(seed)
    held, new = values_for(kind, size, rng), values_for(kind, repeats, rng)
    epoch = MEDIAN_EPOCH if kind == "median" else 1
    reports = [(size + i, epoch, value) for i, value in enumerate(new)]
    ours = ours_class[kind]()
    fill_s = fill(kind, ours, held)
    ours_times, ours_stops = time_decisions(ours, reports, budget_s=float("inf"))
    anchor_s, anchor_repeats, same = None, 0, True
    if run_anchor:
        anchor = anchor_class[kind]()
        preload(kind, anchor, held)
        anchor_times, anchor_stops = time_decisions(anchor, reports, ANCHOR_BUDGET_S)
        anchor_s, anchor_repeats = statistics.median(anchor_times), len(anchor_times)
        same = anchor_stops == ours_stops[:len(anchor_stops)]
    return Row(kind, size, 1e6 * fill_s, statistics.median(ours_times), anchor_s, anchor_repeats, same)


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{1e6 * value:.1f} us" if value < 1e-3 else f"{1e3 * value:.2f} ms" if value < 1 else f"{value:.2f} s"


def print_table(rows: list[Row], repeats: int) -> None:
    print(f"one decision (a new trial reporting at a rung holding n values), median over repeats; ours: {repeats} "
          f"repeats; reference: up to {repeats} within ~{ANCHOR_BUDGET_S:.0f} s")
    header = f"{'stopper':<12} | {'n':>8} | {'ours':>10} | {'reference (O(n))':>16} | {'ref. repeats':>12} | " \
             f"{'speed-up':>10} | {'ours fill/report':>16} | same decisions"
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = f"{r.anchor_s / r.ours_s:,.0f}x" if r.anchor_s is not None else "-"
        note = "yes" if r.anchor_s is not None and r.same else "NO" if r.anchor_s is not None else "(--full)"
        print(f"{r.stopper:<12} | {r.size:>8,} | {seconds(r.ours_s):>10} | {seconds(r.anchor_s):>16} | "
              f"{r.anchor_repeats or '-':>12} | {ratio:>10} | {r.fill_us:>13.1f} us | {note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[65536, 500000],
                        help="values at the rung / epoch for asha and median")
    parser.add_argument("--pareto-sizes", type=int, nargs="+", default=[1000, 10000],
                        help="trials at the rung for pareto-asha")
    parser.add_argument("--repeats", type=int, default=101, help="timed decisions per row (ours)")
    parser.add_argument("--full", action="store_true",
                        help=f"also time pareto-asha's reference above {PARETO_FULL_ONLY:,} trials (minutes)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ref = reference_module()
    start = time.perf_counter()
    rows = []
    for kind, sizes in (("asha", args.sizes), ("median", args.sizes), ("pareto-asha", args.pareto_sizes)):
        for size in sizes:
            run_anchor = args.full or kind != "pareto-asha" or size <= PARETO_FULL_ONLY
            rows.append(measure(kind, size, args.repeats, run_anchor, args.seed, ref))
            print(f"  {kind} n={size:,} done ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    print_table(rows, args.repeats)
    print(f"\nbench wall time {time.perf_counter() - start:.0f} s")
    return 0 if all(r.same for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
