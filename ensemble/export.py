"""Export the top-K configurations of a campaign (``hydragnn-ensemble export``).

For each of the K best completed trials the exported config is the campaign's base config with
the trial's searched values in place (``hpo.space.apply_params``); it must agree with the trial's
own ``trials/<id>/config.json`` (a disagreement is an error naming the trial and the keys).

Formats (``OUT_DIR`` always gets ``members.csv``, one row per trial: rank, trial id, objective,
searched values ``p:<key>``, per-head validation/test metrics ``m:<head>:<metric>``):

* ``hydragnn``: ``trial_<id>.json``, a HydraGNN JSON config that ``hydragnn_ensemble.config.
  load_config`` (and HydraGNN) reads; a member HydraGNN would build differently
  (:func:`hydragnn_mismatch`) gets no file and is named in :attr:`ExportResult.not_expressible`,
  a head a written config cannot hold (in potential mode every head but the energy and the forces:
  :attr:`ensemble.hydragnn_layout.ExportedHeads.left_out`) in :attr:`ExportResult.heads_left_out`;
  :meth:`ExportResult.left_out_lines` says each in one line (``export`` prints them on stdout);
* ``json`` / ``yaml``: ``top_k.json`` / ``top_k.yaml``: a list of {rank, trial_id, objective,
  params, metrics, config};
* ``csv``: the table only;
* ``optuna``: ``optuna_journal.log``, the whole campaign (every finished trial, not only the top K)
  as an Optuna journal storage (:mod:`hpo.optuna_study`): ``optuna-dashboard OUT_DIR/optuna_journal.log``
  or ``optuna.load_study(study_name="hydragnn-ensemble", storage=...)``.

``OUT_DIR`` may not be, contain or lie inside the campaign directory; if it exists and is not
empty it must be an earlier export (it holds ``members.csv``): anything else is never written into.
Trials that would have ranked among the K best by their reported objective but cannot be exported
(no result.json, checkpoint missing, ...) are returned in :attr:`ExportResult.excluded`.
"""

from __future__ import annotations

import csv
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ensemble.campaign import CampaignInfo, CampaignTrial, read_campaign
from graph_builders.schema import HeadRegistry
from ensemble.selection import select_topk
from hydragnn_ensemble.config import HydraConfig, config_from_dict
from hydragnn_ensemble.path_guard import PathGuardError, check_no_overlap, check_replaceable

FORMATS: tuple[str, ...] = ("hydragnn", "json", "yaml", "csv", "optuna")
#: The Optuna journal file ``--format optuna`` writes (``optuna-dashboard OUT_DIR/optuna_journal.log``).
OPTUNA_NAME = "optuna_journal.log"
TABLE_NAME = "members.csv"
#: The campaign's dataset in the layout the exported HydraGNN configs describe (``--with-dataset``).
DATASET_NAME = "hydragnn_dataset.bp"
#: Layers (lower case) HydraGNN trains as interatomic potentials on our edges (see hydragnn_mismatch).
POTENTIAL_LAYERS = frozenset({"egnn", "painn"})
#: ``max_neighbours`` written where a config has none (HydraGNN's examples' value; HydraGNN's model
#: factory reads it unconditionally, and it caps only graphs HydraGNN builds itself).
HYDRAGNN_MAX_NEIGHBOURS = 100


class ExportError(ValueError):
    """The campaign cannot be exported as asked (configs disagree, unknown format)."""


@dataclass
class ExportedTrial:
    """One exported trial."""

    rank: int
    trial_id: int
    objective: float
    params: dict[str, Any]
    metrics: dict[str, dict[str, Any]]
    config: dict[str, Any]


def trial_config(info: CampaignInfo, trial: CampaignTrial) -> dict[str, Any]:
    """The base config with the trial's values, checked against ``trials/<id>/config.json``."""
    from hpo.campaign import dict_differences
    from hpo.space import apply_params

    own = trial.config_dict() if trial.config_path.exists() else None
    if info.base_config is None:
        if own is None:
            raise ExportError(f"trial {trial.trial_id}: neither base_config.json nor {trial.config_path}")
        return own
    config = apply_params(info.base_config, trial.params)
    if own is not None:
        diffs = dict_differences(config, own)
        if diffs:
            raise ExportError(
                f"trial {trial.trial_id}: the base config with the trial's values differs from "
                f"{trial.config_path} at {', '.join(diffs[:10])}")
    return config


@dataclass(frozen=True)
class HeadLeftOut:
    """A head the written HydraGNN configs of ``trials`` do not hold, and why."""

    head: str
    trials: tuple[int, ...]
    reason: str


