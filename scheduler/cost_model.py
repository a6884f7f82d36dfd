"""Predicted cost of a HydraGNN trial: work (slot-seconds at one slot), memory per slot, and
duration on ``n`` slots; refined online from finished trials.

Analytic part: a FLOPs-like count per graph and conv layer for each ``mpnn_type``::

    flops = layers x (nodes x hidden^2 x dense + edges x hidden x message + edges x hidden^2 x edge_dense)

(``dense``: node MLPs, ``message``: per-edge messages, ``edge_dense``: per-edge MLPs/filters, see
:data:`MPNN_COSTS`), scaled per type so that at the ANCHORS configuration (64 atoms, 2,590 edges,
hidden 64, 3 layers, one CPU thread) the predicted training throughput is the measured one (GIN 1,208,
SchNet 121, EGNN 86, PNA 64, PaiNN 27 graphs/s). ``device_speedup`` converts to the target slot
(e.g. one GCD).

Online part: ridge regression of ``log(actual / analytic)`` on ``[1, one-hot(mpnn_type),
log(analytic work)]`` over every finished trial; predictions are ``analytic x exp(correction)``.
:meth:`CostModel.prediction_error` reports the median and p90 of ``|log(pred / actual)|`` where each
prediction was made before that trial was learnt from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
from hydragnn_ensemble.config import ConfigError, get_by_dotted_key

# (dense, message, edge_dense) per conv layer; measured graphs/s at the ANCHORS configuration
MPNN_COSTS: dict[str, tuple[float, float, float]] = {
    "GIN": (2.0, 1.0, 0.0),
    "SchNet": (2.0, 1.0, 1.0),
    "EGNN": (2.0, 1.0, 2.0),
    "PNA": (4.0, 4.0, 1.0),
    "PaiNN": (6.0, 6.0, 0.0),
    "GAT": (2.0, 2.0, 0.0),
    "CGCNN": (2.0, 2.0, 1.0),
}
ANCHOR_GRAPHS_PER_S: dict[str, float] = {"GIN": 1208.0, "SchNet": 121.0, "EGNN": 86.0, "PNA": 64.0,
                                         "PaiNN": 27.0, "GAT": 300.0, "CGCNN": 150.0}
ANCHOR_SHAPE = {"nodes": 64.0, "edges": 2590.0, "hidden": 64, "layers": 3}
EVAL_OVERHEAD = 1.25  # validation/test passes and data loading on top of the training epochs
BASE_MEMORY_GB = 0.5  # runtime, framework and CUDA/HIP context per process


class CostModelError(ValueError):
    """A trial configuration the cost model cannot read (names the key and value)."""


@dataclass(frozen=True)
class DatasetStats:
    """What the cost of a trial depends on in its dataset."""

    num_graphs: int
    mean_nodes: float
    mean_edges: float

    def __post_init__(self) -> None:
        if self.num_graphs < 1 or self.mean_nodes <= 0 or self.mean_edges < 0:
            raise ValueError(f"dataset statistics must be positive, got {self}")

    @classmethod
    def from_store(cls, path: str, sample: int = 64) -> "DatasetStats":
        """From an ADIOS2 graph store: training-set size and mean node/edge counts of up to
        ``sample`` evenly spaced training graphs."""
        from pathlib import Path

        if not Path(path).is_dir():  # ADIOS2 BP4/BP5 stores are directories; spare the torch import
            raise ValueError(f"{path}: not an ADIOS2 graph store (no such directory)")
        from graph_builders.store import GraphStore

        with GraphStore(path) as store:
            n = store.num_graphs("trainset")
            if n < 1:
                raise ValueError(f"{path}: empty trainset")
            idx = np.unique(np.linspace(0, n - 1, min(sample, n)).astype(int))
            graphs = [store.get("trainset", int(i)) for i in idx]
        return cls(n, float(np.mean([g.num_nodes for g in graphs])),
                   float(np.mean([g.edge_index.shape[1] for g in graphs])))


def _cost_model_name(mpnn_type: str) -> str:
    """The cost tables' spelling of a HydraGNN ``mpnn_type`` (HydraGNN writes ``PAINN`` for PaiNN);
    an unknown type is kept as it is (and refused by :class:`TrialFeatures`)."""
    return {name.lower(): name for name in MPNN_COSTS}.get(mpnn_type.lower(), mpnn_type)


@dataclass(frozen=True)
class TrialFeatures:
    """The hyperparameters that set a trial's cost."""

    mpnn_type: str
    hidden_dim: int
    num_conv_layers: int
    batch_size: int
    num_epoch: int
    heads: int = 1

    def __post_init__(self) -> None:
        if self.mpnn_type not in MPNN_COSTS:
            raise CostModelError(f"mpnn_type {self.mpnn_type!r} is not one of {sorted(MPNN_COSTS)}")
        for name in ("hidden_dim", "num_conv_layers", "batch_size", "num_epoch", "heads"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise CostModelError(f"{name} must be a positive integer, got {value!r}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "TrialFeatures":
        """From a HydraGNN config dict. A key the config leaves out takes the HydraGNN schema's
        default (what the trainer will use: ``num_epoch`` 100, ``batch_size`` 32), never one of
        this class; the architecture keys the schema requires must be there. ``heads`` is the number
        of ``Variables_of_interest.output_names`` (1 when a custom trial program's config names none)."""
        def value(key: str) -> Any:
            return get_by_dotted_key(config, key)

        try:
            try:
                names = value("NeuralNetwork.Variables_of_interest.output_names")
                if names is None:
                    names = value("NeuralNetwork.Variables_of_interest.output_index") or []
                heads = max(1, len(names))
            except ConfigError:
                heads = 1
            return cls(
                mpnn_type=_cost_model_name(str(value("NeuralNetwork.Architecture.mpnn_type"))),
                hidden_dim=int(value("NeuralNetwork.Architecture.hidden_dim")),
                num_conv_layers=int(value("NeuralNetwork.Architecture.num_conv_layers")),
                batch_size=int(value("NeuralNetwork.Training.batch_size")),
                num_epoch=int(value("NeuralNetwork.Training.num_epoch")),
                heads=heads,
            )
        except (ConfigError, TypeError, ValueError) as exc:
            if isinstance(exc, CostModelError):
                raise
            raise CostModelError(f"NeuralNetwork config: {exc}") from None


@dataclass(frozen=True)
class ParallelEfficiency:
    """Amdahl-like data-parallel efficiency ``e(n) = 1 / (1 + alpha (n - 1))``, with a larger
    ``alpha_inter`` once a trial spans nodes."""

    alpha: float = 0.002
    alpha_inter: float = 0.00005
    slots_per_node: int = 8

    def __call__(self, slots: int) -> float:
        if slots <= self.slots_per_node:
            return 1.0 / (1.0 + self.alpha * (slots - 1))
        intra = self.alpha * (self.slots_per_node - 1)
        return 1.0 / (1.0 + intra + self.alpha_inter * (slots - self.slots_per_node) + self.alpha)


@dataclass(frozen=True)
class ErrorSummary:
    """Prediction error of the model on the trials it has seen: ``|log(pred / actual)|``."""

    count: int
    median: float | None
    p90: float | None


@dataclass
class CostModel:
    """Predicts work (slot-seconds at one slot) and memory, learns from finished trials."""

    stats: DatasetStats
    device_speedup: float = 1.0
    efficiency: ParallelEfficiency = field(default_factory=ParallelEfficiency)
    ridge: float = 1.0
    _xtx: np.ndarray = field(default=None, init=False, repr=False)  # type: ignore[assignment]
    _xty: np.ndarray = field(default=None, init=False, repr=False)  # type: ignore[assignment]
    _y: list[float] = field(default_factory=list, init=False, repr=False)
    _errors: list[float] = field(default_factory=list, init=False, repr=False)
    _beta: np.ndarray | None = field(default=None, init=False, repr=False)

    _TYPES = tuple(sorted(MPNN_COSTS))

    # -- analytic --------------------------------------------------------------------------------
    @staticmethod
    def layer_flops(mpnn_type: str, hidden: int, nodes: float, edges: float) -> float:
        """FLOPs-like cost of one conv layer on one graph."""
        dense, message, edge_dense = MPNN_COSTS[mpnn_type]
        h = float(hidden)
        return nodes * h * h * dense + edges * h * message + edges * h * h * edge_dense

    @classmethod
    def seconds_per_graph_cpu(cls, f: TrialFeatures, nodes: float, edges: float) -> float:
        """Training time per graph on one CPU thread, calibrated to the ANCHORS throughputs."""
        a = ANCHOR_SHAPE
        anchor = a["layers"] * cls.layer_flops(f.mpnn_type, a["hidden"], a["nodes"], a["edges"])
        scale = (1.0 / ANCHOR_GRAPHS_PER_S[f.mpnn_type]) / anchor
        flops = f.num_conv_layers * cls.layer_flops(f.mpnn_type, f.hidden_dim, nodes, edges)
        head = f.heads * 2.0 * f.hidden_dim * f.hidden_dim  # per-graph MLP heads
        return scale * (flops + head)

    def analytic_work(self, f: TrialFeatures) -> float:
        """Slot-seconds of the whole trial on one slot, before the learnt correction."""
        per_graph = self.seconds_per_graph_cpu(f, self.stats.mean_nodes, self.stats.mean_edges)
        return f.num_epoch * self.stats.num_graphs * per_graph * EVAL_OVERHEAD / self.device_speedup

    def num_parameters(self, f: TrialFeatures) -> float:
        dense, message, edge_dense = MPNN_COSTS[f.mpnn_type]
        h = float(f.hidden_dim)
        return f.num_conv_layers * h * h * (dense + edge_dense + 0.5 * message) + f.heads * 2 * h * h

    def memory_per_slot_gb(self, f: TrialFeatures, slots: int = 1) -> float:
        """Peak memory of one process: weights + gradients + Adam state, plus the activations of its
        share (``ceil(batch_size / slots)``) of the global batch."""
        dense, message, edge_dense = MPNN_COSTS[f.mpnn_type]
        h = float(f.hidden_dim)
        n, e = self.stats.mean_nodes, self.stats.mean_edges
        act_per_graph = f.num_conv_layers * (n * h * (dense + 2) + e * h * (message + 2 * edge_dense)) * 8.0
        per_slot_batch = math.ceil(f.batch_size / slots)
        return BASE_MEMORY_GB + (16.0 * self.num_parameters(f) + per_slot_batch * act_per_graph) / 1e9

    # -- corrected predictions -----------------------------------------------------------------------
    def _features(self, f: TrialFeatures, analytic: float) -> np.ndarray:
        x = np.zeros(2 + len(self._TYPES))
        x[0] = 1.0
        x[1 + self._TYPES.index(f.mpnn_type)] = 1.0
        x[-1] = math.log(analytic)
        return x

    def _correction(self, x: np.ndarray) -> float:
        if not self._y:
            return 0.0
        if self._beta is None:
            n = len(self._y)
            mean_log = self._xtx[0, -1] / n
            t = np.eye(len(x))
            t[0, -1] = -mean_log  # centre log-work so the ridge does not fight the intercept
            a = t.T @ self._xtx @ t + self.ridge * np.eye(len(x))
            a[0, 0] -= self.ridge - 1e-9  # the intercept (global scale) is not shrunk
            beta = np.linalg.solve(a, t.T @ self._xty)
            self._beta = t @ beta
        return float(x @ self._beta)

    def predict_work(self, f: TrialFeatures) -> float:
        """Slot-seconds on one slot, corrected by what finished trials taught the model."""
        analytic = self.analytic_work(f)
        return analytic * math.exp(self._correction(self._features(f, analytic)))

    def predict_seconds(self, f: TrialFeatures, slots: int) -> float:
        """Wall time on ``slots`` slots (data parallel with :attr:`efficiency`)."""
        return self.predict_work(f) / (slots * self.efficiency(slots))

    def update(self, f: TrialFeatures, slots: int, wall_time_s: float) -> None:
        """Learn from a finished trial that took ``wall_time_s`` on ``slots`` slots."""
        if wall_time_s <= 0 or not math.isfinite(wall_time_s):
            raise ValueError(f"wall time must be positive and finite, got {wall_time_s}")
        predicted = self.predict_seconds(f, slots)
        self._errors.append(abs(math.log(predicted / wall_time_s)))
        analytic = self.analytic_work(f)
        observed_work = wall_time_s * slots * self.efficiency(slots)
        x = self._features(f, analytic)
        y = math.log(observed_work / analytic)
        self._xtx = self._xtx + np.outer(x, x) if self._y else np.outer(x, x)
        self._xty = self._xty + x * y if self._y else x * y
        self._y.append(y)
        self._beta = None

    @property
    def observations(self) -> int:
        return len(self._y)

    def prediction_error(self) -> ErrorSummary:
        """Median and p90 of ``|log(pred / actual)|`` over the trials learnt from so far."""
        if not self._errors:
            return ErrorSummary(0, None, None)
        err = np.asarray(self._errors)
        return ErrorSummary(len(err), float(np.median(err)), float(np.quantile(err, 0.9)))
