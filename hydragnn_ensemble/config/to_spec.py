"""From a validated config plus what the dataset says (head registry, feature widths, degree
histogram) to the :class:`~hydragnn_ensemble.model.spec.ModelSpec` the model builder takes."""

from __future__ import annotations

from typing import Sequence

from graph_builders.schema import HeadRegistry, energy_unit
from hydragnn_ensemble.config.load import ConfigError
from hydragnn_ensemble.config.schema import PNA_MPNN_TYPES, HydraConfig
from hydragnn_ensemble.model.spec import GraphHeadSpec, ModelSpec, NodeHeadSpec

DEFAULT_RADIUS = 5.0
SOURCE = "config"


def _registry_table(heads: HeadRegistry) -> str:
    return ", ".join(f"{h.name} ({h.level}, dim {h.dim})" for h in heads) or "(no heads)"


def validate_against_heads(config: HydraConfig, heads: HeadRegistry, source: str = SOURCE) -> None:
    """Each ``output_names`` entry must be a head of the dataset with the same level and dim.

    Raises :class:`ConfigError` naming the head and showing the dataset's registry."""
    voi = config.variables
    errors = []
    registry = [h.name for h in heads]
    for i, name in enumerate(voi.names_in(registry)):
        where = f"NeuralNetwork.Variables_of_interest.output_names[{i}]"
        if isinstance(name, int):
            errors.append(f"NeuralNetwork.Variables_of_interest.output_index[{i}]: {name} is not a head "
                          f"of the dataset (it has {len(registry)}); dataset heads: {_registry_table(heads)}")
            continue
        if name not in heads:
            errors.append(f"{where}: head {name!r} is not in the dataset; dataset heads: "
                          f"{_registry_table(heads)}")
            continue
        head = heads[name]
        if voi.type[i] != head.level:
            errors.append(f"{where}: head {name!r} is a {head.level} head in the dataset but type[{i}] "
                          f"is {voi.type[i]!r}; dataset heads: {_registry_table(heads)}")
        if voi.output_dim is not None and voi.output_dim[i] != head.dim:
            errors.append(f"{where}: head {name!r} has dim {head.dim} in the dataset but "
                          f"output_dim[{i}] is {voi.output_dim[i]}; dataset heads: "
                          f"{_registry_table(heads)}")
    if errors:
        raise ConfigError(source, errors)


def selected_heads(config: HydraConfig, heads: HeadRegistry) -> HeadRegistry:
    """The dataset heads the config predicts, in ``output_names`` (or ``output_index``) order."""
    validate_against_heads(config, heads)
    return HeadRegistry.of(heads[name] for name in config.variables.names_in([h.name for h in heads]))


def potential_heads(config: HydraConfig, heads: HeadRegistry) -> tuple[str | None, str | None, str | None]:
    """``(energy, forces, stress)`` head names in potential mode (all None otherwise).

    The energy is the first graph head of dim 1, forces the node head of dim 3 and stress the
    graph head of dim 6 among the predicted heads (forces and stress optional)."""
    if not config.potential_mode:
        return None, None, None
    energy = next((h.name for h in heads if h.level == "graph" and h.dim == 1), None)
    if energy is None:
        raise ConfigError(SOURCE, [
            "NeuralNetwork.Training.compute_grad_energy: potential mode needs a graph head of dim 1 "
            f"(the energy) among the predicted heads: {_registry_table(heads)}"])
    forces = next((h.name for h in heads if h.level == "node" and h.dim == 3), None)
    stress = next((h.name for h in heads if h.level == "graph" and h.dim == 6), None)
    energy_is_per_atom(heads[energy])  # refuses a head whose unit does not say total or per atom
    return energy, forces, stress


def energy_is_per_atom(head) -> bool:
    """Whether the potential-mode energy ``head`` (a HeadSpec) is per atom (unit ``eV/atom``) or
    the structure's total (``eV``); :class:`ConfigError` when its unit is not an energy unit."""
    unit = energy_unit(head.unit)
    if unit is None:
        raise ConfigError(SOURCE, [
            f"NeuralNetwork.Training.compute_grad_energy: the energy head {head.name!r} has unit "
            f"{head.unit!r}, which does not say whether it is the structure's total energy ('eV') or the "
            "energy per atom ('eV/atom'); set the head's unit when building the dataset "
            f"(build-graphs --units {head.name}=eV)"])
    return unit.per_atom


def builder_layer_name(mpnn_type: str) -> str | None:
    """The model builder's registry name for a HydraGNN ``mpnn_type`` (names may differ in case,
    e.g. HydraGNN's ``PAINN`` is the builder's ``PaiNN``); None when the builder has no such layer."""
    from hydragnn_ensemble.model import MPNN_TYPES

    return {name.lower(): name for name in MPNN_TYPES}.get(mpnn_type.lower())


