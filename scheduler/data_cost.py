"""What a trial pays for its data, measured: the cost model and the simulator charge it.

A trial opens its dataset and reads the dataset's facts at start (:mod:`graph_builders.store.facts`:
no sample is read, so this does not grow with the dataset), then each epoch reads and batches its
share of the graphs. ``bench/data_scale.py fit --write`` measures both on this machine's files
(streamed loader time per graph against stored bytes per graph, two datasets, least squares) into
``scheduler/data_cost.json``:

    start-up   open_s
    an epoch   graphs read x (per_graph_s + per_byte_s x stored bytes per graph)

The figures are from files in the page cache of one node; a parallel file system read cold adds
its own bandwidth, which this model does not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DATA_COST_FILE = Path(__file__).with_name("data_cost.json")


@dataclass(frozen=True)
class DataCost:
    """Measured data costs (see the module docstring); the defaults charge nothing."""

    open_s: float = 0.0
    per_graph_s: float = 0.0
    per_byte_s: float = 0.0
    source: str = "not measured"

    def epoch_s(self, graphs: float, bytes_per_graph: float) -> float:
        """Seconds one process spends reading and batching ``graphs`` graphs in an epoch."""
        return graphs * (self.per_graph_s + self.per_byte_s * bytes_per_graph)


def load_data_cost(path: Path = DATA_COST_FILE) -> DataCost:
    """The measured data costs; ValueError naming the file when a figure is missing or negative."""
    try:
        record = json.loads(path.read_text())
        cost = DataCost(float(record["open_s"]), float(record["per_graph_s"]), float(record["per_byte_s"]),
                        f"{record['measured_by']} on {record['date']}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a data cost record ({exc}); re-run bench/data_scale.py fit --write") from None
    if min(cost.open_s, cost.per_graph_s, cost.per_byte_s) < 0:
        raise ValueError(f"{path}: data costs must be >= 0, got {cost}")
    return cost
