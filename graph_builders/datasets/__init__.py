"""Built-in labelled demo datasets: alloy (EMT), polycrystal (Taylor factor), fem (heat conduction)."""

from graph_builders.datasets.alloy import make_alloy_dataset
from graph_builders.datasets.base import LabelledGraphs
from graph_builders.datasets.fem import make_fem_dataset
from graph_builders.datasets.polycrystal import make_polycrystal_dataset

__all__ = ["LabelledGraphs", "make_alloy_dataset", "make_fem_dataset", "make_polycrystal_dataset"]
