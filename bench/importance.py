"""Hyperparameter importance on a large campaign: our estimate with its spread
(:func:`hpo.importance.campaign_importances`, PED-ANOVA on all trials plus 10 half-samples, for the
objective and the cost) against Optuna's fANOVA evaluator (the default before Optuna 5) and one plain PED-ANOVA call
on the same trials, in one run, one core.

    .venv/bin/python -m bench.importance [--trials 8000] [--repeats 3] [--fanova-trials 1000]

The campaign is synthetic (the test's generator in ``tests/hpo/test_optuna_study.py`` at scale: the
objective depends on the learning rate strongly, on hidden_dim weakly, on nothing else; the cost on
hidden_dim). fANOVA is timed on ``--fanova-trials`` (it needs minutes at 8,000). Printed: medians
of the wall times and the ratio; goal: ours <= 5 s at 8,000 trials.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

SPACE = {
    "NeuralNetwork.Architecture.mpnn_type": {"type": "categorical", "choices": ["GIN", "PNA", "SchNet"]},
    "NeuralNetwork.Architecture.hidden_dim": {"type": "int", "low": 16, "high": 128, "step": 16},
    "NeuralNetwork.Architecture.num_conv_layers": {"type": "int", "low": 1, "high": 6},
    "NeuralNetwork.Training.Optimizer.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
}


def campaign(n: int, seed: int = 0):
    """A finished campaign of ``n`` trials as a CampaignState (see the module docstring)."""
    from hpo.state import CampaignState

    rng = random.Random(seed)
    events = [{"event": "campaign_started", "time": 0.0, "campaign": {"search_space": SPACE},
               "resume": False, "ranks": 2, "slots": 1}]
    t = 0.0
    for i in range(n):
        p = {"NeuralNetwork.Architecture.mpnn_type": rng.choice(["GIN", "PNA", "SchNet"]),
             "NeuralNetwork.Architecture.hidden_dim": 16 * rng.randint(1, 8),
             "NeuralNetwork.Architecture.num_conv_layers": rng.randint(1, 6),
             "NeuralNetwork.Training.Optimizer.learning_rate": 10 ** rng.uniform(-4, -2)}
        lr = p["NeuralNetwork.Training.Optimizer.learning_rate"]
        loss = (math.log10(lr) + 3.0) ** 2 + 0.02 * p["NeuralNetwork.Architecture.hidden_dim"] / 16 + rng.gauss(0, 0.02)
        wall = 2.0 * p["NeuralNetwork.Architecture.hidden_dim"] + rng.uniform(0, 5)
        result = {"status": "completed", "objective": loss, "wall_time_s": wall, "heads": {}}
        events += [{"event": "trial_suggested", "time": t, "trial_id": i, "params": p, "attempt": 0},
                   {"event": "trial_started", "time": t, "trial_id": i, "attempt": 0, "slots": [0],
                    "hosts": ["n0"], "size": 1},
                   {"event": "trial_finished", "time": t + wall, "trial_id": i, "attempt": 0, "result": result}]
        t += wall
    return CampaignState.replay(events)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fanova-trials", type=int, default=1000)
    args = parser.parse_args(argv)
    import optuna
    import torch

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from hpo.importance import campaign_importances, format_importances
    from hpo.optuna_study import frozen_trials, study_from_state
    from hpo.space import SearchSpace

    space = SearchSpace.from_dict(SPACE)
    state = campaign(args.trials)
    small = campaign(args.fanova_trials, seed=1)
    ours = [_timed(lambda: campaign_importances(state, space)) for _ in range(args.repeats)]

    def plain_ped_anova() -> None:
        study = optuna.create_study()
        study.add_trials(frozen_trials(state, space))
        optuna.importance.get_param_importances(study, evaluator=optuna.importance.PedAnovaImportanceEvaluator())

    ped = [_timed(plain_ped_anova) for _ in range(args.repeats)]
    fanova_study = study_from_state(small, space)
    fanova = [_timed(lambda: optuna.importance.get_param_importances(
        fanova_study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0))) for _ in range(args.repeats)]
    print(format_importances(campaign_importances(state, space), short=lambda k: k.rsplit(".", 1)[1]))
    ours_s, ped_s, fan_s = statistics.median(ours), statistics.median(ped), statistics.median(fanova)
    print(f"\n{args.trials} trials, median of {args.repeats}:")
    print(f"  ours (PED-ANOVA on all + 10 half-samples, objective and cost): {ours_s:.2f} s  (goal <= 5 s)")
    print(f"  one plain PED-ANOVA call (objective only, study build included): {ped_s:.2f} s")
    print(f"  Optuna's fANOVA on {args.fanova_trials} trials: {fan_s:.2f} s "
          f"(ours at {args.trials} trials is {fan_s / ours_s:.1f}x faster than fANOVA at {args.fanova_trials})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
