"""The campaign file (``campaign.yaml``): validated completely before anything launches.

:func:`load_campaign` reads the YAML, resolves ``dataset`` and ``base_config`` relative to the
YAML file, and checks everything a user can get wrong: unknown keys (with the closest known key),
missing files (named), search-space entries (named), search-space keys that do not lead into the
base HydraGNN config (the key's parent section must exist), bounds. For the built-in trainer
(``trial_program: hydragnn_ensemble``) the base config must also pass the HydraGNN config schema
and every search-space key must be a key of that schema (``hiden_dim`` is refused with "did you
mean 'hidden_dim'?"), so that no trial is burnt on a typo. Every error is a
:class:`CampaignConfigError` whose message starts with the campaign file's path and lists every
problem found.

:func:`freeze` writes the frozen copy (``campaign.yaml`` with every default filled in and absolute
paths, plus ``base_config.json``) into the campaign directory; :func:`check_unchanged` refuses a
resume whose campaign differs from the frozen copy, listing the differing keys.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hpo.campaign_dir import FROZEN_BASE_CONFIG, FROZEN_CAMPAIGN, CampaignDir
from hpo.objective import ObjectiveKey, Objectives, check_objective_key
from hpo.optimizers import OptimizerOptionError, check_optimizer_name, check_optimizer_options
from hpo.pbt import PERTURBABLE_KEYS, Exploiter, PbtOptionError, PbtOptions, perturbable_keys
from hpo.space import ConfigPathError, SearchSpace, SearchSpaceError, check_config_paths

__all__ = [
    "FrozenCampaign",
    "CampaignChangedError",
    "CampaignConfig",
    "CampaignConfigError",
    "OptimizerConfig",
    "EarlyStoppingConfig",
    "ResourcesConfig",
    "TRIAL_LAUNCHERS",
    "TrialLauncher",
    "check_unchanged",
    "freeze",
    "load_campaign",
    "load_frozen_dict",
    "validate_campaign",
]

# Campaign keys that may change between runs of one campaign (budgets and scheduling; the base
# config's path, whose contents must still equal the frozen copy); everything else (dataset, search
# space, objective, optimizer, seed, trial program) is frozen.
RESUMABLE_KEYS: frozenset[str] = frozenset({
    "max_trials", "max_time_s", "trial_time_limit_s", "retries", "retry_oom_on_more_slots",
    "failure_threshold", "min_trials_for_threshold", "resources", "placement", "pool_factor",
    "base_config", "trial_launcher", "trial_preload", "prefetch_below_s", "trial_log_max_mb", "stop_grace_s",
    "drain_after_node_failures", "fill_tail",
})
BUILTIN_TRIAL_PROGRAM = "hydragnn_ensemble"  # the built-in trainer reads HydraGNN configs
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


#: the most trials one GPU may hold (NVIDIA MPS serves at most 48 clients per GPU on Volta and newer)
MAX_TRIALS_PER_GPU = 48

class CampaignConfigError(ValueError):
    """An invalid campaign file; the message names the file and the key."""


class CampaignChangedError(CampaignConfigError):
    """A resume with a campaign that differs from the campaign directory's frozen copy."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


#: from this many slots on, ``optimizer.own_process: auto`` runs the optimizer in its own process
OWN_PROCESS_FROM_SLOTS = 256


class OptimizerConfig(_Strict):
    """``optimizer:`` section: the backend (a name of :data:`hpo.optimizers.OPTIMIZERS`) and its
    library options."""

    name: str = "deephyper-cbo"
    options: dict[str, Any] = Field(default_factory=dict)
    # in a process of its own (hpo.optimizer_process), off rank 0's scheduling thread: auto = from
    # OWN_PROCESS_FROM_SLOTS slots on (where its 15-40 ms per result would fill rank 0)
    own_process: Literal["auto"] | bool = "auto"

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        return check_optimizer_name(name)

    def in_own_process(self, slots: int) -> bool:
        """Whether the optimizer runs in its own process on a machine of ``slots`` slots."""
        return slots >= OWN_PROCESS_FROM_SLOTS if self.own_process == "auto" else bool(self.own_process)


