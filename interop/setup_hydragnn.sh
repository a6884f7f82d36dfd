#!/usr/bin/env bash
# A separate venv in which HydraGNN (a checkout, not a package release) imports and trains on the CPU:
#   bash interop/setup_hydragnn.sh PATH/TO/HydraGNN [VENV]      (VENV default: .venv-hydragnn)
# torch 2.13.0 (the CPU wheel), torch_geometric, torch-scatter built from source against that torch
# (--no-build-isolation; about 10 minutes on 2 cores), and the pure-Python packages HydraGNN imports.
# torch_sparse / torch_cluster / pyg-lib are not installed: the code paths used by interop/ do not
# import them (graphs come with their edges from our dataset files).
set -euo pipefail
HYDRAGNN=$(cd "${1:?usage: setup_hydragnn.sh PATH/TO/HydraGNN [VENV]}" && pwd)
VENV=${2:-.venv-hydragnn}
test -f "$HYDRAGNN/hydragnn/__init__.py" || { echo "$HYDRAGNN: not a HydraGNN checkout" >&2; exit 2; }
test -x "$VENV/bin/python" || python3 -m venv "$VENV"
PIP="$VENV/bin/pip install -q"
$PIP torch==2.13.0
$PIP "torch_geometric==2.8.*" numpy scipy ase tqdm psutil sympy scikit-learn matplotlib e3nn vesin tensorboard \
     "adios2>=2.10" "mpi4py>=4.0" "mpich>=4.2" wheel setuptools
$VENV/bin/python -c "import torch_scatter" 2>/dev/null || \
    MAX_JOBS=2 $PIP --no-build-isolation "torch-scatter==2.1.2"
# HydraGNN itself from the checkout, without its pinned requirements (they pull CUDA builds)
$VENV/bin/pip install -q --no-deps --no-build-isolation -e "$HYDRAGNN"
$VENV/bin/python -c "import hydragnn, torch_scatter; print('hydragnn', hydragnn.__file__)"
