"""What a simulation measured, and ``sim.json``.

sim.json keys (:data:`SIM_JSON_KEYS`, in this order):

- ``policy``, ``nodes``, ``gpus_per_node``, ``slots``, ``trials``, ``seed``, ``estimate_error``: the run;
- ``utilisation`` (U): per finished trial, the slot-time its attempts held counted up to the work
  it needed at its sized width for the epochs it trained (start-up paid again by a move and the
  efficiency lost running wider are not useful work), summed / (slots x makespan);
  ``occupied_utilisation``: slot-time held by completed attempts / (slots x makespan) (higher when
  trials ran wider, at a parallel-efficiency cost); ``moldable_work_inflation``: held / needed;
- ``makespan_s``; ``lower_bound_s`` = max(needed work / slots, the longest trial at the widest
  size it may run at); ``makespan_over_lb``; ``useful_slot_s``; ``longest_trial_s`` (first start
  to end of the trial that took longest);
- ``decision_latency_ms`` {p50, p99, max, calls}: wall clock of every ``schedule()`` call;
  ``decision_cpu_ms`` {p50, p99, max}: CPU time of the same calls;
- ``wait_s`` {mean, max}: submission to first start;
- ``failed_slot_s``, ``failed_attempts``; ``drained_nodes``: nodes :class:`NodeHealth` took out;
- ``cost_model_error`` {count, median_abs_log, p90_abs_log}: the cost model's own error on the
  finished trials; ``sub_node_fraction``; ``max_pending``; ``repriced_trials``: waiting trials
  sized again after the cost model learnt (their prediction changed); ``sim_wall_s``;
- ``early_stopping`` (the stopper, or ``none``), ``stopped_trials``; for trials with learning curves
  ``best_objective`` (the best value any trial reached) and ``time_to_best_s`` (when it was found);
  ``utilisation_until_last_start``: held slot-time / (slots x the last start): the utilisation while
  trials were still waiting, without the tail of the last (with discarding: the promoted) trials;
- ``gpu_sharing`` {mode, and when on: per_gpu, device_memory_gb, utilisation_budget, curve,
  curve_source, shared_attempts}: several trials per GPU
  (:mod:`scheduler.sharing`). With it, each resident of a shared GPU counts its slot-time in full in
  the utilisations (which may then exceed 1) and the lower bound ignores sharing: compare makespans;
- ``rank0`` {charged, and when charged: busy_fraction, lag_s {mean, p99, max}, costs}: rank 0's own
  time per event (:mod:`scheduler.simulator.rank0`, its error model there), how busy it was and how
  long the agents' reports waited for it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hpo.state import CampaignState

SIM_JSON_KEYS = (
    "policy", "nodes", "gpus_per_node", "slots", "trials", "seed", "estimate_error", "utilisation",
    "occupied_utilisation", "moldable_work_inflation", "makespan_s", "lower_bound_s", "makespan_over_lb", "useful_slot_s", "longest_trial_s",
    "decision_latency_ms", "decision_cpu_ms", "wait_s", "failed_slot_s", "failed_attempts", "drained_nodes",
    "cost_model_error", "sub_node_fraction", "max_pending", "repriced_trials", "sim_wall_s",
    "early_stopping", "stopped_trials", "best_objective", "time_to_best_s", "utilisation_until_last_start",
    "gpu_sharing", "rank0",
)


def is_sim_json(path: Path) -> bool:
    """True for a sim.json :meth:`SimResult.write_json` wrote (its first keys), which may be replaced."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and list(data)[:3] == list(SIM_JSON_KEYS[:3])


@dataclass(frozen=True)
class SimAttempt:
    """One attempt of a trial: requested size, slots held, times, outcome."""

    trial_id: int
    attempt: int
    slots: int  # requested (useful) slots
    held: tuple[int, ...]  # slots it occupied (a fixed block may be larger)
    submit: float
    start: float
    end: float
    ok: bool
    objective: float | None = None  # the best value of its learning curve it reached (curves only)
    stopped: bool = False  # ended early by the stopper
    epochs: int | None = None  # epochs the trial had trained when it ended (None: it failed)
    moved: bool = False  # it checkpointed and went on on more slots (the next attempt continues it)
    needed_slot_s: float = 0.0  # the work those epochs need at the trial's sized width


