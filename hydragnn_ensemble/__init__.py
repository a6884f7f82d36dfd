"""hydragnn-ensemble: graphs from atoms, grains and meshes; HPO campaigns of multi-headed GNNs under
MPI; top-K ensembles with uncertainty."""

__version__ = "0.1.0"
