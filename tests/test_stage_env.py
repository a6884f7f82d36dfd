"""examples/slurm/stage_env.sh on one machine, with stand-ins for Slurm's ``srun`` and ``sbcast``
first on PATH that log their calls (srun's ``-N`` and ``--ntasks-per-node=1``: one task per node)
and act as on a job of one node (srun runs the command once: the "nodes" of one machine share
its disk; sbcast copies the file): it packs a real venv once, sends it to the node-local path,
unpacks it there, and the staged
venv's scripts run its own Python (their ``#!`` lines and ``activate`` name the new place); the
source venv is untouched. The sbatch scripts set ``--cpus-per-task`` and can call it. None of this
ran under a real Slurm (see examples/slurm/README.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SLURM = REPO / "examples" / "slurm"
STAGE = SLURM / "stage_env.sh"

FAKE_SRUN = r"""#!/bin/bash
# stand-in for srun: log the call, run the command once (the nodes of one machine share its disk)
echo "srun $*" >> "$(dirname "$0")/calls.log"
while [ $# -gt 0 ]; do
  case "$1" in
    -N) shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
exec "$@"
"""
FAKE_SBCAST = r"""#!/bin/bash
# stand-in for sbcast -pf SRC DEST: log the call, copy the file
echo "sbcast $*" >> "$(dirname "$0")/calls.log"
cp -p "${@: -2:1}" "${@: -1}"
"""


@pytest.fixture
def fakes(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "fake_bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("sbcast", FAKE_SBCAST)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A real venv (no pip) with a console script as pip writes them: ``#!<venv>/bin/python``."""
    env = tmp_path / "shared" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    script = env / "bin" / "where-am-i"
    script.write_text(f"#!{env}/bin/python\nimport sys\nprint(sys.prefix)\n")
    script.chmod(0o755)
    return env


def stage(fakes: Path, *args: str, nodes: int | None = 2) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PATH"] = f"{fakes}:{env['PATH']}"
    if nodes is not None:
        env["SLURM_NNODES"] = str(nodes)
    return subprocess.run(["bash", str(STAGE), *args], capture_output=True, text=True, env=env, timeout=120)


def test_a_venv_is_packed_broadcast_and_unpacked_on_each_node_and_runs_from_there(fakes, venv, tmp_path):
    dest = tmp_path / "node_local" / "env"
    done = stage(fakes, "--dest", str(dest), str(venv))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{dest}\n"  # the staged environment's path, alone on stdout
    calls = (fakes / "calls.log").read_text().splitlines()
    assert calls == [
        f"srun -N 2 --ntasks-per-node=1 mkdir -p {dest.parent}",
        f"sbcast -pf {venv}.tar {dest}.tar",
        f"srun -N 2 --ntasks-per-node=1 bash {STAGE} --unpack-here {dest}.tar {dest} {venv} {venv.resolve()} {venv}",
    ]
    with tarfile.open(f"{venv}.tar") as tar:  # packed once on the shared file system
        assert "./bin/where-am-i" in tar.getnames()
    assert not Path(f"{dest}.tar").exists()  # the node's copy is deleted after unpacking
    # the staged scripts name the staged venv, and run its Python
    script = dest / "bin" / "where-am-i"
    assert script.read_text().splitlines()[0] == f"#!{dest}/bin/python"
    assert subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout == f"{dest}\n"
    assert re.search(rf"^VIRTUAL_ENV=[\"']?{re.escape(str(dest))}[\"']?$", (dest / "bin" / "activate").read_text(), re.M)
    for path in (dest / "bin").iterdir():
        if path.is_file() and not path.is_symlink():
            assert str(venv) not in path.read_text(errors="replace"), path
    # the source venv is untouched, and its interpreter links were copied as links
    assert (venv / "bin" / "where-am-i").read_text().splitlines()[0] == f"#!{venv}/bin/python"
    assert (dest / "bin" / "python").is_symlink()


def test_a_second_job_reuses_the_tarball_and_replaces_its_own_copy_only(fakes, venv, tmp_path):
    dest = tmp_path / "node_local" / "env"
    assert stage(fakes, "--dest", str(dest), str(venv)).returncode == 0
    again = stage(fakes, "--dest", str(dest), str(venv))
    assert again.returncode == 0 and f"reusing {venv}.tar" in again.stderr
    other = tmp_path / "node_local" / "something_else"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    refused = stage(fakes, "--dest", str(other), str(venv))
    assert refused.returncode != 0 and "exists and was not made by this script: not replaced" in refused.stderr
    assert (other / "keep.txt").read_text() == "mine"


def test_a_conda_environment_is_unpacked_with_conda_unpack(fakes, tmp_path):
    conda_env = tmp_path / "shared" / "conda_env"
    (conda_env / "conda-meta").mkdir(parents=True)
    dest = tmp_path / "node_local" / "env"
    missing = stage(fakes, "--dest", str(dest), str(conda_env))
    assert missing.returncode == 2 and f"conda pack -p {conda_env} -o {conda_env}.tar" in missing.stderr
    packed = tmp_path / "packed"  # what conda-pack writes: the environment with bin/conda-unpack
    (packed / "bin").mkdir(parents=True)
    (packed / "bin" / "conda-unpack").write_text('#!/bin/bash\ntouch "$(dirname "$0")/../unpacked"\n')
    (packed / "bin" / "conda-unpack").chmod(0o755)
    with tarfile.open(f"{conda_env}.tar", "w") as tar:
        tar.add(packed, arcname=".")
    done = stage(fakes, "--dest", str(dest), str(conda_env))
    assert done.returncode == 0, done.stderr
    assert (dest / "unpacked").exists()


def test_outside_a_job_or_with_a_bad_dest_it_refuses_before_doing_anything(fakes, venv, tmp_path):
    outside = stage(fakes, "--dest", str(tmp_path / "x"), str(venv), nodes=None)
    assert outside.returncode == 2 and "not inside a Slurm job" in outside.stderr
    relative = stage(fakes, "--dest", "relative/env", str(venv))
    assert relative.returncode == 2 and "--dest must be an absolute path" in relative.stderr
    inside = stage(fakes, "--dest", str(venv / "staged"), str(venv))
    assert inside.returncode == 2 and "is inside" in inside.stderr
    assert not (fakes / "calls.log").exists() and not Path(f"{venv}.tar").exists()


@pytest.mark.parametrize("script", ["hpo_small.sbatch", "hpo_frontier.sbatch"])
def test_the_batch_scripts_set_cpus_per_task_and_can_stage_the_venv(script):
    text = (SLURM / script).read_text()
    assert "--cpus-per-task=" in text
    assert 'bash "$HERE/stage_env.sh" --dest ' in text and "STAGE_ENV=0" in text
    assert 'source "$VENV/bin/activate"' in text
