#!/usr/bin/env bash
# One-node campaign: 9 ranks = 1 scheduler + 8 agents. pip MPICH (`pip install .[mpich]`) is fine
# here; on a cluster use the site MPI and an mpi4py built against it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."                  # the repository root: campaign.yaml reads ../../demo_out/alloy.bp
export OMP_NUM_THREADS=1          # one torch thread per rank
hydragnn-ensemble demo-data alloy -o demo_out/alloy.bp
mpiexec -n 9 hydragnn-ensemble hpo "$here/campaign.yaml" -o demo_out/workstation_campaign
hydragnn-ensemble report demo_out/workstation_campaign
