"""``run_campaign``: the entry point every rank of ``mpirun -n N hydragnn-ensemble hpo ...`` calls.

Start-up (collective): every agent reports its host and GPU variables (gather); rank 0 validates the
campaign and broadcasts each agent's slot and launcher, so the agents start their fork servers
(importing torch) while rank 0 takes the lock, freezes or checks the campaign directory, replays the
journal on --resume and builds the optimizer; each agent enters a sleeping barrier once its fork
server is ready, then a broadcast says go (or carries the error that stops everybody). Then rank 0 runs
:class:`SchedulerRank` and the agents run :class:`Agent` until rank 0 sends Shutdown.

Budgets across runs of one campaign: ``max_trials`` counts finished trials (every final status, each
trial once however many attempts it took); ``max_time_s`` counts campaign time summed over all runs
(from each run's ``campaign_started`` to its last event), not the wall time between the first start
and the last resume. When ``max_time_s`` is reached no new trial starts; running trials finish within
their own time limit.

Resume: every finished trial is told to the new optimizer again (``tell_past``); a trial running at
the crash is re-run once as its next attempt with the same id and parameters; a trial suggested but
not started yet is started with its id and parameters. The k-th resume seeds the optimizer with
``seed + 1000 k`` so it does not hand out the first run's suggestions again.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from hpo.campaign import FrozenCampaign
from hpo.campaign_dir import CampaignDir, CampaignDirError, check_new, check_outside_inputs
from hpo.events import CampaignFinished, CampaignStarted
from hpo.stoppers import Stopper
from scheduler.budget_check import BudgetShortfall, BudgetWatch, check_budgets
from hpo.optimizer_process import OptimizerProcess
from scheduler.campaign_file import CheckedCampaign, load_checked_campaign
from scheduler.placement.registry import make_policy
from scheduler.runtime.agent import Agent, hello
from scheduler.runtime.faults import InfrastructureFault
from scheduler.runtime.fork_server import default_preload
from scheduler.runtime.layout import ClusterLayout, build_layout
from scheduler.runtime.messages import AgentHello, LauncherSettings
from scheduler.runtime.polling import wait_quietly
from scheduler.runtime.progress import ProgressLine
from scheduler.loop import TrialSpec
from scheduler.runtime.scheduler_rank import CampaignSummary, SchedulerRank
from scheduler.runtime.transport import MpiTransport
from scheduler.runtime.sizing import usable_sizes
from scheduler.sharing import GpuSharing, SharingMode
from scheduler.sizing import CostModelSizer, runtime_sizer, slot_memory_gb

if TYPE_CHECKING:
    from hpo.campaign import CampaignConfig


class CampaignSetupError(ValueError):
    """The campaign cannot start (too few ranks, bad config, directory in use...): nothing ran."""


@dataclass
class _Setup:
    scheduler: SchedulerRank
    session: Any  # hpo.session.CampaignSession
    notices: list[str]


def default_campaign_dir(campaign_path: str | Path) -> Path:
    """``<cwd>/<campaign file stem>_campaign`` when no directory is given."""
    return Path.cwd() / f"{Path(campaign_path).stem}_campaign"


def _plan_rank0(hellos, campaign_path: Path, dataset: Path | None, cdir: CampaignDir,
                resume: bool) -> tuple[CheckedCampaign, ClusterLayout]:
    """The validated campaign and the agents' layout: what the agents need to start (quick). The
    campaign directory is checked here too, before any agent starts: it must not overlap the
    campaign's inputs, and a new campaign needs a new or empty directory."""
    # --dataset replaces the file's dataset before validation (which checks that it exists)
    checked = load_checked_campaign(campaign_path, None if dataset is None else {"dataset": str(dataset.resolve())})
    cfg = checked.config
    check_outside_inputs(cdir, [campaign_path, cfg.dataset, cfg.base_config])
    if not resume:
        check_new(cdir)  # before anything is written there (again under the lock in the set-up)
    return checked, build_layout(hellos, cfg.resources.slots_per_node)


