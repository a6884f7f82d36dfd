"""Graph builders for three scales (atoms, grains, FEM meshes) into one schema, and the ADIOS2 store.

See :mod:`graph_builders.schema` for the schema every builder follows.

- atoms: :func:`atoms_to_graph` (ASE Atoms, pymatgen Structure/Molecule), :func:`read_structures`
- grains: :func:`grains_to_graph` (Voronoi seeds), :func:`voxels_to_graph` (label maps)
- meshes: :func:`mesh_to_graph` (meshio, scikit-fem, any file meshio reads)
- store: :func:`write_dataset`, :class:`GraphStore`, :class:`AdiosGraphDataset`
"""

#: public name -> the module that defines it, imported on first use (PEP 562): importing one
#: submodule (e.g. the torch-free :mod:`graph_builders.units`) does not import the builders and torch
_WHERE: dict[str, str] = {
    "AtomicGraphBuilder": "graph_builders.atomic", "atoms_to_graph": "graph_builders.atomic",
    "MeshError": "graph_builders.continuum", "mesh_to_graph": "graph_builders.continuum",
    "unique_element_edges": "graph_builders.continuum",
    "EDGE_FEATURES": "graph_builders.mesoscale", "GRAIN_FEATURES": "graph_builders.mesoscale",
    "MicrostructureError": "graph_builders.mesoscale", "grains_to_graph": "graph_builders.mesoscale",
    "voxels_to_graph": "graph_builders.mesoscale",
    "InvalidStructureError": "graph_builders.readers", "StructureReadError": "graph_builders.readers",
    "read_structures": "graph_builders.readers", "structure_to_atoms": "graph_builders.readers",
    "GraphSchemaError": "graph_builders.schema", "HeadRegistry": "graph_builders.schema",
    "HeadSpec": "graph_builders.schema", "edge_vectors": "graph_builders.schema",
    "validate_graph": "graph_builders.schema",
    "AdiosGraphDataset": "graph_builders.store", "GraphStore": "graph_builders.store",
    "StoreError": "graph_builders.store", "describe": "graph_builders.store",
    "shard_indices": "graph_builders.store", "update_normalisation": "graph_builders.store",
    "write_dataset": "graph_builders.store",
}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
