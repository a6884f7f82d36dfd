"""HydraGNN's JSON configuration as typed pydantic models.

The layout and key names mirror HydraGNN (``ORNL/HydraGNN``, e.g. ``examples/qm9/qm9.json``,
``examples/multidataset_hpo/gfm_*.json``): a config written for HydraGNN loads here, and one saved
from here loads in HydraGNN. Every key HydraGNN knows is accepted; the field docstrings say which
ones this package *uses* and which it only carries along (marked "accepted, not used").

Keys that exist only here (our additions) all live in ``NeuralNetwork.Training`` and
``NeuralNetwork.Training.Optimizer`` and are listed in :data:`EXTENSION_KEYS`; HydraGNN ignores
unknown keys in those sections, so configs saved from here still load there.

Unknown keys are rejected by :func:`hydragnn_ensemble.config.load.check_unknown_keys` (with a
"did you mean" suggestion) before pydantic sees the data; the models themselves also forbid extras.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Message-passing layers HydraGNN knows (``hydragnn/models/create.py``), spelled as HydraGNN does.
HYDRAGNN_MPNN_TYPES: tuple[str, ...] = (
    "GIN", "PNA", "PNAPlus", "GAT", "MFC", "CGCNN", "SAGE", "SchNet", "DimeNet", "EGNN",
    "PAINN", "PNAEq", "MACE",
)
#: Layers HydraGNN accepts ``equivariance: true`` for (``update_config_equivariance``).
EQUIVARIANT_MPNN_TYPES: tuple[str, ...] = ("EGNN", "SchNet", "PNAEq", "PAINN", "MACE")
#: Layers that need a degree histogram (``pna_deg``).
PNA_MPNN_TYPES: tuple[str, ...] = ("PNA", "PNAPlus", "PNAEq")
ACTIVATIONS: tuple[str, ...] = (
    "relu", "selu", "prelu", "elu", "lrelu_01", "lrelu_025", "lrelu_05", "silu", "gelu", "tanh",
    "softplus", "sigmoid", "leaky_relu",
)
LOSS_FUNCTIONS: tuple[str, ...] = ("mse", "mae", "rmse", "GaussianNLLLoss")
OPTIMIZERS: tuple[str, ...] = ("AdamW", "Adam", "SGD", "RMSprop")
LR_SCHEDULES: tuple[str, ...] = ("plateau", "cosine", "none")
POOLINGS: tuple[str, ...] = ("mean", "add", "sum", "max")
#: Radial basis functions per edge when the config sets neither ``num_gaussians`` nor ``num_radial``.
DEFAULT_NUM_GAUSSIANS = 50

#: Dotted keys that are our additions (not HydraGNN keys); HydraGNN ignores them.
EXTENSION_KEYS: tuple[str, ...] = (
    "NeuralNetwork.Training.seed",
    "NeuralNetwork.Training.time_budget_s",
    "NeuralNetwork.Training.lr_schedule",
    "NeuralNetwork.Training.skip_nan_targets",
    "NeuralNetwork.Training.mixed_precision",
    "NeuralNetwork.Training.preload",
    "NeuralNetwork.Training.Optimizer.weight_decay",
)


class _Section(BaseModel):
    """Common settings: unknown keys forbidden, assignment validated, JSON names by alias."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)


def _positive(name: str, value: int | float | None) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{name} must be > 0 (got {value})")