def _setup_rank0(comm, checked: CheckedCampaign, layout: ClusterLayout, campaign_path: Path, cdir: CampaignDir,
                 resume: bool, force_unlock: bool, hellos: list[AgentHello]) -> _Setup:
    """Open the campaign (:class:`hpo.session.CampaignSession`) and build the scheduler over it."""
    from hpo.session import CampaignSession

    cfg = checked.config
    try:
        sizes = usable_sizes(cfg.resources.slots_per_trial, layout.slots_per_node, layout.slots_on_nodes())
    except ValueError as exc:
        raise CampaignSetupError(f"{campaign_path}: {exc}") from None
    policy = make_policy(cfg.placement)
    res = cfg.resources
    memory_gb = res.device_memory_gb or slot_memory_gb(res.device, layout.slots_per_node)
    sharing = checked.sharing(memory_gb)  # the rule was checked against its curve when the file was loaded
    warnings = preflight(cfg, campaign_path)  # before anything is written; the agents import meanwhile
    session = CampaignSession.open(cfg, cdir, resume=resume, force_unlock=force_unlock,
                                   ask_batch=max(1, min(64, layout.usable_slots)),
                                   own_process=cfg.optimizer.in_own_process(layout.usable_slots))
    try:
        make_config = trial_config_maker(cfg, cdir)
        # the cost model sizes each trial (memory first, then a target duration) and learns from
        # finished ones (scheduler.loop.CampaignLoop calls sizer.observe); the one stopper of the
        # run plans the sizer's expected work and decides in the loop
        stopper = cfg.early_stopping.make()
        sizer = runtime_sizer(str(cfg.dataset), sizes, layout.slots_per_node, cfg.trial_time_limit_s,
                              make_config, device=res.device, memory_per_slot_gb=memory_gb,
                              work_fraction=None if stopper is None else stopper.expected_fraction,
                              packing=sharing.packing(cfg.max_trials / max(1, layout.usable_slots)))
        session.record([CampaignStarted(time=time.time(), campaign=FrozenCampaign.of(cfg), resume=resume,
                                        ranks=comm.Get_size(), slots=layout.usable_slots)])
        session.sync()
        notices = list(session.notices) + [f"warning: {w}" for w in warnings]
        if isinstance(session.optimizer, OptimizerProcess):  # what the session made, not the rule again
            notices.append(f"optimizer {cfg.optimizer.name}: in a process of its own (pid {session.optimizer.pid}), "
                           "off rank 0's scheduling thread")
        if sizer.notice:
            notices.append(sizer.notice)
        watch = budget_watch(cfg, sizer, stopper, layout.usable_slots)
        if watch.first is not None:
            notices.append(f"warning: {watch.first.message(recheck=True)}")
        notices += _sharing_notices(sharing, res.device, hellos)
        sched = SchedulerRank(MpiTransport(comm), cfg, cdir, layout, policy, sizer, session, make_config,
                              progress=ProgressLine(enabled=False), stopper=stopper, sharing=sharing,
                              budget_watch=watch)
        again = [TrialSpec(u.trial_id, u.params, u.attempt,
                           u.size if u.size in sizes else sizer.size(u.params)[0],
                           retries_used=u.retries_used, oom_retried=u.oom_retried)
                 for u in session.to_restart]
        if resume:
            rerun = sum(u.attempt > 0 for u in session.to_restart)
            notices.append(f"resuming: {session.state.num_finished} trials finished before, {rerun} cut short by "
                           f"the stop are re-run, {len(again) - rerun} suggested ones start")
        if sched.drained_again:
            notices.append(f"nodes drained by an earlier run stay out of service: {', '.join(sched.drained_again)} "
                           f"(drain_after_node_failures: 0 in the campaign file keeps every node in service)")
        sched.requeue(again)
        return _Setup(sched, session, notices)
    except BaseException:
        session.close()
        raise


def _sharing_notices(sharing: GpuSharing, device: str, hellos: list[AgentHello]) -> list[str]:
    """What a campaign that shares GPUs says at its start (and a curve on which sharing loses)."""
    if not sharing.enabled:
        return []
    loss = sharing.loss_warning()
    return [sharing_notice(sharing, device, hellos)] + ([f"warning: {loss}"] if loss is not None else [])


