"""A campaign as an Optuna study: for ``optuna-dashboard``, Optuna's plots and its importance
evaluators.

Every finished trial of the journal becomes one ``FrozenTrial`` (trials that never finished are
left out: Optuna numbers the trials it is given 0, 1, ... so ``number`` is the position among the
finished trials; the campaign's id is ``user_attrs["trial_id"]``):

======================  ===============================================================
campaign                Optuna
======================  ===============================================================
completed, timeout      ``COMPLETE`` with the objective (minimised) as its value (a
                        timeout trained until its time limit and kept its best epoch:
                        ``user_attrs["status"]`` says ``timeout``)
stopped (early)         ``PRUNED`` (value: its best objective, as Optuna's pruned trials
                        keep their last reported value)
diverged, failed        ``FAIL`` (a timeout without any finished epoch too)
learning curve          ``intermediate_values`` {epoch: validation objective}
params                  ``params`` with distributions from the frozen search space
several objectives      a study with one ``minimize`` direction per objective: ``values``
                        of a ``COMPLETE`` trial are its objectives in the campaign's order
                        (``study.best_trials`` is the Pareto front); ``PRUNED`` trials
                        have none
start/end               ``datetime_start`` / ``datetime_complete`` (local time)
slots, size, host,      ``user_attrs``: ``trial_id``, ``status``, ``slots``, ``size``, ``hosts``,
wall time, reason       ``wall_time_s``, ``slot_seconds``, ``epochs``, ``failure_reason``,
                        ``attempts``, ``inference_ms_per_graph``, per-head ``val_mae:<head>``
======================  ===============================================================
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from hpo.space import CategoricalParam, FloatParam, IntParam, SearchSpace
from hpo.state import CampaignState, TrialRecord
from hpo.status import TrialStatus

#: The study name of an exported campaign (``optuna-dashboard`` lists it).
STUDY_NAME = "hydragnn-ensemble"


def distributions(space: SearchSpace) -> dict[str, Any]:
    """Optuna distributions of the search space's keys."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, Any] = {}
    for p in space.params:
        if isinstance(p, IntParam):
            out[p.key] = IntDistribution(p.low, p.high, log=p.log, step=p.step)
        elif isinstance(p, FloatParam):
            out[p.key] = FloatDistribution(p.low, p.high, log=p.log)
        elif isinstance(p, CategoricalParam):
            out[p.key] = CategoricalDistribution(list(p.choices))
        else:  # pragma: no cover - the space has three kinds
            raise TypeError(f"unknown parameter kind {type(p).__name__}")
    return out


def _state_of(record: TrialRecord) -> Any:
    from optuna.trial import TrialState

    states = {TrialStatus.COMPLETED: TrialState.COMPLETE, TrialStatus.TIMEOUT: TrialState.COMPLETE,
              TrialStatus.STOPPED: TrialState.PRUNED, TrialStatus.DIVERGED: TrialState.FAIL,
              TrialStatus.FAILED: TrialState.FAIL}
    return states[record.status]


def _when(t: float | None) -> datetime.datetime | None:
    return None if t is None else datetime.datetime.fromtimestamp(t)


def _user_attrs(record: TrialRecord) -> dict[str, Any]:
    last = record.last_attempt
    assert last is not None
    result = record.result
    wall = result.wall_time_s if result is not None else None
    if not wall and last.start is not None and last.end is not None:
        wall = last.end - last.start
    slots = max(len(last.slots), last.size, 1)
    attrs: dict[str, Any] = {
        "trial_id": record.trial_id, "status": str(record.status), "slots": list(last.slots), "size": last.size,
        "hosts": sorted(set(last.hosts)), "attempts": len(record.attempts),
        "wall_time_s": wall, "slot_seconds": None if wall is None else float(wall) * slots,
        "epochs": result.epochs if result is not None else None, "failure_reason": last.reason,
        "inference_ms_per_graph": result.inference_ms_per_graph if result is not None else None,
    }
    for head, metrics in (result.heads if result is not None else {}).items():
        if metrics.val_mae is not None:
            attrs[f"val_mae:{head}"] = metrics.val_mae
    return attrs


def frozen_trials(state: CampaignState, space: SearchSpace) -> list[Any]:
    """The finished trials of ``state`` as Optuna ``FrozenTrial`` objects (see the module docstring)."""
    from optuna.trial import FrozenTrial, TrialState

    dists = distributions(space)
    out = []
    for record in sorted(state.finished, key=lambda r: r.trial_id):
        last = record.last_attempt
        assert last is not None
        params = {k: v for k, v in record.params.items() if k in dists}
        state_ = _state_of(record)
        value = record.objective if state_ in (TrialState.COMPLETE, TrialState.PRUNED) else None
        values = None
        if state.objectives.multi:
            value, values = None, list(record.objective_values) if state_ == TrialState.COMPLETE and \
                record.objective_values is not None else None
        if state_ == TrialState.COMPLETE and value is None and values is None:
            state_ = TrialState.FAIL
        curve = {int(e): float(v) for e, v in record.curve if v is not None}
        number = len(out)
        out.append(FrozenTrial(
            number=number, state=state_, value=value, values=values,
            datetime_start=_when(last.start), datetime_complete=_when(last.end),
            params=params, distributions={k: dists[k] for k in params}, user_attrs=_user_attrs(record),
            system_attrs={}, intermediate_values=curve, trial_id=number,
        ))
    return out


def study_from_state(state: CampaignState, space: SearchSpace, storage: Any = None,
                     study_name: str = STUDY_NAME) -> Any:
    """An Optuna study (in memory unless ``storage`` is given) holding the campaign's finished trials."""
    import optuna

    study = optuna.create_study(storage=storage, study_name=study_name,
                                directions=["minimize"] * len(state.objectives.keys))
    study.add_trials(frozen_trials(state, space))
    return study


def write_optuna_storage(state: CampaignState, space: SearchSpace, path: str | os.PathLike) -> Path:
    """The campaign as an Optuna storage file at ``path``: SQLite when it ends in ``.db``/``.sqlite``/
    ``.sqlite3``, else an Optuna journal file (``optuna-dashboard PATH`` opens either). ``path``
    must not exist (the caller decides about replacing)."""
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path}: exists; an Optuna storage is written to a new file")
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        storage: Any = optuna.storages.RDBStorage(f"sqlite:///{path.resolve()}")
    else:
        storage = JournalStorage(JournalFileBackend(str(path)))
    study_from_state(state, space, storage=storage)
    if isinstance(storage, optuna.storages.RDBStorage):
        storage.remove_session()
        storage.engine.dispose()
    return path
