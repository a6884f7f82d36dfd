"""Members spread over MPI ranks (real mpiexec) give the same result as one process, on every rank."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ensemble import EnsemblePredictor, read_manifest, read_split

REPO = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"


@pytest.mark.mpi
def test_members_over_two_ranks(direct_ensemble, direct_campaign, tmp_path):
    prefix = tmp_path / "pred"
    proc = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, "-m", "tests.ensemble.mpi_predict",
                           str(direct_ensemble), str(direct_campaign.dataset), str(prefix)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    serial = EnsemblePredictor(direct_ensemble).predict_graphs(read_split(direct_campaign.dataset, "testset"))
    ids = [m.trial_id for m in read_manifest(direct_ensemble).members]
    ranks = [np.load(f"{prefix}.{r}.npz") for r in (0, 1)]
    assert ranks[0]["local"].tolist() == [ids[0], ids[2]] and ranks[1]["local"].tolist() == [ids[1]]
    for got in ranks:
        for head, hp in serial.heads.items():
            np.testing.assert_allclose(got[f"{head}_mean"], hp.mean, rtol=1e-12)
            np.testing.assert_allclose(got[f"{head}_std"], hp.std, rtol=1e-9)
