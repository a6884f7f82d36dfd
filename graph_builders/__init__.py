"""Graph builders for three scales (atoms, grains, FEM meshes) into one schema, and the ADIOS2 store.

See :mod:`graph_builders.schema` for the schema every builder follows.
"""

from graph_builders.schema import (
    GraphSchemaError,
    HeadRegistry,
    HeadSpec,
    edge_vectors,
    validate_graph,
)

__all__ = ["GraphSchemaError", "HeadRegistry", "HeadSpec", "edge_vectors", "validate_graph"]
