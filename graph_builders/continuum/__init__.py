"""Continuum scale: finite-element meshes (meshio, scikit-fem) -> schema graphs.

Nodes are mesh vertices, edges are element edges (a quad's diagonals are not edges; a hexahedron has
12), ``edge_attr`` holds the relative vector and length. See :func:`mesh_to_graph`.
"""

from graph_builders.continuum._edges import both_directions, unique_element_edges
from graph_builders.continuum._elements import (
    LINEAR_ELEMENTS,
    SUPPORTED_CELL_TYPES,
    ElementType,
    linear_element,
)
from graph_builders.continuum._reading import MeshError
from graph_builders.continuum.builder import mesh_to_graph

__all__ = [
    "LINEAR_ELEMENTS",
    "SUPPORTED_CELL_TYPES",
    "ElementType",
    "MeshError",
    "both_directions",
    "linear_element",
    "mesh_to_graph",
    "unique_element_edges",
]
