#!/usr/bin/env bash
# The multi-objective demo: a campaign on the alloy data minimising the validation loss and the
# model's inference time, its Pareto front, and two ensembles chosen from it: the most accurate
# one (greedy, no budget) and a cost-aware one whose members' summed inference time is at most half
# of the first's. Both are calibrated; their test errors are printed side by side.
# Usage: examples/alloy/pareto_demo.sh OUT_DIR   (with the project's .venv/bin first on PATH)
set -euo pipefail
out="${1:-demo_out}"
here="$(cd "$(dirname "$0")" && pwd)"
ranks=4
mkdir -p "$out"
rm -rf "$out/pareto_campaign" "$out/pareto_full" "$out/pareto_cheap"
if [ ! -d "$out/alloy.bp" ]; then
  hydragnn-ensemble demo-data alloy --components 2-3 --num 800 --fractions 0.7,0.1,0.1,0.1 -o "$out/alloy.bp" --no-progress
fi

echo "== 1. multi-objective campaign (validation loss, inference ms per graph) =="
mpiexec -n "$ranks" hydragnn-ensemble hpo "$here/campaign_pareto.yaml" -o "$out/pareto_campaign" --dataset "$out/alloy.bp"
hydragnn-ensemble report "$out/pareto_campaign" --top-k 5

echo "== 2. the most accurate ensemble (greedy, at most 5 members, no budget) =="
hydragnn-ensemble select "$out/pareto_campaign" --top-k 5 --method greedy -o "$out/pareto_full" --calibrate --no-plots --no-progress
full_ms=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['selection']['inference_ms'])" "$out/pareto_full/manifest.json")
budget=$(python -c "import sys; print(float(sys.argv[1]) / 2)" "$full_ms")

echo "== 3. the cost-aware ensemble: members' summed inference time <= $budget ms per graph (half) =="
hydragnn-ensemble select "$out/pareto_campaign" --top-k 5 --method greedy --max-inference-ms "$budget" -o "$out/pareto_cheap" --calibrate --no-plots --no-progress
echo "done: the Pareto plot is $out/pareto_campaign/report/pareto.png"
