"""What the model builder needs, independent of the JSON config (which ``hydragnn_ensemble.config``
parses and turns into a :class:`ModelSpec`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_builders.schema import HeadRegistry


@dataclass(frozen=True)
class GraphHeadSpec:
    """HydraGNN ``output_heads.graph``: shared MLP after pooling, then one MLP per graph head."""

    num_sharedlayers: int = 2
    dim_sharedlayers: int = 64
    num_headlayers: int = 2
    dim_headlayers: tuple[int, ...] = (64, 64)


@dataclass(frozen=True)
class NodeHeadSpec:
    """HydraGNN ``output_heads.node``: one per-node MLP per node head."""

    num_headlayers: int = 2
    dim_headlayers: tuple[int, ...] = (64, 64)


@dataclass(frozen=True)
class ModelSpec:
    """All the model builder reads.

    ``heads`` are the heads the model predicts (a subset of the dataset's registry, in output order);
    ``node_feature_dim`` is ``x.shape[1]``; ``edge_dim`` is ``edge_attr.shape[1]`` (0 when unused).
    ``energy_head``, when set, names a graph head treated as a potential energy: forces are
    ``-dE/dpos`` (written to ``forces_head``) and stress from a cell strain (``stress_head``);
    ``energy_per_atom`` says whether that head (and its labels) is the energy per atom or the
    total energy of the structure (the head's unit decides: ``eV/atom`` or ``eV``).
    """

    mpnn_type: str
    hidden_dim: int
    num_conv_layers: int
    heads: HeadRegistry
    node_feature_dim: int
    edge_dim: int = 0
    radius: float = 5.0
    num_gaussians: int = 50
    activation: str = "relu"
    graph_pooling: str = "mean"
    use_atomic_numbers: bool = True
    graph_head: GraphHeadSpec = field(default_factory=GraphHeadSpec)
    node_head: NodeHeadSpec = field(default_factory=NodeHeadSpec)
    energy_head: str | None = None
    forces_head: str | None = None
    stress_head: str | None = None
    #: the energy head is per atom (True) or the structure's total (False); True is the default so
    #: that specs saved before the option rebuild as they were trained (per atom)
    energy_per_atom: bool = True
    predict_variance: bool = False
    pna_degree_histogram: tuple[int, ...] | None = None
    #: EGNN moves its coordinates between layers (HydraGNN's ``equivariance``; the configuration's
    #: default is HydraGNN's False, this default keeps specs saved before the option rebuilding as trained)
    equivariance: bool = True
    #: HydraGNN's shapes: no embedding, the first layer reads the raw node features ``x`` (so an
    #: exported member and HydraGNN's rebuild of its config have the same parameter count); only
    #: for layer families that take a narrower input (``ConvLayer.reads_raw_input``)
    hydragnn_shaped: bool = False
    #: EGNN and CGCNN multiply their messages by a linear filter of the radial basis (they learn forces
    #: as potentials only so; HydraGNN-shaped EGNN never has it). Specs saved before the option lack the
    #: key and load as False for those two (:func:`~hydragnn_ensemble.train.checkpoint.spec_from_dict`)
    radial_filter: bool = True
