"""A user's campaign file on a simulated allocation: what ``N`` nodes for ``T`` hours will give.

``simulate CAMPAIGN.yaml --nodes N --hours T`` runs the campaign's own search (its optimizer on its
search space, ``max_trials``, its stopper and rungs, its time limits, ``max_time_s`` cut at the
allocation, its slots per node and trial sizes, its placement) on the simulator's virtual clock,
with each suggested configuration costed by the runtime's cost model on the campaign's dataset (its
facts: graphs, nodes, edges, bytes; the trainer's measured per-layer rates; the measured data cost)
or, with ``--learn-from``, by a cost model that first learnt from the epochs a finished campaign on
this machine reported. A trial's true time scatters lognormally around its prediction
(``estimate_error``); its learning curve is synthetic (the stopper sees noisy decreasing curves:
which trials stop is the stopper's rule, not the real models' accuracy).

:class:`CampaignPlan` is the answer a user acts on: trials that finish within the allocation and how
they ended, their sizes, how busy the slots are, the makespan against the allocation, how many train
their whole budget, and when the best one finishes.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from hydragnn_ensemble.result import TrialStatus
from scheduler.budget_check import check_budgets
from scheduler.cost_anchors import load_anchors
from scheduler.cost_model import STARTUP_PRIOR_S, CostModel, CostModelError, EpochTimes, TrialFeatures
from scheduler.data_cost import load_data_cost
from scheduler.dataset_stats import DatasetStats
from scheduler.efficiency import ParallelEfficiency
from scheduler.simulator.trial_state import TrialStateCosts
from scheduler.simulator.engine import SimConfig, simulate
from scheduler.simulator.results import SimResult
from scheduler.simulator.search import OptimizerSource
from scheduler.simulator.workload import GCD_SPEEDUP, SimTrial, learning_curve
from scheduler.sizing import Sizer, slot_memory_gb


class CampaignPlanError(ValueError):
    """The campaign file cannot be planned (names the key and why)."""


@dataclass(frozen=True)
class CampaignPlan:
    """What the allocation gives (see the module docstring)."""

    nodes: int
    hours: float
    finished: int  # trials that ended within the allocation
    statuses: dict[str, int]
    completed: int  # trained their whole epoch budget
    sizes: dict[int, int]  # slots -> trials started at that size
    utilisation: float
    makespan_h: float
    best_objective: float | None
    best_at_h: float | None  # when the best trial finished
    device_note: str
    budget_warning: str | None = None  # configurations that cannot train their minimum epochs in time

    def lines(self) -> list[str]:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items())) or "none"
        sizes = ", ".join(f"{n} x {s} slot{'s' if s > 1 else ''}" for s, n in sorted(self.sizes.items()))
        best = "-" if self.best_objective is None else \
            f"{self.best_objective:.4g} (synthetic curve), finished after {self.best_at_h:.2f} h"
        return [f"plan for {self.nodes} node(s) x {self.hours:g} h: {self.finished} trials finish ({counts})",
                f"  {self.completed} train their whole epoch budget; sizes started: {sizes or 'none'}",
                f"  slots busy {100 * self.utilisation:.1f}% of the campaign; it ends after {self.makespan_h:.2f} h "
                f"of the {self.hours:g} h allocation",
                f"  best trial: {best}",
                f"  {self.device_note}"] + ([f"  warning: {self.budget_warning}"] if self.budget_warning else [])


def _check_plan(campaign: Path, trial_program: str, nodes: int, hours: float) -> None:
    """A plan needs the built-in trainer (the cost model knows its layers) and an allocation."""
    from hpo.campaign import BUILTIN_TRIAL_PROGRAM

    if trial_program != BUILTIN_TRIAL_PROGRAM:
        raise CampaignPlanError(f"{campaign}: trial_program {trial_program!r}: the cost model knows the built-in "
                                "trainer's layers only; a custom program's trials cannot be costed")
    if nodes < 1 or not hours > 0:
        raise CampaignPlanError(f"--nodes must be >= 1 and --hours > 0, got {nodes} and {hours}")


def _sim_config(checked, nodes: int, graphs: int, allocation_s: float, sharing, seed: int,
                estimate_error: float) -> SimConfig:
    """The simulation of a checked campaign (:class:`scheduler.campaign_file.CheckedCampaign`) on
    ``nodes`` nodes for ``allocation_s`` seconds: its own placement, stopper, limits and sharing."""
    cfg = checked.config
    return SimConfig(nodes=nodes, gpus_per_node=cfg.resources.slots_per_node, graphs=graphs, policy=cfg.placement,
                     node_group_size=min(32, nodes), early_stopping=cfg.early_stopping.method,
                     early_stopping_options=cfg.early_stopping.options,
                     verdict_wait=cfg.early_stopping.verdict_wait_s > 0, retries=cfg.retries,
                     failure_threshold=cfg.failure_threshold, prefetch_below_s=cfg.prefetch_below_s,
                     max_time_s=min(cfg.max_time_s or math.inf, allocation_s), fill_tail=cfg.fill_tail,
                     max_trials=cfg.max_trials, seed=seed, estimate_error=estimate_error, gpu_sharing=sharing,
                     colocation=checked.curve if sharing.enabled else None, malleable=cfg.moves_trials,
                     trial_state=TrialStateCosts.measured())


def plan_campaign(campaign: Path, nodes: int, hours: float, *, dataset: Path | None = None,
                  learn_from: Path | None = None, estimate_error: float = 0.5, seed: int = 0,
                  progress: bool = False) -> tuple[SimResult, CampaignPlan]:
    """Simulate ``campaign`` on ``nodes`` nodes for ``hours`` hours (module docstring)."""
    from hpo.optimizers import make_optimizer
    from hpo.space import apply_params
    from scheduler.campaign_file import load_checked_campaign

    checked = load_checked_campaign(campaign, None if dataset is None else {"dataset": str(Path(dataset).resolve())})
    cfg = checked.config
    _check_plan(campaign, cfg.trial_program, nodes, hours)
    if cfg.pbt is not None:  # its exploits need real learning curves and training states
        raise CampaignPlanError(f"{campaign}: optimizer 'pbt': the simulator does not model population-based "
                                "training (its trials exploit each other's training states); plan it as "
                                "optimizer 'random' with the same max_trials for its cost")
    res = cfg.resources
    spn = res.slots_per_node
    try:
        stats = DatasetStats.from_store(str(cfg.dataset))
    except (OSError, ValueError) as exc:
        raise CampaignPlanError(f"{campaign}: dataset: {exc}") from None
    speedup, note = (GCD_SPEEDUP, f"device: gpu, its rates assumed {GCD_SPEEDUP:g}x one CPU thread (no GPU "
                     "measured yet)") if res.device == "gpu" else (1.0, "device: cpu, the trainer's measured rates")
    model = CostModel(stats, device_speedup=speedup, efficiency=ParallelEfficiency(slots_per_node=spn),
                      anchors=load_anchors(), startup_prior_s=STARTUP_PRIOR_S, data=load_data_cost())
    if learn_from is not None:
        taught = learn_campaign(model, learn_from)
        note += f"; the cost model learnt from {taught} attempt(s) of {learn_from}"
    sizes = sorted({s for s in res.slots_per_trial if (s <= spn or s % spn == 0) and s <= nodes * spn})
    if not sizes:
        raise CampaignPlanError(f"{campaign}: resources.slots_per_trial {res.slots_per_trial}: none fits "
                                f"{nodes} node(s) of {spn} slots")
    memory = res.device_memory_gb or slot_memory_gb(res.device, spn)
    sharing = checked.sharing(memory)  # the campaign's own rule: several small trials per GPU, or off
    sizer = Sizer(model, sizes, target_seconds=max(1e-3, cfg.trial_time_limit_s / 4.0), memory_per_slot_gb=memory,
                  packing=sharing.packing(cfg.max_trials / (nodes * spn)))
    base = cfg.load_base_config()
    rng = np.random.default_rng(seed)
    stopper = cfg.early_stopping.make()

    def make_trial(trial_id: int, params: dict[str, Any]) -> SimTrial:
        try:
            features = TrialFeatures.from_config(apply_params(base, params))
        except CostModelError as exc:
            raise CampaignPlanError(f"{campaign}: a configuration of the search space: {exc}") from None
        choice = sizer.choose(features)
        true_total = choice.predicted_seconds * math.exp(estimate_error * rng.standard_normal())
        startup = min(model.startup_s, 0.5 * true_total)
        return SimTrial(trial_id, choice.slots, min(choice.predicted_seconds, cfg.trial_time_limit_s), true_total,
                        choice.memory_per_slot_gb, features, alternatives=choice.alternatives,
                        wider_sizes=tuple(n for n, _ in choice.alternatives), time_limit_s=cfg.trial_time_limit_s,
                        efficiency=model.efficiency, epochs=features.num_epoch, startup_s=startup,
                        epoch_s=(true_total - startup) / features.num_epoch,
                        curve=learning_curve(features.num_epoch, rng) if stopper is not None else None)

    optimizer = make_optimizer(cfg.optimizer.name, cfg.space, cfg.seed, cfg.optimizer.options,
                               num_objectives=len(cfg.objective_set.keys))
    source = OptimizerSource(optimizer, make_trial, cfg.max_trials)
    config = _sim_config(checked, nodes, stats.num_graphs, hours * 3600.0, sharing, seed, estimate_error)
    result = simulate(source, config, progress=progress)
    short = check_budgets(sizer, lambda params: apply_params(base, params), cfg.space, stopper,
                          cfg.trial_time_limit_s, measured=learn_from is not None)
    plan = _plan(result, source.by_id, nodes, hours, note)
    return result, replace(plan, budget_warning=None if short is None else short.message())


def learn_campaign(model: CostModel, campaign_dir: Path) -> int:
    """Teach ``model`` the epochs a finished campaign reported (its own base config and each
    trial's parameters give the features); returns how many attempts it learnt from."""
    import json

    from hpo.campaign_dir import CampaignDir
    from hpo.campaign_reader import read_campaign_dir
    from hpo.space import apply_params

    record = read_campaign_dir(campaign_dir)
    if record.state is None:
        raise CampaignPlanError(f"{campaign_dir}: no journal to learn from")
    base = json.loads(CampaignDir(Path(campaign_dir)).base_config.read_text())
    taught = 0
    for trial in record.state.trials.values():
        try:
            features = TrialFeatures.from_config(apply_params(base, trial.params))
        except CostModelError:
            continue
        for attempt in trial.attempts.values():
            last = attempt.reports[-1] if attempt.reports else None
            if last is None or last.epoch_s is None:
                continue
            first = attempt.reports[0]
            # a start-up only from an attempt that trained from epoch 1: a resumed attempt's elapsed
            # seconds go on from the attempts before it
            startup = (first.elapsed_s - first.epoch_s) if (first.epoch == 1 and first.elapsed_s is not None
                                                              and first.epoch_s) else None
            times = EpochTimes(startup if startup is not None and startup >= 0 else None, last.epoch_s, last.train_s)
            if model.learn_epoch((trial.trial_id, attempt.attempt), features, max(1, len(attempt.slots)), times):
                taught += 1
    return taught


def _status(attempt, trial: SimTrial) -> TrialStatus:
    """How a trial's last attempt ended, in the campaign's status words."""
    if not attempt.ok:
        return TrialStatus.FAILED
    if attempt.stopped:
        return TrialStatus.STOPPED
    return TrialStatus.COMPLETED if (attempt.epochs or 0) >= trial.epochs else TrialStatus.TIMEOUT


def _plan(result: SimResult, trials: dict[int, SimTrial], nodes: int, hours: float, note: str) -> CampaignPlan:
    allocation = hours * 3600.0
    final: dict[int, Any] = {}
    for r in sorted(result.records, key=lambda r: (r.trial_id, r.attempt)):
        final[r.trial_id] = r  # the last attempt decides
    within = [r for r in final.values() if r.end <= allocation]
    statuses = Counter(_status(r, trials[r.trial_id]) for r in within)
    sizes = Counter(len(r.held) for r in result.records if r.attempt == 1)
    scored = [r for r in within if r.objective is not None and math.isfinite(r.objective)]
    best = min(scored, key=lambda r: r.objective, default=None)
    counts = {status.value: n for status, n in statuses.items()}
    return CampaignPlan(nodes, hours, len(within), counts, statuses.get(TrialStatus.COMPLETED, 0), dict(sizes),
                        float(result.summary["utilisation"]), float(result.summary["makespan_s"]) / 3600.0,
                        None if best is None else float(best.objective),
                        None if best is None else float(best.end) / 3600.0, note)
