#!/bin/bash
# Copy a Python environment to every node's local storage, inside a Slurm job, so that the ranks
# import torch & co. from there instead of all reading the shared file system at once.
#
#   ENV=$(bash stage_env.sh [--dest DIR] [--tarball FILE] ENV_DIR)   # then: source "$ENV/bin/activate"
#
#   ENV_DIR     a venv (it has pyvenv.cfg) or a conda environment (it has conda-meta/)
#   --dest      where the environment goes on each node (default /tmp/$USER/hydragnn-env; on
#               Frontier the NVMe: /mnt/bb/$USER/hydragnn-env, with #SBATCH -C nvme)
#   --tarball   the packed environment on the shared file system (default ENV_DIR.tar). A venv is
#               packed with tar here, once: the tarball is reused while no file of the venv is newer.
#               A conda environment must be packed beforehand with conda-pack:
#                 conda pack -p ENV_DIR -o ENV_DIR.tar
#
# Steps: pack (venv only, when needed) -> `srun` one task per node: mkdir -> `sbcast` the tarball to
# each node -> `srun` one task per node: unpack, then fix the paths the environment has inside it
# (a venv: its scripts' #! lines and bin/activate* name ENV_DIR; they are rewritten to DIR. A conda
# environment: conda-pack's bin/conda-unpack does it) and delete the node's copy of the tarball.
# Prints DIR on stdout (everything else goes to stderr).
#
# What stays on the shared file system: a venv's Python interpreter and standard library (its
# bin/python links to the Python it was made from, e.g. cray-python's), and the source of an editable
# install (pip install -e); install the package with `pip install . --no-deps` for a node-local copy.
# A conda environment holds its own interpreter.
#
# NOT RUN ON A REAL SLURM CLUSTER: tests/test_examples.py runs this script with stand-ins for srun
# and sbcast on one machine (see examples/slurm/README.md).
set -euo pipefail

usage() { echo "usage: $0 [--dest DIR] [--tarball FILE] ENV_DIR" >&2; exit 2; }
say() { echo "stage_env: $*" >&2; }
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
MARK=".staged-by-stage_env"   # a --dest holding this file may be replaced; any other is left alone

# -- on each node (srun runs this script again with --unpack-here) ---------------------------------
if [ "${1:-}" = "--unpack-here" ]; then
  local_tar="$2"; dest="$3"; shift 3    # then the paths the environment was made at
  if [ -e "$dest" ] && [ ! -e "$dest/$MARK" ]; then
    echo "stage_env on $(hostname): $dest exists and was not made by this script: not replaced" >&2
    exit 1
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  tar -C "$dest" -xf "$local_tar"
  rm -f "$local_tar"
  if [ -x "$dest/bin/conda-unpack" ]; then
    "$dest/bin/conda-unpack"
  else   # scripts (not the links to the interpreter: grep -r does not follow them) that name the old path
    new="$(printf '%s' "$dest" | sed -e 's/[&|\\]/\\&/g')"
    for old in "$@"; do
      pattern="$(printf '%s' "$old" | sed -e 's/[]|\\$*.^[]/\\&/g')"
      { grep -rlI --null -F -e "$old" "$dest/bin" || true; } | xargs -0 -r sed -i -e "s|$pattern|$new|g"
    done
  fi
  touch "$dest/$MARK"
  exit 0
fi

# -- on the job's first node -----------------------------------------------------------------------
dest="/tmp/${USER:-$(id -un)}/hydragnn-env"
tarball=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) dest="$2"; shift 2 ;;
    --tarball) tarball="$2"; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "$0: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
env_dir="$(cd "$1" && pwd)"
tarball="${tarball:-$env_dir.tar}"
case "$dest" in /?*) ;; *) echo "$0: --dest must be an absolute path below /, got $dest" >&2; exit 2 ;; esac
case "$dest/" in "$env_dir"/*) echo "$0: --dest $dest is inside $env_dir" >&2; exit 2 ;; esac
if [ -z "${SLURM_NNODES:-}" ]; then
  echo "$0: not inside a Slurm job (no SLURM_NNODES): run it from an sbatch script or salloc" >&2
  exit 2
fi

olds=()
if [ -f "$env_dir/pyvenv.cfg" ]; then
  if [ -f "$tarball" ] && [ -z "$(find "$env_dir" -newer "$tarball" -print -quit)" ]; then
    say "reusing $tarball (no file of $env_dir is newer)"
  else
    say "packing $env_dir into $tarball"
    tar -C "$env_dir" -cf "$tarball.tmp.$$" .
    mv "$tarball.tmp.$$" "$tarball"
  fi
  # the paths the venv's scripts may name: as given, physical, and as its activate script says
  olds=("$env_dir" "$(cd "$env_dir" && pwd -P)")
  made_at="$(sed -n 's/^VIRTUAL_ENV=["'\'']\{0,1\}\([^"'\'']*\)["'\'']\{0,1\}$/\1/p' "$env_dir/bin/activate" | head -n 1)"
  [ -n "$made_at" ] && olds+=("$made_at")
elif [ -d "$env_dir/conda-meta" ]; then
  if [ ! -f "$tarball" ]; then
    echo "$0: $env_dir is a conda environment: pack it first with: conda pack -p $env_dir -o $tarball" >&2
    exit 2
  fi
else
  echo "$0: $env_dir is neither a venv (pyvenv.cfg) nor a conda environment (conda-meta/)" >&2
  exit 2
fi

local_tar="$dest.tar"
say "copying $tarball to $local_tar on $SLURM_NNODES node(s)"
srun -N "$SLURM_NNODES" --ntasks-per-node=1 mkdir -p "$(dirname "$dest")"
sbcast -pf "$tarball" "$local_tar"
say "unpacking into $dest on each node"
srun -N "$SLURM_NNODES" --ntasks-per-node=1 bash "$self" --unpack-here "$local_tar" "$dest" ${olds[@]+"${olds[@]}"}
echo "$dest"
