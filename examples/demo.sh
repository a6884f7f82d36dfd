#!/usr/bin/env bash
# The main job of `make demo`:
#   1. build the three demo datasets (atoms, grains, FEM meshes) and print what is in them;
#   2. run a small HPO campaign on the alloy data (binaries and ternaries) under mpiexec;
#   3. select the top-5 ensemble, calibrate it, and predict formation energies of new alloys,
#      including quaternaries/quinaries outside the training range, with uncertainty;
#   4. export the top-5 configurations as HydraGNN JSON, with the data in the layout they describe.
# Usage: examples/demo.sh OUT_DIR   (with the project's .venv/bin first on PATH)
set -euo pipefail
out="${1:-demo_out}"
here="$(cd "$(dirname "$0")" && pwd)"
ranks=4
mkdir -p "$out"
rm -rf "$out/campaign" "$out/ensemble" "$out/top5_configs"

echo "== 1. demo datasets =="
hydragnn-ensemble demo-data alloy --components 2-3 --num 800 --fractions 0.7,0.1,0.1,0.1 -o "$out/alloy.bp" --no-progress
hydragnn-ensemble demo-data polycrystal -o "$out/polycrystal.bp" --no-progress
hydragnn-ensemble demo-data fem -o "$out/fem.bp" --no-progress

echo "== 2. HPO campaign: mpiexec -n $ranks (rank 0 schedules, the others train) =="
mpiexec -n "$ranks" hydragnn-ensemble hpo "$here/alloy/campaign.yaml" -o "$out/campaign" --dataset "$out/alloy.bp"
hydragnn-ensemble report "$out/campaign" --top-k 5

echo "== 3. ensemble of at most 5 members (greedy selection), uncertainty fitted on the calibration split =="
hydragnn-ensemble select "$out/campaign" --top-k 5 --method greedy -o "$out/ensemble" --calibrate --no-progress
python "$here/alloy/new_alloys.py" "$out/ensemble" --write "$out/new_alloys.extxyz"
hydragnn-ensemble predict "$out/ensemble" "$out/new_alloys.extxyz" -o "$out/new_alloys.csv" --no-progress

echo "== 4. export the top-5 configurations (HydraGNN JSON) =="
hydragnn-ensemble export "$out/campaign" --top-k 5 --format hydragnn -o "$out/top5_configs" --with-dataset --no-progress
echo "done: everything is in $out/"
