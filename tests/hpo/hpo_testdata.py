"""Shared test data of the hpo tests: a base HydraGNN config, a search space, a small journal."""

from __future__ import annotations


BASE_CONFIG = {
    "Verbosity": {"level": 2},
    "NeuralNetwork": {
        "Architecture": {
            "mpnn_type": "GIN",
            "hidden_dim": 64,
            "num_conv_layers": 3,
            "output_heads": {"graph": {"num_sharedlayers": 2, "dim_headlayers": [64, 64]}},
        },
        "Variables_of_interest": {"output_names": ["energy"], "type": ["graph"]},
        "Training": {"num_epoch": 10, "batch_size": 32, "Optimizer": {"learning_rate": 1e-3}},
    },
}

SPACE = {
    "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["GIN", "PNA", "SchNet"]},
    "NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 16, "high": 128, "step": 16},
    "NeuralNetwork.Architecture.num_conv_layers": {"type": "int", "low": 1, "high": 6},
    "NeuralNetwork.Training.Optimizer.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
}


def result(status: str, objective: float | None, wall: float = 10.0, reason: str | None = None) -> dict:
    """A result.json dict as the trainer writes it."""
    return {
        "status": status, "objective": objective, "heads": {}, "num_parameters": 1000, "epochs": 5,
        "best_epoch": 4, "wall_time_s": wall, "peak_memory_mb": 500.0, "slots": 1, "device": "cpu",
        "failure_reason": reason, "traceback": None, "log_tail": None, "checkpoint": None,
    }


def params(i: int) -> dict:
    return {
        "NeuralNetwork.Architecture.mpnn_type": ["GIN", "PNA", "SchNet"][i % 3],
        "NeuralNetwork.Architecture.hidden_dim": 16 * (1 + i % 8),
        "NeuralNetwork.Architecture.num_conv_layers": 1 + i % 6,
        "NeuralNetwork.Training.Optimizer.learning_rate": 1e-3 * (1 + i),
    }


def sample_events() -> list[dict]:
    """A campaign on 2 slots that crashed: trials 0-3 ended (completed, failed, completed best,
    diverged), trial 4 was running, trial 5 only suggested."""
    campaign = {"search_space": SPACE, "objective": "objective", "max_trials": 12}
    ev = [{"event": "campaign_started", "time": 1000.0, "campaign": campaign, "resume": False, "ranks": 3, "slots": 2}]
    for i in range(6):
        ev.append({"event": "trial_suggested", "time": 1000.0 + i * 0.01, "trial_id": i, "params": params(i), "attempt": 0})

    def started(i, t, slots, hosts=None):
        return {"event": "trial_started", "time": t, "trial_id": i, "attempt": 0, "slots": slots,
                "hosts": hosts or ["node0"] * len(slots), "size": len(slots)}

    ev += [
        started(0, 1001.0, [0]),
        started(1, 1001.0, [1]),
        {"event": "trial_finished", "time": 1011.0, "trial_id": 0, "attempt": 0, "result": result("completed", 0.5)},
        {"event": "trial_failed", "time": 1005.0, "trial_id": 1, "attempt": 0, "reason": "out of memory",
         "log_tail": "Killed", "result": result("failed", None, 4.0, "out of memory")},
        started(2, 1012.0, [0, 1]),
        {"event": "trial_finished", "time": 1032.0, "trial_id": 2, "attempt": 0, "result": result("completed", 0.25, 20.0)},
        started(3, 1033.0, [0]),
        started(4, 1033.0, [1]),
        {"event": "trial_finished", "time": 1038.0, "trial_id": 3, "attempt": 0,
         "result": result("diverged", None, 5.0, "loss is NaN at epoch 2")},
    ]
    return ev
