"""Run under mpiexec by test_mpi.py: members spread over the ranks; every rank saves its result.

Usage: python -m tests.ensemble.mpi_predict ENSEMBLE_DIR DATASET OUT_PREFIX
"""

import sys

import numpy as np
import torch
from mpi4py import MPI

from ensemble import EnsemblePredictor, read_split

torch.set_num_threads(1)
ensemble_dir, dataset, prefix = sys.argv[1:4]
comm = MPI.COMM_WORLD
predictor = EnsemblePredictor(ensemble_dir, comm=comm)
pred = predictor.predict_graphs(read_split(dataset, "testset"))
np.savez(f"{prefix}.{comm.Get_rank()}.npz", local=np.array([m.trial_id for m in predictor.members]),
         **{f"{h}_{k}": getattr(hp, k) for h, hp in pred.heads.items() for k in ("mean", "std")})
