"""Cluster/resource model, cost model, placement policies, the MPI runtime and the simulator."""