def _choice(name: str, value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        import difflib

        close = difflib.get_close_matches(value, valid, n=1, cutoff=0.5)
        lower = [v for v in valid if v.lower() == value.lower()]
        hint = f"did you mean {(lower or close)[0]!r}? " if (lower or close) else ""
        raise ValueError(f"unknown {name} {value!r}; {hint}valid: {', '.join(valid)}")
    return value


class VerbositySection(_Section):
    """HydraGNN ``Verbosity``: accepted, not used (our log is ``RUN_DIR/train.log``)."""

    level: int = 2


class VisualizationSection(_Section):
    """HydraGNN ``Visualization``: accepted, not used (no plots during trials)."""

    plot_init_solution: bool = False
    plot_hist_solution: bool = False
    create_plots: bool = False


class GraphHeadsSection(_Section):
    """``output_heads.graph``: shared MLP after pooling, then one MLP per graph head. Used."""

    num_sharedlayers: int = 2
    dim_sharedlayers: int = 64
    num_headlayers: int = 2
    dim_headlayers: list[int] = Field(default_factory=lambda: [64, 64])
    type: Literal["mlp"] = "mlp"  # HydraGNN writes it for graph heads too; MLP is the only kind

    @model_validator(mode="after")
    def _check(self) -> "GraphHeadsSection":
        _positive("num_sharedlayers", self.num_sharedlayers)
        _positive("dim_sharedlayers", self.dim_sharedlayers)
        _check_head_layers(self.num_headlayers, self.dim_headlayers)
        return self


def _check_head_layers(num_headlayers: int, dim_headlayers: list[int]) -> None:
    """``num_headlayers`` > 0 and one positive width per layer in ``dim_headlayers``."""
    _positive("num_headlayers", num_headlayers)
    if len(dim_headlayers) != num_headlayers:
        raise ValueError(
            f"dim_headlayers has {len(dim_headlayers)} entries but num_headlayers is {num_headlayers}"
        )
    for d in dim_headlayers:
        _positive("every dim_headlayers entry", d)


class NodeHeadsSection(_Section):
    """``output_heads.node``: one per-node MLP per node head. Used; ``type`` must be ``"mlp"``
    for our builder (HydraGNN's ``"mlp_per_node"`` and ``"conv"`` are accepted by the schema and
    rejected when a model is built)."""

    num_headlayers: int = 2
    dim_headlayers: list[int] = Field(default_factory=lambda: [64, 64])
    type: Literal["mlp", "mlp_per_node", "conv"] = "mlp"

    @model_validator(mode="after")
    def _check(self) -> "NodeHeadsSection":
        _check_head_layers(self.num_headlayers, self.dim_headlayers)
        return self


class OutputHeads(_Section):
    """``output_heads``: the graph-level and node-level head architectures.

    HydraGNN's multi-branch form (a list of ``{"type": "branch-<k>", "architecture": {...}}``, one
    head set per dataset branch) is read when it has one branch (its architecture is the head);
    several branches are refused: this package trains one head set."""

    graph: GraphHeadsSection | None = None
    node: NodeHeadsSection | None = None

    @field_validator("graph", "node", mode="before")
    @classmethod
    def _one_branch(cls, value: Any, info) -> Any:
        if not isinstance(value, list):
            return value
        branches = [b.get("type") if isinstance(b, dict) else b for b in value]
        if len(value) != 1 or not isinstance(value[0], dict) or not isinstance(value[0].get("architecture"), dict):
            raise ValueError(f"multi-branch heads ({len(value)} branches: {branches}) are not supported: "
                             "this package trains one head set; keep one branch")
        arch = dict(value[0]["architecture"])
        if info.field_name == "graph":
            arch.pop("type", None)  # HydraGNN writes the graph head's type ("mlp"); it has no other
        return arch


class ArchitectureSection(_Section):
    """``NeuralNetwork.Architecture``.

    Used: ``mpnn_type``, ``hidden_dim``, ``num_conv_layers``, ``output_heads``, ``task_weights``,
    ``radius``, ``num_gaussians`` (``num_radial`` when unset), ``edge_features`` (non-empty: the
    dataset's ``edge_attr`` is fed to the layers), ``activation_function``, ``graph_pooling``,
    ``pna_deg`` (degree histogram for PNA; computed from the training split when unset),
    ``enable_interatomic_potential`` (same as ``Training.compute_grad_energy``), and ours,
    ``hydragnn_shaped`` (GIN, EGNN, SchNet: no embedding, the first layer reads the raw node
    features and the layers are built as HydraGNN's, so HydraGNN's rebuild of the config has the
    same parameter count; HydraGNN ignores the key).

    Accepted, not used: HydraGNN's MLIP loss weights ``energy_weight``, ``energy_peratom_weight``,
    ``force_weight`` (potential mode here weights the energy and forces heads by ``task_weights``);
    ``graph_attr_conditioning_mode`` (``use_graph_attr_conditioning: true`` is refused: not
    available here). ``equivariance: true`` on a layer that is not equivariant is ignored with a
    warning, as HydraGNN does; ``null`` (as HydraGNN writes it back) is false.
    Accepted, not used (graphs are built before training, or the layer is fixed by our builder):
    ``max_neighbours``, ``periodic_boundary_conditions``, ``num_filters``, ``envelope_exponent``,
    ``num_spherical``, ``int_emb_size``, ``basis_emb_size``, ``out_emb_size``, ``num_after_skip``,
    ``num_before_skip``, ``radial_type``, ``distance_transform``, ``correlation``, ``max_ell``,
    ``node_max_ell``, ``avg_num_neighbors``, ``equivariance`` (checked like HydraGNN does),
    ``initial_bias``, ``freeze_conv_layers``, ``SyncBatchNorm``, ``pe_dim``, ``global_attn_heads``,
    ``enable_atomistic_species_encoding`` and the keys HydraGNN writes into the config it saves
    (``input_dim``, ``output_dim``, ``output_type``, ``num_nodes``, ``edge_dim``, and the settings
    of its equivariant global attention ``equivariant_attn_*``, which it writes with defaults).
    ``global_attn_engine``/``global_attn_type`` are accepted but a model with global attention is
    refused when built (our builder has none).
    """

    mpnn_type: str
    hidden_dim: int
    num_conv_layers: int
    output_heads: OutputHeads
    task_weights: list[float] | None = None
    radius: float | None = None
    max_neighbours: int | None = None
    periodic_boundary_conditions: bool = False
    num_gaussians: int | None = None
    num_filters: int | None = None
    envelope_exponent: int | None = None
    num_radial: int | None = None
    num_spherical: int | None = None
    int_emb_size: int | None = None
    basis_emb_size: int | None = None
    out_emb_size: int | None = None
    num_after_skip: int | None = None
    num_before_skip: int | None = None
    radial_type: str | None = None
    distance_transform: str | None = None
    correlation: int | list[int] | None = None
    max_ell: int | None = None
    node_max_ell: int | None = None
    avg_num_neighbors: float | None = None
    edge_features: list[str] | None = None
    equivariance: bool | None = False
    hydragnn_shaped: bool = False
    activation_function: str = "relu"
    graph_pooling: str = "mean"
    global_attn_engine: str | None = None
    global_attn_type: str | None = None
    global_attn_heads: int = 0
    equivariant_attn_lmax: int | None = None
    equivariant_attn_num_radial: int | None = None
    equivariant_attn_feedforward_multiplier: float | None = None
    equivariant_attn_allow_scalar_only: bool | None = None
    equivariant_attn_require_tensor_coupling: bool | None = None
    equivariant_attn_chunk_size: int | None = None
    equivariant_attn_coupling_mode: str | None = None
    pe_dim: int = 0
    initial_bias: float | None = None
    freeze_conv_layers: bool = False
    SyncBatchNorm: bool = False
    enable_interatomic_potential: bool = False
    enable_atomistic_species_encoding: bool | None = None
    pna_deg: list[int] | None = None
    energy_weight: float | None = None
    energy_peratom_weight: float | None = None
    force_weight: float | None = None
    use_graph_attr_conditioning: bool = False
    graph_attr_conditioning_mode: str | None = None
    input_dim: int | None = None
    output_dim: list[int] | None = None
    output_type: list[str] | None = None
    num_nodes: int | None = None
    edge_dim: int | None = None

    @property
    def radial_size(self) -> int:
        """Radial basis functions per edge the layers are built with: ``num_gaussians``, else
        ``num_radial`` (HydraGNN's PaiNN name for it), else :data:`DEFAULT_NUM_GAUSSIANS`."""
        return int(self.num_gaussians or self.num_radial or DEFAULT_NUM_GAUSSIANS)

    @field_validator("mpnn_type")
    @classmethod
    def _mpnn(cls, v: str) -> str:
        # spelling differences in case only (PaiNN / PAINN) are the same layer: keep HydraGNN's
        canonical = {t.lower(): t for t in HYDRAGNN_MPNN_TYPES}.get(v.lower()) if isinstance(v, str) else None
        return _choice("mpnn_type", canonical or v, HYDRAGNN_MPNN_TYPES)

    @field_validator("activation_function")
    @classmethod
    def _act(cls, v: str) -> str:
        return _choice("activation_function", v, ACTIVATIONS)

    @field_validator("graph_pooling")
    @classmethod
    def _pool(cls, v: str) -> str:
        return _choice("graph_pooling", v, POOLINGS)

    @field_validator("hidden_dim", "num_conv_layers")
    @classmethod
    def _pos_int(cls, v: int, info) -> int:
        _positive(info.field_name, v)
        return v

    @field_validator("radius", "num_gaussians", "num_radial")
    @classmethod
    def _pos_opt(cls, v, info):
        _positive(info.field_name, v)
        return v

    @field_validator("task_weights")
    @classmethod
    def _weights(cls, v: list[float] | None) -> list[float] | None:
        if v is not None:
            if any(w < 0 for w in v):
                raise ValueError(f"task_weights must be >= 0 (got {v})")
            if v and sum(v) <= 0:
                raise ValueError(f"task_weights must not all be zero (got {v})")
        return v

    @model_validator(mode="after")
    def _equivariance(self) -> "ArchitectureSection":
        if self.equivariance and self.mpnn_type not in EQUIVARIANT_MPNN_TYPES:
            import warnings

            warnings.warn(f"NeuralNetwork.Architecture.equivariance: {self.mpnn_type} is not equivariant "
                          f"(only {', '.join(EQUIVARIANT_MPNN_TYPES)} are); ignored, as HydraGNN does",
                          stacklevel=2)
            self.__dict__["equivariance"] = False
        if self.use_graph_attr_conditioning:
            raise ValueError("use_graph_attr_conditioning: HydraGNN's graph-attribute conditioning "
                             f"({self.graph_attr_conditioning_mode or 'any mode'}) is not supported; set it to false")
        return self


class VariablesOfInterest(_Section):
    """``NeuralNetwork.Variables_of_interest``: which heads to predict.

    Used: ``output_names`` (head names in the dataset's registry), ``type`` (``graph``/``node``),
    ``output_dim`` (checked against the registry; filled from it when omitted, as HydraGNN infers
    it from the data), ``input_node_features`` (columns of ``x`` fed to the model),
    ``output_index`` only when ``output_names`` is omitted (HydraGNN needs no names: the heads are
    then the registry's entries at those positions, the order in which our store writes HydraGNN's
    ``y``/``y_loc``; see :meth:`names_in`).
    Accepted, not used: ``denormalize_output`` (metrics are always reported in physical units),
    ``minmax_node_feature``, ``minmax_graph_feature``, ``x_minmax``, ``y_minmax``, and newer
    HydraGNN's descriptions of its raw columns ``graph_feature_names``/``_dims``,
    ``node_feature_names``/``_dims``.
    """

    input_node_features: list[int] = Field(default_factory=lambda: [0])
    output_names: list[str] | None = None
    output_index: list[int] | None = None
    type: list[Literal["graph", "node"]]
    output_dim: list[int] | None = None
    denormalize_output: bool = False
    minmax_node_feature: list[Any] | None = None
    minmax_graph_feature: list[Any] | None = None
    x_minmax: list[Any] | None = None
    y_minmax: list[Any] | None = None
    graph_feature_names: list[str] | None = None
    graph_feature_dims: list[int] | None = None
    node_feature_names: list[str] | None = None
    node_feature_dims: list[int] | None = None

    @model_validator(mode="after")
    def _lengths(self) -> "VariablesOfInterest":
        if self.output_names is None and self.output_index is None:
            raise ValueError("output_names (or, as in HydraGNN, output_index) must name the heads")
        named = "output_names" if self.output_names is not None else "output_index"
        listed = getattr(self, named)
        n = len(listed)
        if n == 0:
            raise ValueError(f"{named} must name at least one head")
        dup = sorted({o for o in listed if listed.count(o) > 1})
        if dup:
            raise ValueError(f"{named} has duplicates: {dup}")
        for key in ("type", "output_dim", "output_index"):
            val = getattr(self, key)
            if val is not None and key != named and len(val) != n:
                raise ValueError(
                    f"{key} has {len(val)} entries but {named} has {n} "
                    f"({listed}); they must match one to one"
                )
        if self.output_dim is not None:
            for d in self.output_dim:
                _positive("every output_dim entry", d)
        if not self.input_node_features:
            raise ValueError("input_node_features must list at least one column of x")
        if any(c < 0 for c in self.input_node_features):
            raise ValueError(f"input_node_features must be >= 0 (got {self.input_node_features})")
        return self

    @property
    def input_width(self) -> int:
        """Columns of ``x`` the model reads (``len(input_node_features)``): the width of its input,
        which HydraGNN's CGCNN keeps as its hidden width."""
        return len(self.input_node_features)

    @property
    def num_heads(self) -> int:
        """How many heads the config predicts."""
        return len(self.output_names if self.output_names is not None else self.output_index or [])

    def names_in(self, registry_names: list[str]) -> list[str | int]:
        """The predicted heads' names given the dataset registry's names in order: ``output_names``,
        or the registry entries at ``output_index`` (an index out of range stays an int, for the
        caller to report)."""
        if self.output_names is not None:
            return list(self.output_names)
        assert self.output_index is not None
        return [registry_names[i] if 0 <= i < len(registry_names) else i for i in self.output_index]


class OptimizerSection(_Section):
    """``Training.Optimizer``. Used: ``type``, ``learning_rate``; ``weight_decay`` is ours
    (default 0.01, torch's AdamW default, which HydraGNN uses). ``use_zero_redundancy``: accepted,
    not used."""

    type: str = "AdamW"
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    use_zero_redundancy: bool = False

    @field_validator("type")
    @classmethod
    def _type(cls, v: str) -> str:
        return _choice("Optimizer.type", v, OPTIMIZERS)

    @field_validator("learning_rate")
    @classmethod
    def _lr(cls, v: float) -> float:
        _positive("learning_rate", v)
        return v

    @field_validator("weight_decay")
    @classmethod
    def _wd(cls, v: float) -> float:
        if v < 0:
            raise ValueError(f"weight_decay must be >= 0 (got {v})")
        return v


class TrainingSection(_Section):
    """``NeuralNetwork.Training``.

    HydraGNN keys used: ``num_epoch``, ``batch_size`` (global, split across ranks),
    ``loss_function_type`` (``GaussianNLLLoss`` makes the model predict a variance, as in
    HydraGNN), ``EarlyStopping`` + ``patience``, ``Optimizer``, ``compute_grad_energy`` (potential
    mode: forces/stress by autograd from the energy head).
    HydraGNN keys accepted, not used: ``perc_train`` (splits come from the dataset file),
    ``Checkpoint``/``checkpoint_warmup`` (the best epoch is always checkpointed), ``continue``,
    ``startfrom``, ``conv_checkpointing``, ``precision`` (fp32 here; bf16 autocast with our
    ``mixed_precision``), ``epoch_start``, ``global_attn_redraw_interval`` (HydraGNN's
    ``update_config`` writes it; no global attention here).
    Our keys: ``seed``, ``time_budget_s``, ``lr_schedule`` (``plateau``: ReduceLROnPlateau on the
    validation objective, factor 0.5, patience 5, min 1e-5, as HydraGNN's examples; ``cosine``:
    cosine decay to 1% over ``num_epoch``; ``none``), ``skip_nan_targets``, ``mixed_precision``
    (bf16 autocast on CUDA only), ``preload`` (``true``: read the splits into memory once;
    ``false``: read each batch's graphs as contiguous blocks, memory bounded whatever the dataset's
    size; ``"auto"``, the default: preload a dataset of at most 256 MB, stream a larger one).
    """

    num_epoch: int = 100
    batch_size: int = 32
    perc_train: float = 0.7
    loss_function_type: str = "mse"
    EarlyStopping: bool = False
    patience: int = 10
    Checkpoint: bool = True
    checkpoint_warmup: int = 0
    continue_: int = Field(default=0, alias="continue")
    startfrom: str = "existing_model"
    Optimizer: OptimizerSection = Field(default_factory=OptimizerSection)
    compute_grad_energy: bool = False
    conv_checkpointing: bool = False
    precision: str | None = None
    epoch_start: int = 0
    global_attn_redraw_interval: int | None = None
    # --- our additions (see EXTENSION_KEYS) ---
    seed: int = 0
    time_budget_s: float | None = None
    lr_schedule: str = "plateau"
    skip_nan_targets: bool = False
    mixed_precision: bool = False
    preload: bool | Literal["auto"] = "auto"

    @field_validator("num_epoch", "batch_size", "patience")
    @classmethod
    def _pos(cls, v: int, info) -> int:
        _positive(info.field_name, v)
        return v

    @field_validator("time_budget_s")
    @classmethod
    def _budget(cls, v: float | None) -> float | None:
        _positive("time_budget_s", v)
        return v

    @field_validator("perc_train")
    @classmethod
    def _perc(cls, v: float) -> float:
        if not 0 < v <= 1:
            raise ValueError(f"perc_train must be in (0, 1] (got {v})")
        return v

    @field_validator("loss_function_type")
    @classmethod
    def _loss(cls, v: str) -> str:
        return _choice("loss_function_type", v, LOSS_FUNCTIONS)

    @field_validator("lr_schedule")
    @classmethod
    def _sched(cls, v: str) -> str:
        return _choice("lr_schedule", v, LR_SCHEDULES)


def _mlip_energy_as_graph_head(voi: VariablesOfInterest, arch: ArchitectureSection) -> None:
    """HydraGNN's MLIP form (``enable_interatomic_potential`` with one node-level head of dim 1,
    the per-atom energies it sums into the total) read as this package's potential mode: a
    graph-level energy head (per atom) with the node head's layers; forces and stress by autograd
    as there. Anything else is left as it is."""
    if not (arch.enable_interatomic_potential and voi.type == ["node"] and (voi.output_dim or [1]) == [1]):
        return
    node = arch.output_heads.node
    if node is None or arch.output_heads.graph is not None:
        return
    import warnings

    warnings.warn(f"NeuralNetwork: HydraGNN's MLIP form (node-level energy {(voi.output_names or ['?'])[0]!r} with "
                  "enable_interatomic_potential) is read as potential mode: a graph-level energy head "
                  "per atom with the node head's layers; forces by autograd", stacklevel=3)
    voi.__dict__["type"] = ["graph"]
    arch.output_heads.__dict__["graph"] = GraphHeadsSection(
        num_sharedlayers=1, dim_sharedlayers=node.dim_headlayers[0], num_headlayers=node.num_headlayers,
        dim_headlayers=list(node.dim_headlayers))
    arch.output_heads.__dict__["node"] = None


class NeuralNetworkSection(_Section):
    """``NeuralNetwork``: architecture, heads and training. ``ds_config`` (DeepSpeed) and
    ``Profile`` (HydraGNN's profiler settings): accepted, not used."""

    Architecture: ArchitectureSection
    Variables_of_interest: VariablesOfInterest
    Training: TrainingSection = Field(default_factory=TrainingSection)
    ds_config: dict[str, Any] | None = None
    Profile: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _cross(self) -> "NeuralNetworkSection":
        voi, arch = self.Variables_of_interest, self.Architecture
        _mlip_energy_as_graph_head(voi, arch)
        n = voi.num_heads
        if arch.task_weights is None:
            arch.task_weights = [1.0] * n
        elif len(arch.task_weights) != n:
            raise ValueError(
                f"Architecture.task_weights has {len(arch.task_weights)} entries but "
                f"Variables_of_interest.{'output_names' if voi.output_names is not None else 'output_index'} "
                f"has {n} ({voi.output_names if voi.output_names is not None else voi.output_index})"
            )
        if "graph" in voi.type and arch.output_heads.graph is None:
            raise ValueError(
                "Variables_of_interest.type has a 'graph' head but Architecture.output_heads.graph "
                "is missing"
            )
        if "node" in voi.type and arch.output_heads.node is None:
            raise ValueError(
                "Variables_of_interest.type has a 'node' head but Architecture.output_heads.node "
                "is missing"
            )
        return self


class HydraConfig(_Section):
    """A whole HydraGNN configuration file.

    ``Dataset`` (HydraGNN's raw-data description) and ``Variables`` (newer HydraGNN's input
    description) are carried along as plain dicts and not used: the dataset comes from the ADIOS2
    file given to the trainer.
    """

    Verbosity: VerbositySection = Field(default_factory=VerbositySection)
    Dataset: dict[str, Any] | None = None
    NeuralNetwork: NeuralNetworkSection
    Visualization: VisualizationSection = Field(default_factory=VisualizationSection)
    Variables: dict[str, Any] | None = None

    # convenient views ---------------------------------------------------------------------------
    @property
    def architecture(self) -> ArchitectureSection:
        return self.NeuralNetwork.Architecture

    @property
    def training(self) -> TrainingSection:
        return self.NeuralNetwork.Training

    @property
    def variables(self) -> VariablesOfInterest:
        return self.NeuralNetwork.Variables_of_interest

    @property
    def potential_mode(self) -> bool:
        """True when forces (and stress) are derivatives of the energy head."""
        return self.training.compute_grad_energy or self.architecture.enable_interatomic_potential

    def to_dict(self) -> dict[str, Any]:
        """The JSON dict (HydraGNN key names, defaults filled, unset optional keys left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