class ResourcesConfig(_Strict):
    """``resources:`` section: what one node offers and which trial sizes are allowed.

    ``device_memory_gb``: memory of one slot's device (None: 64 GB, one MI250X GCD, for ``gpu``;
    this host's memory over ``slots_per_node`` for ``cpu``). ``gpu_sharing``: several small trials
    per slot (``off``; ``auto``: trials predicted to use under 40% of a GPU alone, up to the
    measured curve's best k; or a fixed k), which needs ``colocation_curve``, the aggregate
    throughput of k trials on one device measured by ``python -m bench.gpu_colocation``
    (:mod:`scheduler.sharing`)."""

    slots_per_node: int = Field(1, ge=1)
    device: Literal["cpu", "gpu"] = "cpu"
    slots_per_trial: list[int] = Field(default_factory=lambda: [1], min_length=1)
    device_memory_gb: float | None = Field(None, gt=0)
    gpu_sharing: str = "off"
    colocation_curve: Path | None = None

    @field_validator("gpu_sharing", mode="before")
    @classmethod
    def _sharing_word(cls, value: Any) -> str:
        text = str(value).strip().lower()
        if text in ("off", "auto") or (text.isdigit() and 1 <= int(text) <= MAX_TRIALS_PER_GPU):
            return "off" if text == "1" else text
        raise ValueError(f"must be off, auto or a number of trials per GPU (2 to {MAX_TRIALS_PER_GPU}), got {value!r}")

    @model_validator(mode="after")
    def _curve_for_sharing(self) -> "ResourcesConfig":
        if self.gpu_sharing == "auto" and self.device != "gpu":
            raise ValueError("gpu_sharing: auto judges each trial's predicted GPU utilisation: it needs "
                             "device: gpu (a fixed number of trials per slot also runs on cpu slots, time-sliced)")
        if self.gpu_sharing != "off" and self.colocation_curve is None:
            raise ValueError(f"gpu_sharing: {self.gpu_sharing} needs colocation_curve, a file measured on "
                             "this machine's device by 'python -m bench.gpu_colocation --device cuda --out FILE' "
                             "(what k trials on one GPU cost is measured, not assumed)")
        return self

    @field_validator("slots_per_trial")
    @classmethod
    def _positive_sorted(cls, sizes: list[int]) -> list[int]:
        if any(s < 1 for s in sizes):
            raise ValueError(f"every size must be >= 1, got {sizes}")
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"sizes must be distinct, got {sizes}")
        return sorted(sizes)


#: Default ``early_stopping.verdict_wait_s`` (see :class:`EarlyStoppingConfig`).
VERDICT_WAIT_S = 2.0


class EarlyStoppingConfig(_Strict):
    """``early_stopping:`` section: which stopper (:mod:`hpo.stoppers`) ends trials early from their
    learning curves, with its options (e.g. ``{method: asha, min_epochs: 1, reduction_factor: 3}``);
    ``method: none`` (the default) trains every trial to its budget.

    ``verdict_wait_s`` (not a stopper option): after an epoch at which the stopper decides (its
    rungs, :meth:`hpo.stoppers.Stopper.decision_epochs`), the trainer waits up to this long for the
    campaign's verdict (stop, or go on) before it starts the next epoch, so that a stop lands at the
    rung instead of part-way through the next epoch; 0 never waits."""

    model_config = ConfigDict(extra="allow", validate_default=True)
    method: str = "none"
    verdict_wait_s: float = Field(default=VERDICT_WAIT_S, ge=0.0)

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @model_validator(mode="after")
    def _known(self) -> "EarlyStoppingConfig":
        from hpo.stoppers import make_stopper

        make_stopper(self.method, self.options)  # raises naming the method or the option
        return self

    def make(self):
        """The stopper, or None for one that never stops a trial (``method: none``)."""
        from hpo.stoppers import discarding_stopper

        return discarding_stopper(self.method, self.options)


#: The names a campaign's ``trial_launcher`` may take, the one list of them: the scheduler registers
#: one launcher under each (``scheduler.runtime.launchers.LAUNCHER_FACTORIES``; hpo cannot import
#: the scheduler, so a test checks that the two name the same launchers).
TrialLauncher = Literal["fork-server", "exec"]
TRIAL_LAUNCHERS: tuple[str, ...] = get_args(TrialLauncher)