@dataclass
class ExportResult:
    """What an export wrote, the trials it had to leave out (best first), the exported trials
    whose HydraGNN config was not written (``(trial id, why)``) and the heads the written configs
    do not hold (format ``hydragnn`` only)."""

    files: list[Path]
    excluded: list[CampaignTrial]
    not_expressible: list[tuple[int, str]] = field(default_factory=list)
    heads_left_out: list[HeadLeftOut] = field(default_factory=list)

    def left_out_lines(self) -> list[str]:
        """One line per member and per head the HydraGNN export leaves out, with why."""
        lines = [f"left out: trial {trial_id}, no HydraGNN config written: {why}"
                 for trial_id, why in self.not_expressible]
        for head in self.heads_left_out:
            trials = ", ".join(str(t) for t in head.trials)
            lines.append(f"left out: head {head.head!r} of trial{'s' if len(head.trials) > 1 else ''} {trials} "
                         f"(the HydraGNN config predicts no {head.head}): {head.reason}")
        return lines


def for_hydragnn(config: dict[str, Any], layout: "DatasetLayout | None" = None) -> dict[str, Any]:
    """``config`` as HydraGNN reads it.

    The layer sizes HydraGNN requires but our loader defaults are written out, so HydraGNN builds
    the widths we trained: SchNet ``num_gaussians`` (ours: ``num_radial`` or 50) and ``num_filters``
    (ours: ``hidden_dim``), PaiNN ``num_radial`` (ours: ``num_gaussians`` or 50), and
    ``task_weights`` (ours: 1 per head) and ``max_neighbours`` (100, HydraGNN's examples' value; it
    caps only graphs HydraGNN builds itself): HydraGNN's model factory reads both unconditionally.
    Keys the config sets are kept. The values written are read from the config as this package
    loads it (:class:`hydragnn_ensemble.config.HydraConfig`: ``radial_size``, ``hidden_dim``, the
    task weights it fills in); they go into a copy of ``config``, so nothing else changes.

    With the campaign's dataset ``layout``: ``Variables_of_interest`` describes the heads in the
    HydraGNN-shaped copy of the dataset (:func:`ensemble.hydragnn_layout.hydragnn_config`), and a
    SchNet gets ``edge_features: [length]`` when the dataset's ``edge_attr`` is the one length
    column (ours ignores it; HydraGNN's SchNet then takes our edges, periodic images included,
    instead of building its own non-periodic radius graph)."""
    from ensemble.hydragnn_layout import exported_heads, hydragnn_config

    trained = _typed(config).architecture
    out = json.loads(json.dumps(config))
    if layout is not None:
        out = hydragnn_config(out, exported_heads(out, layout.heads, layout.input_width))
    arch = out["NeuralNetwork"]["Architecture"]
    arch.setdefault("task_weights", list(trained.task_weights or []))  # the loader's: 1 per head
    arch.setdefault("max_neighbours", HYDRAGNN_MAX_NEIGHBOURS)
    layer = trained.mpnn_type.lower()
    if layer == "schnet":
        arch.setdefault("num_gaussians", trained.radial_size)
        arch.setdefault("num_filters", trained.hidden_dim)
        if layout is not None and layout.edge_is_length and not trained.edge_features:
            arch["edge_features"] = ["length"]
    elif layer == "painn":
        arch.setdefault("num_radial", trained.radial_size)
    return out


def _typed(config: dict[str, Any]) -> HydraConfig:
    """``config`` as this package reads it (:class:`HydraConfig`); a config that does not load
    raises :class:`hydragnn_ensemble.config.ConfigError`. Its warnings (a key read differently
    here) were the trial's when it trained: an export does not repeat them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return config_from_dict(config)


@dataclass(frozen=True)
class DatasetLayout:
    """What an export reads of the campaign's dataset: its heads and the widths of x and edge_attr."""

    path: Path
    heads: HeadRegistry
    input_width: int
    edge_is_length: bool

    @classmethod
    def read(cls, path: Path | None) -> "DatasetLayout":
        """The layout of the dataset at ``path`` (its first sample's x and edge_attr)."""
        from graph_builders.store import open_dataset

        if path is None or not Path(path).exists():
            raise ExportError(f"--format hydragnn describes the heads in HydraGNN's terms from the campaign's "
                              f"dataset, which is not at {path}")
        with open_dataset(path) as store:
            sample = store.get(store.split_names[0], 0)
            return cls(Path(path), store.heads, int(sample.x.shape[1]), _edge_attr_is_length(sample))


def _edge_attr_is_length(sample) -> bool:
    """Whether ``sample``'s edge_attr is one column holding each edge's length."""
    from graph_builders.schema import edge_vectors

    edge_attr = getattr(sample, "edge_attr", None)
    if edge_attr is None or edge_attr.dim() != 2 or edge_attr.shape[1] != 1 or edge_attr.shape[0] == 0:
        return False
    lengths = edge_vectors(sample).norm(dim=1)
    return bool(((edge_attr[:, 0].double() - lengths.double()).abs() <= 1e-4 * (1 + lengths.double())).all())


