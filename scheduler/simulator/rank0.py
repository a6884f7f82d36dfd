"""Rank 0's own time in the simulator: what each journal event of the campaign loop's decisions
costs rank 0's thread, as measured by ``bench/rank0_handlers.py`` (the runtime's real handlers,
journal and pickled messages), charged on the virtual clock.

Error model (stated, from the measurement): rank 0 is one server. The events a step's decisions
imply (:meth:`scheduler.loop.CampaignLoop.take_events`) cost it their measured seconds after that
step; whatever the agents report meanwhile (an epoch, an exit) waits until rank 0 is free, and is
then handled in one batch, as the runtime's turn receives every queued message at once. A trial's
slots stay held until rank 0 has handled its exit; its processes' own times are kept. The starts of
a step leave when it begins (the runtime sends them in batches of 512 as they are placed). The
per-event costs are medians on the measuring machine at the nearest measured machine size; their
run-to-run spread on a shared 2-core machine is about 2x. A start is charged a first-wave start
(its candidate and a spare sized, placed, journaled, sent) and an end what the measured end and
next start cost beyond that (never less than 0): a steady-state trial is charged at least its
measured end + start, up to 1.6x more at 1,024 slots where a first-wave start costs more than a
steady-state end and start together.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hpo.events import JournalEvent, TrialEnded, TrialProgress, TrialStarted

#: the measurement shipped with the project (bench/rank0_handlers.py --out)
MEASURED = Path(__file__).resolve().parents[2] / "bench" / "data" / "rank0_costs.json"


@dataclass(frozen=True)
class Rank0Costs:
    """Seconds of rank 0's thread per event: a start (its candidate suggested and sized, placed,
    journaled, its messages pickled), an epoch report (handler, stopper, re-estimate, journal), a
    trial's end (handler, journal, the optimizer told)."""

    start_s: float
    epoch_report_s: float
    end_s: float
    source: str = ""

    def of(self, events: list[JournalEvent]) -> float:
        """Rank 0's seconds for one step's events."""
        total = 0.0
        for event in events:
            if isinstance(event, TrialProgress):
                total += self.epoch_report_s
            elif isinstance(event, TrialStarted):
                total += self.start_s
            elif isinstance(event, TrialEnded):
                total += self.end_s
        return total

    @classmethod
    def read(cls, path: Path, slots: int) -> "Rank0Costs":
        """The row of a ``bench/rank0_handlers.py --out`` file measured nearest ``slots`` (in log
        scale); ValueError naming the file when it is not one."""
        try:
            rows = json.loads(Path(path).read_text())["rows"]
            row = min(rows, key=lambda r: abs(math.log(r["slots"]) - math.log(max(1, slots))))
            start = float(row["first_wave_per_start_s"])
            return cls(start, float(row["epoch_report_s"]), max(0.0, float(row["end_and_start_s"]) - start),
                       f"{path} (measured at {row['slots']:,} slots)")
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"{path}: not a rank 0 cost measurement (bench/rank0_handlers.py --out): {exc}") from None


@dataclass
class Rank0Clock:
    """When rank 0 is free again, and how long the agents' reports waited for it."""

    costs: Rank0Costs
    free_at: float = 0.0
    busy_s: float = 0.0
    lags: list[float] = field(default_factory=list)

    def charge(self, events: list[JournalEvent], now: float) -> None:
        """Rank 0 handles ``events`` from ``now`` (or when it is free, if later)."""
        cost = self.costs.of(events)
        if cost > 0:
            self.free_at = max(self.free_at, now) + cost
            self.busy_s += cost

    def waited(self, arrived: float, handled: float) -> None:
        self.lags.append(handled - arrived)

    def summary(self, makespan_s: float) -> dict:
        """sim.json's ``rank0``: busy share of the campaign, the reports' waits, the costs' source."""
        lags = np.asarray(self.lags) if self.lags else np.zeros(1)
        return {"charged": True, "busy_fraction": self.busy_s / makespan_s if makespan_s > 0 else 0.0,
                "lag_s": {"mean": float(lags.mean()), "p99": float(np.quantile(lags, 0.99)), "max": float(lags.max())},
                "costs": {"start_s": self.costs.start_s, "epoch_report_s": self.costs.epoch_report_s,
                          "end_s": self.costs.end_s, "source": self.costs.source}}