LOSS_FUNCTION_KEY = "NeuralNetwork.Training.loss_function_type"
DEFAULT_OBJECTIVE = "objective"


class CampaignConfig(_Strict):
    """A validated campaign. Paths are absolute after :func:`load_campaign`."""

    dataset: Path
    base_config: Path
    search_space: dict[str, Any]
    objective: str = "objective"
    # a multi-objective campaign: an accuracy key first, then accuracy or cost keys (hpo.objective)
    objectives: list[str] | None = None
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    early_stopping: EarlyStoppingConfig = Field(default_factory=EarlyStoppingConfig)
    max_trials: int = Field(ge=1)
    max_time_s: float | None = Field(None, gt=0)
    trial_time_limit_s: float = Field(3600.0, gt=0)
    retries: int = Field(0, ge=0)
    retry_oom_on_more_slots: bool = True
    seed: int = 0
    failure_threshold: float = Field(0.5, gt=0, le=1)
    min_trials_for_threshold: int = Field(8, ge=1)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    placement: str = "load-aware"  # a name of scheduler.placement.registry (scheduler.campaign_file checks it)
    pool_factor: float = Field(2.0, ge=1)
    trial_program: str = BUILTIN_TRIAL_PROGRAM
    trial_launcher: TrialLauncher = "fork-server"
    trial_preload: list[str] | None = None  # None: torch & co. for the built-in trainer, else the program
    # a single-slot trial predicted to take at most this long gets its slot's next trial sent ahead,
    # started by the agent the moment it exits (no round trip to rank 0); 0: never
    prefetch_below_s: float = Field(2.0, ge=0)
    # a trial's log is cut to its tail beyond this size (MiB), with a line in the log saying so
    trial_log_max_mb: float = Field(64.0, gt=0)
    # a trial asked to stop (early discarding) that has not ended after this long (or twice its
    # longest epoch, if longer) is terminated like one over its time limit
    stop_grace_s: float = Field(30.0, gt=0)
    # a node whose trials failed this many times in a row for a node-level reason (device,
    # interconnect, local disk: scheduler.node_health.NODE_LEVEL_PATTERNS) gets no more trials; 0: never
    drain_after_node_failures: int = Field(3, ge=0)
    # once max_trials trials are out, slots that would idle while the last trials run get extra
    # trials (each predicted to reach its first rung before the last regular trial's end); they
    # are stopped when no regular trial is left: more configurations tried in the same allocation
    fill_tail: bool = False
    # a running trial may grow onto slots that would otherwise idle (nothing waits for them): it
    # stops after its epoch keeping its training state and goes on from it on more slots, the global
    # batch unchanged (scheduler.loop.campaign_loop); "auto": on for the built-in trainer, which keeps
    # its state, off for other trial programs (they would start again from scratch)
    malleable: bool | Literal["auto"] = "auto"

    @field_validator("search_space")
    @classmethod
    def _valid_space(cls, spec: dict[str, Any]) -> dict[str, Any]:
        return SearchSpace.from_dict(spec).to_dict()

    @field_validator("objective")
    @classmethod
    def _valid_objective(cls, key: str) -> str:
        return check_objective_key(key)

    @field_validator("trial_program")
    @classmethod
    def _module_name(cls, name: str) -> str:
        if not _MODULE.fullmatch(name):
            raise ValueError(f"{name!r} is not a python module name (run as 'python -m <module>')")
        return name

    @field_validator("trial_preload")
    @classmethod
    def _module_names(cls, names: list[str] | None) -> list[str] | None:
        for name in names or []:
            if not _MODULE.fullmatch(name):
                raise ValueError(f"{name!r} is not a python module name")
        return names

    @model_validator(mode="after")
    def _several_objectives(self) -> "CampaignConfig":
        if self.objectives is None:
            return self
        parsed = Objectives.parse(self.objectives)
        if len(parsed.keys) < 2:
            raise ValueError("objectives: a multi-objective campaign names two or more keys "
                             "(for one, write objective: <key>)")
        if "objective" in self.model_fields_set and self.objective != parsed.primary.text:
            raise ValueError(f"objective {self.objective!r} and objectives {self.objectives}: give one "
                             "(with objectives, the first is the objective)")
        self.objective = parsed.primary.text
        return self

    @property
    def objective_set(self) -> Objectives:
        """What the campaign minimises (:class:`hpo.objective.Objectives`)."""
        return Objectives.parse(self.objectives or [self.objective])

    @model_validator(mode="after")
    def _comparable_objectives(self) -> "CampaignConfig":
        if self.objective == "objective" and LOSS_FUNCTION_KEY in self.search_space:
            raise ValueError(
                f"search_space searches {LOSS_FUNCTION_KEY}, but objective 'objective' is each "
                "trial's validation loss in its own loss function (MSE, MAE, Gaussian NLL ...), not "
                "comparable across trials: use objective 'heads.<head>.val_mae' (or val_rmse)")
        return self

    @model_validator(mode="after")
    def _sizes_fit_nodes(self) -> "CampaignConfig":
        per_node = self.resources.slots_per_node
        for size in self.resources.slots_per_trial:
            if size > per_node and size % per_node:
                raise ValueError(
                    f"resources.slots_per_trial: {size} slots spans nodes but is not a multiple of "
                    f"slots_per_node ({per_node})"
                )
        return self

    @model_validator(mode="after")
    def _pbt_fits(self) -> "CampaignConfig":
        if self.optimizer.name != "pbt":
            return self
        if self.early_stopping.method != "none":
            raise ValueError(
                f"optimizer.name 'pbt' with early_stopping.method {self.early_stopping.method!r}: PBT "
                "replaces the worst trials itself (early discarding would end them); set "
                "early_stopping.method: none")
        if not perturbable_keys(self.space):
            raise ValueError(
                f"optimizer.name 'pbt': search_space has no key PBT may perturb (one of "
                f"{list(PERTURBABLE_KEYS)}); the others change the model's shape and are only inherited")
        try:
            options = PbtOptions.parse(self.optimizer.options)
        except PbtOptionError:
            return self  # validate_campaign reports it under optimizer.options
        if options.population is not None and options.population != self.max_trials:
            raise ValueError(f"optimizer.options.population {options.population} and max_trials "
                             f"{self.max_trials}: a PBT campaign's trials are its population (give one)")
        if self.objectives is not None:
            raise ValueError("optimizer.name 'pbt' ranks trials by one objective: use objective, not objectives")
        return self

    @property
    def pbt(self) -> Exploiter | None:
        """The exploit rule of a ``pbt`` campaign (:class:`hpo.pbt.Exploiter`), else None."""
        if self.optimizer.name != "pbt":
            return None
        return Exploiter(PbtOptions.parse(self.optimizer.options), self.space, self.seed)

    @property
    def moves_trials(self) -> bool:
        """Running trials may grow onto idle slots (``malleable``, "auto" resolved; "auto" is off
        for a ``pbt`` campaign, whose trials already stop and go on at its exploit epochs)."""
        if self.malleable == "auto":
            return self.trial_program == BUILTIN_TRIAL_PROGRAM and self.optimizer.name != "pbt"
        return self.malleable

    @property
    def space(self) -> SearchSpace:
        """The search space (parsed again: cheap, and the model stays plain data)."""
        return SearchSpace.from_dict(self.search_space)

    def load_base_config(self) -> dict[str, Any]:
        """The base HydraGNN config (JSON object)."""
        return _read_base_config(self.base_config)

    def frozen_dict(self) -> dict[str, Any]:
        """Plain-data form (JSON types, absolute paths, defaults filled) written by :func:`freeze`."""
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class FrozenCampaign:
    """The campaign a run of a campaign started with, as its journal (``campaign_started``) and
    ``campaign.yaml`` record it: the validated :class:`CampaignConfig` (without the checks that its
    files exist, so a copied directory reads) or, for a partial or foreign record, None; and what
    every reader needs from it, typed, in both cases."""

    data: Mapping[str, Any]  # as recorded (plain JSON types)
    config: CampaignConfig | None
    objectives: Objectives  # what it minimises (one key, or several)
    search_space: SearchSpace | None
    dataset: Path | None

    @property
    def objective(self) -> ObjectiveKey:
        """The (first) objective: it orders the trials."""
        return self.objectives.primary

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "FrozenCampaign":
        """Read a recorded campaign; the parts that do not validate are None (never an error: the
        record is history, and a journal of another version still reads)."""
        data = dict(data or {})
        try:
            config: CampaignConfig | None = CampaignConfig.model_validate(data)
        except ValidationError:
            config = None
        try:
            objective = ObjectiveKey.parse(str(data.get("objective", DEFAULT_OBJECTIVE)))
        except ValueError:
            objective = ObjectiveKey.parse(DEFAULT_OBJECTIVE)
        try:
            space = SearchSpace.from_dict(data["search_space"]) if data.get("search_space") else None
        except (SearchSpaceError, TypeError):
            space = None
        dataset = Path(data["dataset"]) if isinstance(data.get("dataset"), str) and data["dataset"] else None
        try:
            objectives = Objectives.parse(data.get("objectives") or [objective.text])
        except (ValueError, TypeError):
            objectives = Objectives((objective,))
        return cls(data, config, objectives, space, dataset)

    @classmethod
    def of(cls, config: CampaignConfig) -> "FrozenCampaign":
        """The frozen form of a validated campaign (what a run journals)."""
        return cls.from_dict(config.frozen_dict())

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


