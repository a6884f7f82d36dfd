#!/usr/bin/env bash
# A separate venv in which HydraGNN (a checkout, not a package release) imports and trains on the CPU:
#   bash interop/setup_hydragnn.sh PATH/TO/HydraGNN [VENV] [PATH/TO/ADIOS2-source]
# VENV defaults to .venv-hydragnn. Installs torch 2.13.0 (the CPU wheel), torch_geometric,
# torch-scatter built from source against that torch (--no-build-isolation; ~10 minutes on 2 cores)
# and the pure-Python packages HydraGNN imports. torch_sparse / torch_cluster / pyg-lib are not
# installed (not installable here): HydraGNN's SchNet needs radius_graph from them and fails to build.
# HydraGNN's AdiosDataset opens files with an MPI communicator, which PyPI's adios2 wheel (serial)
# refuses: with an ADIOS2 source tree as third argument, ADIOS2 is built with MPI (~15 minutes on
# 2 cores) into VENV/adios2, and VENV/bin/hydragnn-python runs the venv's python with it.
set -euo pipefail
HYDRAGNN=$(cd "${1:?usage: setup_hydragnn.sh PATH/TO/HydraGNN [VENV] [ADIOS2-source]}" && pwd)
VENV=${2:-.venv-hydragnn}
ADIOS2_SRC=${3:-}
test -f "$HYDRAGNN/hydragnn/__init__.py" || { echo "$HYDRAGNN: not a HydraGNN checkout" >&2; exit 2; }
test -x "$VENV/bin/python" || python3 -m venv "$VENV"
VENV=$(cd "$VENV" && pwd)
PIP="$VENV/bin/pip install -q"
$PIP torch==2.13.0
$PIP "torch_geometric==2.8.*" numpy scipy ase tqdm psutil sympy scikit-learn matplotlib e3nn vesin tensorboard \
     "adios2>=2.10" "mpi4py>=4.0" "mpich>=4.2" wheel setuptools
$VENV/bin/python -c "import torch_scatter" 2>/dev/null || \
    MAX_JOBS=2 $PIP --no-build-isolation "torch-scatter==2.1.2"
# HydraGNN itself from the checkout, without its pinned requirements (they pull CUDA builds)
$VENV/bin/pip install -q --no-deps --no-build-isolation -e "$HYDRAGNN"
if [ -n "$ADIOS2_SRC" ] && [ ! -d "$VENV/adios2/lib" ]; then
    off="Fortran HDF5 SST ZeroMQ Blosc2 BZip2 ZFP SZ MGARD PNG DataMan DataSpaces Campaign XRootD AWSSDK
         Kokkos CUDA Profiling SSC Catalyst IME LIBPRESSIO Sodium UCX Derived_Variable OpenSSL"
    flags=(); for f in $off; do flags+=("-DADIOS2_USE_$f=OFF"); done
    cmake -S "$ADIOS2_SRC" -B "$VENV/adios2-build" -DCMAKE_BUILD_TYPE=Release -DADIOS2_USE_MPI=ON \
        -DADIOS2_USE_Python=ON "${flags[@]}" -DBUILD_TESTING=OFF -DADIOS2_BUILD_EXAMPLES=OFF \
        -DPython_EXECUTABLE="$VENV/bin/python" -DMPI_C_COMPILER="$VENV/bin/mpicc" \
        -DMPI_CXX_COMPILER="$VENV/bin/mpicxx" -DCMAKE_INSTALL_PREFIX="$VENV/adios2"
    cmake --build "$VENV/adios2-build" -j2
    cmake --install "$VENV/adios2-build"
    $VENV/bin/pip uninstall -y -q adios2
    site=$($VENV/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    cp -r "$VENV"/adios2/lib/python3*/site-packages/adios2 "$site/"
fi
cat > "$VENV/bin/hydragnn-python" <<'WRAP'
#!/usr/bin/env bash
# this venv's python with its MPI-enabled ADIOS2 (if built) on the library path
here="$(cd "$(dirname "$0")/.." && pwd)"
export LD_LIBRARY_PATH="$here/adios2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$here/bin/python" "$@"
WRAP
chmod +x "$VENV/bin/hydragnn-python"
"$VENV/bin/hydragnn-python" -c "import hydragnn, torch_scatter, adios2; print('hydragnn', hydragnn.__file__, 'adios2', adios2.__version__)"
