"""HydraGNN JSON configuration: typed models, loading/saving with helpful errors, dotted-key
access for search spaces, and the translation to a :class:`~hydragnn_ensemble.model.ModelSpec`."""

from hydragnn_ensemble.config.load import (
    ConfigError,
    check_dotted_key,
    check_unknown_keys,
    config_from_dict,
    epoch_budget,
    get_by_dotted_key,
    load_config,
    save_config,
    set_by_dotted_key,
)
from hydragnn_ensemble.config.schema import (
    EXTENSION_KEYS,
    HYDRAGNN_MPNN_TYPES,
    HydraConfig,
)

#: Names of :mod:`hydragnn_ensemble.config.to_spec`, imported on first use: the translation to a
#: model needs torch and the graph schema, which a campaign's rank 0 reading a config does not.
_TO_SPEC = ("config_to_model_spec", "potential_heads", "selected_heads", "validate_against_heads")


def __getattr__(name: str):
    if name in _TO_SPEC:
        from hydragnn_ensemble.config import to_spec

        return getattr(to_spec, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EXTENSION_KEYS",
    "HYDRAGNN_MPNN_TYPES",
    "ConfigError",
    "HydraConfig",
    "check_dotted_key",
    "check_unknown_keys",
    "config_from_dict",
    "config_to_model_spec",
    "epoch_budget",
    "get_by_dotted_key",
    "load_config",
    "potential_heads",
    "save_config",
    "selected_heads",
    "set_by_dotted_key",
    "validate_against_heads",
]