# -- loading ------------------------------------------------------------------------------------
def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the (nested) model at ``loc``, for 'did you mean' hints."""
    for part in loc:
        info = model.model_fields.get(str(part))
        annotation = getattr(info, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def _format_errors(source: Path, exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        where = ".".join(str(p) for p in loc) or "<top level>"
        if error["type"] == "extra_forbidden":
            known = _fields_at(CampaignConfig, loc[:-1])
            match = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.5)
            hint = f" (did you mean {match[0]!r}?)" if match else ""
            lines.append(f"unknown key {where!r}{hint}")
        elif error["type"] == "missing":
            lines.append(f"missing required key {where!r}")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"{where}: {message}")
    return f"{source}: " + "; ".join(lines)


def _read_base_config(path: Path) -> dict[str, Any]:
    try:
        with open(path) as fh:
            config = json.load(fh)
    except OSError as exc:
        raise CampaignConfigError(f"base_config {path}: cannot read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise CampaignConfigError(f"base_config {path}: not valid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise CampaignConfigError(f"base_config {path}: must hold a JSON object")
    return config


def validate_campaign(data: Mapping[str, Any], source: str | os.PathLike) -> CampaignConfig:
    """Validate campaign data (paths relative to ``source``'s folder) and check the files exist and
    the search-space keys lead into the base config."""
    source = Path(source)
    if not isinstance(data, Mapping):
        raise CampaignConfigError(f"{source}: must be a YAML mapping of campaign keys")
    data = dict(data)
    for key in ("dataset", "base_config"):
        if isinstance(data.get(key), str) and data[key]:
            data[key] = str((source.parent / os.path.expanduser(data[key])).resolve())
    resources = data.get("resources")
    if isinstance(resources, Mapping) and isinstance(resources.get("colocation_curve"), str):
        curve = str((source.parent / os.path.expanduser(resources["colocation_curve"])).resolve())
        data["resources"] = {**resources, "colocation_curve": curve}
    try:
        config = CampaignConfig.model_validate(data)
    except ValidationError as exc:
        raise CampaignConfigError(_format_errors(source, exc)) from None
    if not config.dataset.exists():
        raise CampaignConfigError(f"{source}: dataset: {config.dataset} does not exist")
    if not config.base_config.is_file():
        raise CampaignConfigError(f"{source}: base_config: {config.base_config} is not a file")
    curve = config.resources.colocation_curve
    if curve is not None and not curve.is_file():
        raise CampaignConfigError(f"{source}: resources.colocation_curve: {curve} is not a file")
    try:
        base = _read_base_config(config.base_config)
    except CampaignConfigError as exc:
        raise CampaignConfigError(f"{source}: {exc}") from None
    try:
        check_optimizer_options(config.optimizer.name, config.optimizer.options)
    except OptimizerOptionError as exc:
        raise CampaignConfigError(f"{source}: optimizer.options: {exc}") from None
    try:
        check_config_paths(base, list(config.search_space))
    except ConfigPathError as exc:
        raise CampaignConfigError(
            f"{source}: search_space: {exc} (in base_config {config.base_config})"
        ) from None
    if config.trial_program == BUILTIN_TRIAL_PROGRAM:
        problems = schema_problems(base, config)
        if problems:
            raise CampaignConfigError(f"{source}: " + "; ".join(problems))
    return config


def schema_problems(base: Mapping[str, Any], config: CampaignConfig) -> list[str]:
    """Every problem of the base config and the search-space keys against the trainer's schema."""
    from hydragnn_ensemble.config import ConfigError, check_dotted_key, config_from_dict

    problems: list[str] = []
    try:
        config_from_dict(base, str(config.base_config))
    except ConfigError as exc:
        problems += [f"base_config {config.base_config}: {e}" for e in exc.errors]
    for key in config.search_space:
        try:
            check_dotted_key(key)
        except ConfigError as exc:
            problems += [f"search_space: {e}" for e in exc.errors]
    return problems


def load_campaign(path: str | os.PathLike, overrides: Mapping[str, Any] | None = None) -> CampaignConfig:
    """Read and validate a campaign YAML file (paths resolved relative to it); ``overrides``
    replace top-level keys before validation (e.g. ``{"dataset": ...}`` from the command line)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise CampaignConfigError(f"{path}: cannot read campaign file ({exc.strerror})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CampaignConfigError(f"{path}: not valid YAML ({exc})") from exc
    if data is None:
        data = {}
    if overrides and isinstance(data, Mapping):
        data = {**data, **overrides}
    return validate_campaign(data, path)


# -- frozen copy ------------------------------------------------------------------------------------
def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def freeze(config: CampaignConfig, campaign_dir: str | os.PathLike) -> None:
    """Write ``campaign.yaml`` (frozen config) and ``base_config.json`` into ``campaign_dir``."""
    cdir = CampaignDir.at(campaign_dir)
    cdir.root.mkdir(parents=True, exist_ok=True)
    _write_atomic(cdir.campaign_yaml, yaml.safe_dump(config.frozen_dict(), sort_keys=False))
    _write_atomic(cdir.base_config, json.dumps(config.load_base_config(), indent=2) + "\n")


def load_frozen_dict(campaign_dir: str | os.PathLike) -> dict[str, Any]:
    """The frozen campaign of a campaign directory as plain data (no file checks, so it works on a
    copied directory)."""
    path = CampaignDir.at(campaign_dir).campaign_yaml
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CampaignConfigError(f"{path}: cannot read the frozen campaign ({exc})") from exc
    if not isinstance(data, dict):
        raise CampaignConfigError(f"{path}: the frozen campaign is not a mapping")
    return data


def dict_differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two nested mappings differ (a key only on one side, or another value)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in list(old) + [k for k in new if k not in old]:
            where = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                out.append(where)
            else:
                out.extend(dict_differences(old[key], new[key], where))
        return out
    return [] if old == new else [prefix or "<value>"]


def check_unchanged(
    config: CampaignConfig, campaign_dir: str | os.PathLike, allow: Iterable[str] = ()
) -> None:
    """Raise :class:`CampaignChangedError` listing the keys where ``config`` (or its base config's
    contents) differs from the frozen copy in ``campaign_dir``; top-level keys in ``allow`` may
    differ (e.g. ``max_trials`` to extend a campaign)."""
    campaign_dir = Path(campaign_dir)
    allowed = set(allow)
    frozen = load_frozen_dict(campaign_dir)
    try:  # a key added to the schema since it was frozen takes its default there too: no change
        frozen = CampaignConfig.model_validate(frozen).frozen_dict()
    except ValidationError:
        pass  # compared as recorded: every difference is named
    changed = [k for k in dict_differences(frozen, config.frozen_dict()) if k.split(".")[0] not in allowed]
    frozen_base_path = CampaignDir.at(campaign_dir).base_config
    try:
        frozen_base = json.loads(frozen_base_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CampaignChangedError(f"{frozen_base_path}: cannot read the frozen base config ({exc})") from exc
    changed += [f"base_config:{k}" for k in dict_differences(frozen_base, config.load_base_config())]
    if changed:
        raise CampaignChangedError(
            f"{campaign_dir}: the campaign differs from its frozen copy ({FROZEN_CAMPAIGN}, "
            f"{FROZEN_BASE_CONFIG}) in: {', '.join(changed)}. Resume with the original campaign, "
            "or start a new campaign directory."
        )