def preflight(cfg: "CampaignConfig", campaign_path: Path) -> list[str]:
    """The built-in trainer's configs against the dataset (:mod:`hpo.preflight`): the warnings, or
    :class:`CampaignSetupError` with every problem a trial would have failed on."""
    from hpo.campaign import BUILTIN_TRIAL_PROGRAM
    from hpo.preflight import check_against_dataset

    if cfg.trial_program != BUILTIN_TRIAL_PROGRAM:
        return []
    report = check_against_dataset(cfg.load_base_config(), cfg.space, cfg.dataset)
    if report.errors:
        shown = "\n".join(f"  - {e}" for e in report.errors[:20])
        more = f"\n  ... and {len(report.errors) - 20} more" if len(report.errors) > 20 else ""
        raise CampaignSetupError(
            f"{campaign_path}: no trial started: {len(report.errors)} problem(s) of the configs against the "
            f"dataset {cfg.dataset} (base_config {cfg.base_config}):\n{shown}{more}")
    return report.warnings


def budget_watch(cfg: "CampaignConfig", sizer: CostModelSizer, stopper: Stopper | None, slots: int) -> BudgetWatch:
    """The budgets checked before trial 1 (:mod:`scheduler.budget_check`) and again once the first
    trials (as many as run at once, at most 8) have reported their first epoch."""
    def check(measured: bool) -> BudgetShortfall | None:
        return check_budgets(sizer.sizer, sizer.config_of, cfg.space, stopper, cfg.trial_time_limit_s,
                             measured=measured)

    return BudgetWatch(lambda: check(True), check(False), after_trials=min(8, slots))


def sharing_notice(sharing: GpuSharing, device: str, hellos: list[AgentHello]) -> str:
    """What the campaign says at start about several trials per slot: how many, and whether their
    kernels run concurrently (NVIDIA MPS) or time-sliced."""
    rule = (f"up to {sharing.per_gpu} trials per {device.upper()} slot" if sharing.mode == SharingMode.FIXED else
            f"trials predicted to use under {sharing.small_below:.0%} of a GPU alone share one, up to "
            f"{sharing.per_gpu} per GPU")
    if device != "gpu":
        how = "time-sliced on the slot's CPU core(s)"
    else:
        without = sorted({h.host for h in hellos if not h.mps_control})
        how = ("NVIDIA MPS found on every host: their kernels run concurrently" if not without else
               f"no NVIDIA MPS control daemon on {', '.join(without[:4])}{' ...' if len(without) > 4 else ''}: "
               "they are time-sliced (start 'nvidia-cuda-mps-control -d' on each node for concurrent kernels)")
    return f"gpu_sharing {sharing.mode.value}: {rule} ({sharing.device_memory_gb:.1f} GB per slot); {how}"


def trial_config_maker(cfg: "CampaignConfig", cdir: CampaignDir):
    """``params -> config dict``: the frozen base config with a trial's values."""
    from hpo.space import apply_params

    base = json.loads(cdir.base_config.read_text())
    return lambda params: apply_params(base, params)


def _refuse(comm, exc: BaseException, barrier: bool) -> NoReturn:
    """Tell the agents (waiting in the start-up bcast, or after ``barrier``) that the campaign
    cannot start, then raise: user errors (ValueError: configuration, directory, lock) as
    :class:`CampaignSetupError` (a directory error as itself), anything else unchanged."""
    if barrier:
        comm.Ibarrier().Wait()  # matches the agents' Ibarrier (a blocking Barrier would not)
    detail = str(exc) if isinstance(exc, ValueError) else repr(exc)
    comm.bcast({"error": f"rank 0 could not start the campaign: {detail}"}, root=0)
    if isinstance(exc, ValueError) and not isinstance(exc, (CampaignDirError, CampaignSetupError)):
        raise CampaignSetupError(str(exc)) from exc
    raise exc


def launcher_settings(cfg: "CampaignConfig") -> LauncherSettings:
    """The campaign's trial launcher with its preload list filled in."""
    preload = cfg.trial_preload if cfg.trial_preload is not None else default_preload(cfg.trial_program)
    return LauncherSettings(kind=cfg.trial_launcher, preload=tuple(preload))