def hydragnn_mismatch(config: dict[str, Any], layout: "DatasetLayout | None" = None) -> str | None:
    """Why HydraGNN would build a different model from ``config`` than we trained, or ``None``.

    A HydraGNN-shaped SchNet without edge features reads the edge length in its filter, as
    HydraGNN's does with the ``edge_features: [length]`` :func:`for_hydragnn` writes, which it can
    only where the dataset's ``edge_attr`` (``layout``) is that length.

    SchNet: ours filters ``hidden_dim`` wide and ignores ``num_filters``; a config setting another
    ``num_filters`` would give HydraGNN other filter widths.

    HydraGNN's ``update_config`` sets a CGCNN's ``hidden_dim`` to its ``input_dim`` (the number of
    ``input_node_features``) when no global attention is used: its CGConv keeps the input width.
    Our CGCNN embeds the input to ``hidden_dim`` first, so a member whose width differs from the
    input width has no HydraGNN equivalent (it would silently become a much smaller model there).

    Potential mode (forces by autograd): only HydraGNN's EGNN and PAINN take positions, with the
    periodic shifts, on our edges. Its SchNet refuses edge features with interatomic potentials and
    without them builds its own non-periodic radius graph; its GIN, PNA, CGCNN and GAT do not use
    positions at all (its autograd finds no gradient).
    """
    typed = _typed(config)
    arch = typed.architecture
    layer = arch.mpnn_type
    if typed.potential_mode and layer.lower() not in POTENTIAL_LAYERS:
        why = ("refuses edge features with interatomic potentials and without them builds its own "
               "non-periodic radius graph" if layer.lower() == "schnet" else "does not use positions, so "
               "it has no forces by autograd")
        return (f"potential mode with {layer}: HydraGNN's {layer} {why}; HydraGNN trains potentials "
                "from our files with EGNN or PAINN")
    if (layout is not None and layer.lower() == "schnet" and arch.hydragnn_shaped
            and not arch.edge_features and not layout.edge_is_length):
        return ("HydraGNN-shaped SchNet: its filter reads the edge length, as HydraGNN's SchNet does with "
                "edge_features [length], which needs the dataset's edge_attr to be the length (this one's is "
                "not; HydraGNN would build its own non-periodic radius graph)")
    filters = arch.num_filters
    if layer.lower() == "schnet" and filters is not None and filters != arch.hidden_dim:
        return (f"SchNet with num_filters {filters} != hidden_dim {arch.hidden_dim}: our SchNet's "
                "filters are hidden_dim wide (num_filters is not used here), HydraGNN's num_filters wide")
    if layer != "CGCNN" or arch.global_attn_engine:
        return None
    width = typed.variables.input_width
    hidden = arch.hidden_dim
    if hidden == width:
        return None
    return (f"CGCNN with hidden_dim {hidden}: HydraGNN's CGCNN without global attention keeps the "
            f"input width (hidden_dim := len(input_node_features) = {width}), so it would build a "
            "different model; use --format json/yaml for this member")


def is_export_dir(path: Path) -> bool:
    """True for a directory an earlier export wrote (``members.csv`` with its header)."""
    try:
        with open(path / TABLE_NAME) as fh:
            return fh.readline().startswith("rank,trial_id,objective")
    except OSError:
        return False


def collect(info: CampaignInfo, top_k: int) -> list[ExportedTrial]:
    """The ``top_k`` best completed trials with their configs."""
    chosen = select_topk(info, top_k)
    out = []
    for rank, trial_id in enumerate(chosen.trial_ids, start=1):
        trial = info.trials[trial_id]
        out.append(ExportedTrial(rank, trial_id, float(trial.objective), dict(trial.params),
                                 {h: vars(m) for h, m in trial.result.heads.items()},
                                 trial_config(info, trial)))
    return out


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _table(trials: list[ExportedTrial]) -> tuple[list[str], list[list[Any]]]:
    keys = list(dict.fromkeys(k for t in trials for k in t.params))
    metric_cols = list(dict.fromkeys(
        (h, m) for t in trials for h, ms in t.metrics.items() for m in ms if m != "unit"))
    header = ["rank", "trial_id", "objective"] + [f"p:{k}" for k in keys] + \
        [f"m:{h}:{m}" for h, m in metric_cols]
    rows = []
    for t in trials:
        rows.append([t.rank, t.trial_id, t.objective] + [t.params.get(k, "") for k in keys] +
                    [t.metrics.get(h, {}).get(m, "") for h, m in metric_cols])
    return header, rows


