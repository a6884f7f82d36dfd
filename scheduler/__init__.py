"""Cluster/resource model, cost model, placement policies, rank 0's decision loop (shared by the MPI
runtime and the simulator), the MPI runtime and the simulator."""