def run_campaign(
    campaign_path: str | Path,
    campaign_dir: str | Path | None = None,
    resume: bool = False,
    comm=None,
    force_unlock: bool = False,
    progress: bool = True,
    dataset: str | Path | None = None,
    stream: TextIO = sys.stderr,
) -> CampaignSummary | None:
    """Run (or resume) a campaign on all ranks of ``comm``; collective.

    ``dataset`` replaces the campaign's ``dataset`` (part of the frozen campaign: give it again on
    --resume). Returns the summary on rank 0 and None on the agents. Raises :class:`CampaignSetupError` (or the
    hpo config errors, all ValueError) on every rank when the campaign cannot start."""
    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        raise CampaignSetupError(
            "an HPO campaign needs at least 2 MPI ranks (rank 0 schedules, ranks 1.. run trials): "
            "mpiexec -n 3 hydragnn-ensemble hpo CAMPAIGN.yaml")
    me = hello(comm)
    hellos = comm.gather(me, root=0)
    if comm.Get_rank() != 0:
        _run_agent(comm, me)
        return None
    cdir = CampaignDir(Path(campaign_dir) if campaign_dir is not None else default_campaign_dir(campaign_path))
    try:
        checked, layout = _plan_rank0(hellos[1:], Path(campaign_path), Path(dataset) if dataset is not None else None,
                                      cdir, resume)
        cfg = checked.config
    except BaseException as exc:
        _refuse(comm, exc, barrier=False)
    comm.bcast({"assignments": layout.assignments, "device": cfg.resources.device,
                "launcher": launcher_settings(cfg)}, root=0)
    try:
        setup = _setup_rank0(comm, checked, layout, Path(campaign_path), cdir, resume, force_unlock, hellos[1:])
    except BaseException as exc:
        _refuse(comm, exc, barrier=True)
    wait_quietly(comm.Ibarrier(), 0.001)  # agents may still be importing: do not spin a core
    comm.bcast({"go": True}, root=0)
    return _run_rank0(setup, progress, stream)


def _run_agent(comm, me) -> None:
    """An agent's side of the start-up (see the module docstring), then its loop until Shutdown.
    A blocking bcast would spin a core per agent: the agents wait in a sleeping barrier."""
    payload = comm.bcast(None, root=0)
    if "error" in payload:
        raise CampaignSetupError(payload["error"])
    agent = Agent(comm, payload["assignments"][comm.Get_rank()], me, payload["device"], payload["launcher"])
    agent.launcher.ready()  # the campaign starts when every slot can start a trial at once
    wait_quietly(comm.Ibarrier())
    go = comm.bcast(None, root=0)
    if "error" in go:
        agent.launcher.close()
        raise CampaignSetupError(go["error"])
    agent.run()


def _run_rank0(setup: _Setup, progress: bool, stream: TextIO) -> CampaignSummary:
    """Rank 0's loop over the opened campaign; the agents are shut down and the session closed
    however it ends."""
    sched = setup.scheduler
    sched.progress = ProgressLine(stream=stream, enabled=progress)
    for notice in setup.notices:
        print(f"hpo: {notice}", file=stream, flush=True)
    reason = "campaign over"
    try:
        summary = sched.run()
        reason = summary.reason
    except InfrastructureFault as fault:
        reason = f"infrastructure fault: {fault.cause}"
        _end_quietly(setup, sched, reason)
        raise
    except BaseException as exc:
        reason = f"rank 0 failed: {exc!r}"
        raise
    finally:
        sched.shutdown(reason)
        _close_quietly(setup.session)
    summary.journal_fsyncs = setup.session.journal.fsyncs
    return summary


def _end_quietly(setup: _Setup, sched: SchedulerRank, reason: str) -> None:
    """Journal why the run ended, when the journal still takes it (a full disk may refuse): the
    trials it cut short stay unfinished in the journal, so --resume re-runs them."""
    try:
        setup.session.record([CampaignFinished(time=sched.clock(), reason=reason)])
    except (OSError, RuntimeError, ValueError):
        pass


def _close_quietly(session) -> None:
    """Close the session; after a fault its journal may not sync: the lock is released anyway."""
    try:
        session.close()
    except (OSError, RuntimeError):
        session.lock.release()
