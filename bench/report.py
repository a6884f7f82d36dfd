"""The campaign report at scale: ``write_report`` (text, PNGs, importance, index.html) on a synthetic
finished campaign of ``--trials`` trials (the generator of ``bench/importance.py`` written as a
journal), timed per part, one core.

    .venv/bin/python -m bench.report [--trials 10000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def write_journal(directory: Path, trials: int) -> None:
    from bench.importance import SPACE, campaign
    from hpo.journal import Journal

    state = campaign(trials)
    with Journal(directory / "journal.jsonl") as journal:
        journal.append({"event": "campaign_started", "time": 0.0, "campaign": {"search_space": SPACE},
                        "resume": False, "ranks": 65, "slots": 64})
        for record in sorted(state.trials.values(), key=lambda r: r.trial_id):
            a = record.last_attempt
            slot = record.trial_id % 64
            start = a.start / 64  # spread over 64 slots
            journal.append({"event": "trial_suggested", "time": start, "trial_id": record.trial_id,
                            "params": record.params, "attempt": 0})
            journal.append({"event": "trial_started", "time": start, "trial_id": record.trial_id, "attempt": 0,
                            "slots": [slot], "hosts": [f"n{slot // 8}"], "size": 1})
            journal.append({"event": "trial_finished", "time": start + a.end - a.start, "trial_id": record.trial_id,
                            "attempt": 0, "result": a.result})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from hpo import report

    directory = args.workdir or Path(tempfile.mkdtemp(prefix="report_bench_"))
    directory.mkdir(parents=True, exist_ok=True)
    write_journal(directory, args.trials)
    parts: dict[str, float] = {}

    def timed(name, fn):
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - start
        return wrapper

    for name in ("_load_record", "plot_objective", "plot_gantt", "plot_curves", "_importances", "plot_importance"):
        setattr(report, name, timed(name, getattr(report, name)))
    start = time.perf_counter()
    files = report.write_report(directory)
    total = time.perf_counter() - start
    print(f"{args.trials} trials: write_report {total:.1f} s; index.html {files.html.stat().st_size / 1e6:.1f} MB")
    for name, seconds in parts.items():
        print(f"  {name:16s} {seconds:6.2f} s")
    print(f"  {'rest (text, html)':16s} {total - sum(parts.values()):6.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