def _build_problems(config: HydraConfig, layer_name: str | None, node_feature_dim: int,
                    degree_histogram: Sequence[int] | None) -> list[str]:
    """What stops the builder from making ``config``'s model on this dataset (all at once)."""
    from hydragnn_ensemble.model import MPNN_TYPES

    arch, voi = config.architecture, config.variables
    errors = []
    if layer_name is None:
        errors.append(f"NeuralNetwork.Architecture.mpnn_type: {arch.mpnn_type!r} is a HydraGNN layer "
                      f"this package does not build; available: {', '.join(MPNN_TYPES)}")
    bad_cols = [c for c in voi.input_node_features if c >= node_feature_dim]
    if bad_cols:
        errors.append(f"NeuralNetwork.Variables_of_interest.input_node_features: columns {bad_cols} "
                      f"do not exist; the dataset's x has {node_feature_dim} column(s)")
    if arch.global_attn_engine:
        errors.append("NeuralNetwork.Architecture.global_attn_engine: global attention is not "
                      "available in this package's model; set it to null")
    if arch.output_heads.node is not None and arch.output_heads.node.type != "mlp" and "node" in voi.type:
        errors.append(f"NeuralNetwork.Architecture.output_heads.node.type: {arch.output_heads.node.type!r} "
                      "is not available; use 'mlp'")
    hist = degree_histogram if degree_histogram is not None else arch.pna_deg
    if arch.mpnn_type in PNA_MPNN_TYPES and not hist:
        errors.append(f"NeuralNetwork.Architecture.pna_deg: {arch.mpnn_type} needs a degree histogram "
                      "(pass the training split's, or set pna_deg)")
    return errors


def config_to_model_spec(
    config: HydraConfig,
    heads: HeadRegistry,
    node_feature_dim: int,
    edge_dim: int,
    degree_histogram: Sequence[int] | None = None,
    *,
    use_atomic_numbers: bool = True,
    radius: float | None = None,
) -> ModelSpec:
    """The :class:`ModelSpec` for ``config`` on a dataset with ``heads``.

    ``node_feature_dim``/``edge_dim`` are the dataset's ``x``/``edge_attr`` widths;
    ``input_node_features`` selects columns of ``x`` and ``edge_attr`` is used only when
    ``edge_features`` is non-empty (as in HydraGNN). ``degree_histogram`` (in-degree counts over
    the training split) is required for PNA unless the config has ``pna_deg``.
    ``use_atomic_numbers``: the dataset carries ``z``; ``radius``: the dataset's graph radius, used
    when the config has none.
    """
    arch, voi = config.architecture, config.variables
    layer_name = builder_layer_name(arch.mpnn_type)
    errors = _build_problems(config, layer_name, node_feature_dim, degree_histogram)
    if errors:
        raise ConfigError(SOURCE, errors)
    hist = degree_histogram if degree_histogram is not None else arch.pna_deg

    predicted = selected_heads(config, heads)
    energy, forces, stress = potential_heads(config, predicted)
    g, n = arch.output_heads.graph, arch.output_heads.node
    return ModelSpec(
        mpnn_type=layer_name,
        hidden_dim=arch.hidden_dim,
        num_conv_layers=arch.num_conv_layers,
        heads=predicted,
        node_feature_dim=voi.input_width,
        edge_dim=int(edge_dim) if arch.edge_features else 0,
        radius=float(arch.radius if arch.radius is not None else (radius or DEFAULT_RADIUS)),
        num_gaussians=arch.radial_size,
        activation=arch.activation_function,
        graph_pooling=arch.graph_pooling,
        use_atomic_numbers=use_atomic_numbers,
        graph_head=GraphHeadSpec(g.num_sharedlayers, g.dim_sharedlayers, g.num_headlayers,
                                 tuple(g.dim_headlayers)) if g else GraphHeadSpec(),
        node_head=NodeHeadSpec(n.num_headlayers, tuple(n.dim_headlayers)) if n else NodeHeadSpec(),
        energy_head=energy,
        energy_per_atom=energy_is_per_atom(predicted[energy]) if energy is not None else True,
        forces_head=forces,
        stress_head=stress,
        predict_variance=config.training.loss_function_type == "GaussianNLLLoss",
        pna_degree_histogram=tuple(int(v) for v in hist) if (hist and arch.mpnn_type in PNA_MPNN_TYPES) else None,
        equivariance=bool(arch.equivariance),
        hydragnn_shaped=arch.hydragnn_shaped,
    )
