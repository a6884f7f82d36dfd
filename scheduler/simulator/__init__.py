"""Discrete-event simulator of HPO campaigns on large clusters (real pool, policies, cost model)."""

from scheduler.simulator.engine import SimConfig, SimState, SimulationError, simulate
from scheduler.simulator.results import SIM_JSON_KEYS, SimResult, SimAttempt
from scheduler.simulator.workload import (
    SimTrial,
    WorkloadError,
    generate_workload,
    make_cost_model,
    replay_workload,
    sample_features,
)

__all__ = [
    "SIM_JSON_KEYS", "SimConfig", "SimResult", "SimState", "SimTrial", "SimulationError", "SimAttempt",
    "WorkloadError", "generate_workload", "make_cost_model", "replay_workload", "sample_features", "simulate",
]