def write_table(trials: list[ExportedTrial], path: Path) -> Path:
    """``members.csv`` (atomic write)."""
    header, rows = _table(trials)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(["" if v is None else v for v in row] for row in rows)
    os.replace(tmp, path)
    return path


def _write_optuna(campaign_dir: Path, path: Path) -> Path:
    """The campaign as an Optuna journal file at ``path`` (replacing an earlier export's)."""
    from hpo.campaign_reader import read_campaign_dir
    from hpo.optuna_study import write_optuna_storage

    record = read_campaign_dir(campaign_dir)
    if record.state is None or record.frozen.search_space is None:
        raise ExportError(f"{campaign_dir}: no journal and search space to export as an Optuna study")
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    write_optuna_storage(record.state, record.frozen.search_space, tmp)
    os.replace(tmp, path)
    return path


def _write_hydragnn(trials: list[ExportedTrial], layout: DatasetLayout, out: Path,
                    result: ExportResult, with_dataset: bool, progress: bool = False) -> list[Path]:
    """One HydraGNN config per expressible trial (and the dataset copy they describe, with progress
    bars when ``progress``); the members and heads left out go into ``result``."""
    from ensemble.hydragnn_layout import ExportedHeads, exported_heads, write_hydragnn_dataset

    files: list[Path] = []
    head_sets: dict[tuple[str, ...], tuple[ExportedHeads, list[int]]] = {}
    dropped: dict[tuple[str, str], list[int]] = {}
    for t in trials:
        why = hydragnn_mismatch(t.config, layout)
        if why is not None:
            result.not_expressible.append((t.trial_id, why))
            continue
        path = out / f"trial_{t.trial_id}.json"
        _write_text(path, json.dumps(for_hydragnn(t.config, layout), indent=4) + "\n")
        files.append(path)
        heads = exported_heads(t.config, layout.heads, layout.input_width)
        for head, reason in heads.left_out.items():
            dropped.setdefault((head, reason), []).append(t.trial_id)
        names = tuple(h.name for h in heads.ordered) + (("potential",) if heads.energy else ())
        head_sets.setdefault(names, (heads, []))[1].append(t.trial_id)
    if with_dataset and head_sets:
        if len(head_sets) > 1:
            raise ExportError("--with-dataset: the exported trials predict different heads ("
                              + "; ".join(f"trials {ids}: {list(names)}" for names, (_, ids) in head_sets.items())
                              + "); export them separately")
        heads = next(iter(head_sets.values()))[0]
        files.append(write_hydragnn_dataset(layout.path, heads, out / DATASET_NAME, progress=progress))
    result.heads_left_out.extend(HeadLeftOut(head, tuple(ids), reason) for (head, reason), ids in dropped.items())
    return files


def export_top_k(campaign_dir: str | os.PathLike, top_k: int, fmt: str,
                 out_dir: str | os.PathLike, with_dataset: bool = False, progress: bool = False) -> ExportResult:
    """Write the top-K configs in ``fmt`` and ``members.csv`` into ``out_dir``; with
    ``with_dataset`` (format ``hydragnn``) also :data:`DATASET_NAME`, the campaign's dataset in the
    layout the configs describe (:mod:`ensemble.hydragnn_layout`), with progress bars when
    ``progress``."""
    if with_dataset and fmt != "hydragnn":
        raise ExportError("--with-dataset goes with --format hydragnn")
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    out = Path(out_dir)
    try:
        check_no_overlap(out, [Path(campaign_dir)], "export directory")
        check_replaceable(out, is_export_dir, "export directory")
    except PathGuardError as exc:
        raise ExportError(str(exc)) from None
    info = read_campaign(campaign_dir)
    trials = collect(info, top_k)
    out.mkdir(parents=True, exist_ok=True)
    files = [write_table(trials, out / TABLE_NAME)]
    records = [{"rank": t.rank, "trial_id": t.trial_id, "objective": t.objective, "params": t.params,
                "metrics": t.metrics, "config": t.config} for t in trials]
    result = ExportResult(files, info.excluded_among_best(top_k))
    if fmt == "hydragnn":
        files += _write_hydragnn(trials, DatasetLayout.read(info.dataset), out, result, with_dataset, progress)
    elif fmt == "json":
        path = out / "top_k.json"
        _write_text(path, json.dumps(records, indent=2) + "\n")
        files.append(path)
    elif fmt == "yaml":
        import yaml

        path = out / "top_k.yaml"
        _write_text(path, yaml.safe_dump(records, sort_keys=False))
        files.append(path)
    elif fmt == "optuna":
        files.append(_write_optuna(Path(campaign_dir), out / OPTUNA_NAME))
    return result
