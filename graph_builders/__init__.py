"""Graph builders for three scales (atoms, grains, FEM meshes) into one schema, and the ADIOS2 store.

See :mod:`graph_builders.schema` for the schema every builder follows.

- atoms: :func:`atoms_to_graph` (ASE Atoms, pymatgen Structure/Molecule), :func:`read_structures`
- grains: :func:`grains_to_graph` (Voronoi seeds), :func:`voxels_to_graph` (label maps)
- meshes: :func:`mesh_to_graph` (meshio, scikit-fem, any file meshio reads)
- store: :func:`write_dataset`, :class:`GraphStore`, :class:`AdiosGraphDataset`
"""

from graph_builders.atomic import AtomicGraphBuilder, atoms_to_graph
from graph_builders.continuum import MeshError, mesh_to_graph, unique_element_edges
from graph_builders.mesoscale import (
    EDGE_FEATURES,
    GRAIN_FEATURES,
    MicrostructureError,
    grains_to_graph,
    voxels_to_graph,
)
from graph_builders.readers import InvalidStructureError, StructureReadError, read_structures, structure_to_atoms
from graph_builders.schema import (
    GraphSchemaError,
    HeadRegistry,
    HeadSpec,
    edge_vectors,
    validate_graph,
)
from graph_builders.store import (
    AdiosGraphDataset,
    GraphStore,
    StoreError,
    describe,
    shard_indices,
    update_normalisation,
    write_dataset,
)

__all__ = [
    "EDGE_FEATURES",
    "GRAIN_FEATURES",
    "AdiosGraphDataset",
    "AtomicGraphBuilder",
    "GraphSchemaError",
    "GraphStore",
    "HeadRegistry",
    "HeadSpec",
    "InvalidStructureError",
    "MeshError",
    "MicrostructureError",
    "StoreError",
    "StructureReadError",
    "atoms_to_graph",
    "describe",
    "edge_vectors",
    "grains_to_graph",
    "mesh_to_graph",
    "read_structures",
    "shard_indices",
    "structure_to_atoms",
    "unique_element_edges",
    "update_normalisation",
    "validate_graph",
    "voxels_to_graph",
    "write_dataset",
]