@dataclass
class SimResult:
    """Figures of one simulated campaign (``to_dict`` is sim.json) plus its attempts for plots."""

    summary: dict[str, Any]
    records: list[SimAttempt] = field(repr=False, default_factory=list)
    total_slots: int = 0
    slots_per_node: int = 8
    state: CampaignState | None = field(repr=False, default=None)  # the simulated campaign's, from its journal events

    def to_dict(self) -> dict[str, Any]:
        return dict(self.summary)

    def write_json(self, path: str | Path) -> None:
        """Write sim.json atomically (temp file + rename)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False))
        os.replace(tmp, path)


def _q(values: list[float], q: float) -> float | None:
    return float(np.quantile(values, q)) if values else None


def _discarding(records: list[SimAttempt], config) -> dict[str, Any]:
    """Early-discarding figures: trials stopped, the best objective reached and when it was found."""
    scored = [r for r in records if r.ok and r.objective is not None]
    best = min(scored, key=lambda r: (r.objective, r.end), default=None)
    last_start = max((r.start for r in records), default=0.0)
    slots = getattr(config, "nodes", 0) * getattr(config, "gpus_per_node", 0)
    busy = sum(len(r.held) * (min(r.end, last_start) - r.start) for r in records if r.start < last_start)
    return {"early_stopping": config.early_stopping, "stopped_trials": sum(r.stopped for r in records),
            "best_objective": None if best is None else best.objective,
            "time_to_best_s": None if best is None else best.end,
            "utilisation_until_last_start": busy / (slots * last_start) if last_start > 0 and slots else None}


def _sharing(config, shared_attempts: int) -> dict[str, Any]:
    """Co-location: the rule, the curve it was charged by, and how many attempts shared a GPU."""
    sharing, curve = getattr(config, "gpu_sharing", None), getattr(config, "colocation", None)
    if sharing is None or not sharing.enabled:
        return {"mode": "off", "shared_attempts": 0}
    return {"mode": sharing.mode.value, "per_gpu": sharing.per_gpu, "device_memory_gb": sharing.device_memory_gb,
            "utilisation_budget": sharing.utilisation_budget,
            "curve": {str(k): v for k, v in sorted(curve.aggregate.items())}, "curve_source": curve.source,
            "shared_attempts": shared_attempts}


def _finished_chains(records: list[SimAttempt]) -> tuple[dict[int, float], dict[int, float], dict[int, SimAttempt]]:
    """Per trial: slot-time of its attempts that did not fail, the start of the attempts that
    finished it (after its last failure), and its final attempt."""
    held: dict[int, float] = {}
    chain_start: dict[int, float] = {}
    final: dict[int, SimAttempt] = {}
    for r in records:
        if not r.ok:
            chain_start.pop(r.trial_id, None)
            continue
        held[r.trial_id] = held.get(r.trial_id, 0.0) + r.slots * (r.end - r.start)
        chain_start.setdefault(r.trial_id, r.start)
        if not r.moved:
            final[r.trial_id] = r
    return held, chain_start, final


def summarise(trials, records: list[SimAttempt], latencies: list[float], cpu_times: list[float], config, policy_name: str,
              pool, drained: list, model, max_pending: int, wall_s: float, repriced: int = 0,
              shared_attempts: int = 0) -> SimResult:
    """Compute U, makespan / LB, latencies, waits and failures from the attempts (their campaign
    state's, :func:`scheduler.simulator.record.sim_attempts`) and the nodes ``drained`` (its
    ``node_drained`` events)."""
    slots = pool.total_slots
    done = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    makespan = max((r.end for r in records), default=0.0)
    useful = float(sum(r.slots * (r.end - r.start) for r in done))
    by_id = {t.trial_id: t for t in trials}
    held, chain_start, final = _finished_chains(records)
    # the work the finished trials needed at the width the sizer chose for the epochs they trained (a
    # trial run wider pays a parallel-efficiency loss, a moved one its start-up again: held, not useful)
    sized_work = float(sum(r.needed_slot_s for r in final.values()))
    counted = float(sum(min(held[tid], r.needed_slot_s) for tid, r in final.items()))
    longest = max((r.end - chain_start[tid] for tid, r in final.items()), default=0.0)
    shortest = max((by_id[tid].shortest_s(r.epochs or 0) for tid, r in final.items()), default=0.0)
    lb = max(sized_work / slots, shortest)
    first_start: dict[int, float] = {}
    for r in records:
        first_start.setdefault(r.trial_id, r.start)
    waits = [first_start[r.trial_id] - r.submit for r in records if r.attempt == 1]
    lat_ms = [1000.0 * x for x in latencies]
    cpu_ms = [1000.0 * x for x in cpu_times]
    err = model.prediction_error()
    summary = {
        "policy": policy_name, "nodes": pool.num_nodes, "gpus_per_node": pool.slots_per_node,
        "slots": slots, "trials": len(trials), "seed": config.seed, "estimate_error": config.estimate_error,
        "utilisation": counted / (slots * makespan) if makespan > 0 else 0.0,
        "occupied_utilisation": useful / (slots * makespan) if makespan > 0 else 0.0,
        "moldable_work_inflation": useful / sized_work if sized_work > 0 else None,
        "makespan_s": makespan, "lower_bound_s": lb,
        "makespan_over_lb": makespan / lb if lb > 0 else None,
        "useful_slot_s": useful, "longest_trial_s": longest,
        "decision_latency_ms": {"p50": _q(lat_ms, 0.5), "p99": _q(lat_ms, 0.99),
                                "max": max(lat_ms, default=None), "calls": len(lat_ms)},
        "decision_cpu_ms": {"p50": _q(cpu_ms, 0.5), "p99": _q(cpu_ms, 0.99), "max": max(cpu_ms, default=None)},
        "wait_s": {"mean": float(np.mean(waits)) if waits else None, "max": max(waits, default=None)},
        "failed_slot_s": float(sum(len(r.held) * (r.end - r.start) for r in failed)),
        "failed_attempts": len(failed),
        "drained_nodes": [{"node": d.node, "hostname": d.hostname, "failures": d.failures, "last_reason": d.reason}
                          for d in drained],
        "cost_model_error": {"count": err.count, "median_abs_log": err.median, "p90_abs_log": err.p90},
        "sub_node_fraction": float(np.mean([t.slots <= pool.slots_per_node for t in trials])),
        "max_pending": max_pending, "repriced_trials": repriced, "sim_wall_s": wall_s,
        **_discarding(records, config),
        "gpu_sharing": _sharing(config, shared_attempts),
    }
    summary["rank0"] = {"charged": False}  # the engine's Rank0Clock fills it in when rank 0's time is charged
    assert tuple(summary) == SIM_JSON_KEYS
    return SimResult(summary, records, slots, pool.slots_per_node)
