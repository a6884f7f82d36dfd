"""A HydraGNN config against a dataset, before any data is prepared: the one check the trainer runs
at the start of every trial and a campaign's rank 0 runs on every configuration its search space can
give before the first trial (so a head name the dataset lacks is refused once, not in every trial).

:func:`dataset_facts` reads what the check needs from a dataset file or graph source (head registry,
the width of ``x``, the graph cutoff); :func:`config_problems` lists the errors (the trial could not
train) and the warnings (it would, but maybe not as meant), each naming the config key.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from graph_builders.schema import HeadRegistry
from hydragnn_ensemble.config import ConfigError, HydraConfig


@dataclass(frozen=True)
class DatasetFacts:
    """What a config is checked against: the dataset's heads, its ``x`` width (-1 when unknown),
    the radius its graphs were built with (None when not recorded) and where it came from."""

    heads: HeadRegistry
    x_width: int = -1
    cutoff: float | None = None
    where: str = "dataset"


@dataclass
class ConfigCheck:
    """The problems of one config on one dataset: ``errors`` stop a trial, ``warnings`` do not."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def raise_errors(self, source: str) -> None:
        """:class:`ConfigError` with every error, when there is one."""
        if self.errors:
            raise ConfigError(source, self.errors)


def dataset_facts(source: Any, where: str | None = None) -> DatasetFacts:
    """The facts of a dataset file (``.bp`` path, opened and closed here) or of an open graph source
    (anything with ``heads``, ``metadata``, ``num_graphs`` and ``dataset``, e.g. the trainer's)."""
    if isinstance(source, (str, os.PathLike)):
        from graph_builders.store import open_dataset

        with open_dataset(source) as store:
            first = store.get("trainset", 0) if "trainset" in store.split_names and store.num_graphs("trainset") else None
            return _facts(store.heads, store.metadata, first, where or str(source))
    first = source.dataset("trainset")[0] if source.num_graphs("trainset") > 0 else None
    return _facts(source.heads, getattr(source, "metadata", None) or {}, first, where or type(source).__name__)


def _facts(heads: HeadRegistry, metadata: dict, first: Any, where: str) -> DatasetFacts:
    x = getattr(first, "x", None)
    width = int(x.shape[1]) if x is not None and x.dim() == 2 else (-1 if first is None else 0)
    cutoff = metadata.get("cutoff")
    return DatasetFacts(heads, width, float(cutoff) if isinstance(cutoff, (int, float)) else None, where)


def config_problems(config: HydraConfig, facts: DatasetFacts) -> ConfigCheck:
    """Every problem of ``config`` on the dataset of ``facts`` (heads: names, levels, dims, the
    potential-mode energy and its unit; the layer; input columns; the radius)."""
    from hydragnn_ensemble.config.to_spec import (
        builder_layer_name,
        potential_heads,
        selected_heads,
        validate_against_heads,
    )
    from hydragnn_ensemble.model import MPNN_TYPES

    check = ConfigCheck()
    try:
        validate_against_heads(config, facts.heads, source=facts.where)
    except ConfigError as exc:
        check.errors += exc.errors
    arch = config.architecture
    if builder_layer_name(arch.mpnn_type) is None:
        check.errors.append(f"NeuralNetwork.Architecture.mpnn_type: {arch.mpnn_type!r} is not built by this "
                            f"package; available: {', '.join(MPNN_TYPES)}")
    layer = builder_layer_name(arch.mpnn_type)
    if layer is not None and config.potential_mode and not _sees_positions(layer):
        geometric = ", ".join(n for n in MPNN_TYPES if _sees_positions(n))
        check.errors.append(f"NeuralNetwork.Architecture.mpnn_type: {arch.mpnn_type} does not see the atoms' "
                            "positions, so in potential mode (compute_grad_energy) its forces and stress would be "
                            f"zero; use one of {geometric}")
    if layer is not None and config.potential_mode and arch.hydragnn_shaped and _unfiltered_when_shaped(layer):
        check.errors.append(f"NeuralNetwork.Architecture.hydragnn_shaped: HydraGNN's {arch.mpnn_type} reads the edge "
                            "length only as one more input of its edge MLP, with no radial filter on its messages "
                            f"(this package's {arch.mpnn_type} has one), so in potential mode (compute_grad_energy) its "
                            "forces train to zero, the error of the trivial predictor (bench/potential_layers.py); "
                            f"use {arch.mpnn_type} without hydragnn_shaped, or PaiNN or SchNet")
    if layer is not None and arch.hydragnn_shaped and not _shapeable(layer):
        check.errors.append(f"NeuralNetwork.Architecture.hydragnn_shaped: not built for {arch.mpnn_type} (its layers "
                            "differ from HydraGNN's inside); available for "
                            + ", ".join(n for n in MPNN_TYPES if _shapeable(n)))
    if not check.errors:  # the potential-mode heads are looked for among valid heads only
        try:
            potential_heads(config, selected_heads(config, facts.heads))
        except ConfigError as exc:
            check.errors += exc.errors
    if facts.x_width >= 0:
        bad = [c for c in config.variables.input_node_features if not 0 <= c < facts.x_width]
        if bad:
            check.errors.append(f"NeuralNetwork.Variables_of_interest.input_node_features: columns {bad} do not "
                                f"exist; the dataset's x has {facts.x_width} column(s) (0..{facts.x_width - 1})")
    warning = radius_mismatch(arch.radius, facts.cutoff)
    if warning:
        check.warnings.append(warning)
    return check


def _shapeable(layer_name: str) -> bool:
    from hydragnn_ensemble.model.layers import layer_class

    return bool(layer_class(layer_name).reads_raw_input)


def _unfiltered_when_shaped(layer_name: str) -> bool:
    """The family learns forces only with its radial filter, which its HydraGNN shape lacks (EGNN)."""
    from hydragnn_ensemble.model.layers import layer_class

    cls = layer_class(layer_name)
    return bool(cls.radial_filter_option and cls.reads_raw_input)


def _sees_positions(layer_name: str) -> bool:
    from hydragnn_ensemble.model.layers import layer_class

    return bool(layer_class(layer_name).needs_geometry)


def radius_mismatch(config_radius: float | None, dataset_cutoff: Any) -> str | None:
    """A warning when the config's ``radius`` differs from the cutoff the dataset's graphs were built
    with: the edges are the dataset's, so a larger radius never sees the pairs between the two
    and a smaller one zeroes the messages of the pairs beyond it."""
    if config_radius is None or not isinstance(dataset_cutoff, (int, float)):
        return None
    if math.isclose(float(config_radius), float(dataset_cutoff), rel_tol=1e-6):
        return None
    effect = ("pairs between the two are not in the graphs" if config_radius > dataset_cutoff
              else "edges beyond the radius carry no message (the cutoff function is 0 there)")
    return (f"NeuralNetwork.Architecture.radius {config_radius} differs from the dataset's graph cutoff "
            f"{float(dataset_cutoff)}: {effect}; rebuild the graphs or set radius to the cutoff")
