"""Mesoscale graphs: grains of a Voronoi tessellation or of a voxel label map, with orientations."""

from graph_builders.mesoscale.builder import (
    EDGE_FEATURES,
    GRAIN_FEATURES,
    attach_targets,
    grains_to_graph,
    voxels_to_graph,
)
from graph_builders.mesoscale.errors import MicrostructureError
from graph_builders.mesoscale.orientation import (
    cubic_symmetry_quaternions,
    euler_to_quaternion,
    matrix_to_quaternion,
    misorientation_angle,
    quaternion_multiply,
    quaternion_to_matrix,
    random_quaternions,
)
from graph_builders.mesoscale.voronoi import VoronoiCells, VoronoiFaces, voronoi_cells
from graph_builders.mesoscale.voxels import VoxelGrains, voxel_grains

__all__ = [
    "EDGE_FEATURES",
    "GRAIN_FEATURES",
    "MicrostructureError",
    "VoronoiCells",
    "VoronoiFaces",
    "VoxelGrains",
    "attach_targets",
    "cubic_symmetry_quaternions",
    "euler_to_quaternion",
    "grains_to_graph",
    "matrix_to_quaternion",
    "misorientation_angle",
    "quaternion_multiply",
    "quaternion_to_matrix",
    "random_quaternions",
    "voronoi_cells",
    "voxel_grains",
    "voxels_to_graph",
]
