"""Cost of starting a real trial: the fork-server launcher against a new interpreter per trial.

    .venv/bin/python -m bench.trial_launch [--trials 5] [--repeats 1]

Each trial is the real trainer (``python -m hydragnn_ensemble train``: GIN, one epoch on 64 EMT
alloy graphs) started by an agent's launcher, one after another, without MPI. Anchor: the exec
launcher (what every trial paid before the fork server: interpreter start-up plus importing torch,
torch_geometric and the trainer). Ours: :class:`ForkServerLauncher` (the server's one-time import is
timed separately and not counted per trial). Printed per trial: wall time from launch to exit, and
CPU seconds of the trial processes; medians over the trials; the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _dataset(tmp: Path) -> tuple[Path, Path]:
    from graph_builders.datasets.alloy import make_alloy_dataset
    from graph_builders.store import write_dataset

    data = make_alloy_dataset(64, components=(2, 3), sizes=(32,), seed=0, progress=False)
    store = tmp / "alloy.bp"
    write_dataset(store, data.graphs, data.heads, metadata=data.metadata, seed=0)
    config = json.loads((REPO / "examples" / "alloy" / "formation_energy.json").read_text())
    config["NeuralNetwork"]["Training"].update(num_epoch=1, batch_size=32)
    path = tmp / "config.json"
    path.write_text(json.dumps(config))
    return store, path


def _run(launcher, tmp: Path, name: str, store: Path, config: Path, n: int) -> list[tuple[float, float]]:
    from scheduler.runtime.messages import StartTrial

    out = []
    for i in range(n):
        run_dir = tmp / f"{name}{i}"
        run_dir.mkdir()
        start = StartTrial(trial_id=i, attempt=0, rank=0, world_size=1, program="hydragnn_ensemble",
                           config_path=str(config), data_path=str(store), run_dir=str(run_dir),
                           log_path=str(run_dir / "train.log"), time_budget_s=600, kill_after_s=660,
                           init_method=None, device="cpu", read_result=True)
        cpu0, t0 = _children_cpu_s(), time.perf_counter()
        proc = launcher.launch(start)
        while proc.poll() is None:
            launcher.wait([proc], 0.05)
        proc.close()
        wall = time.perf_counter() - t0
        if proc.poll() != 0:
            raise RuntimeError(f"trial {name}{i} failed: see {start.log_path}")
        result = json.loads((run_dir / "result.json").read_text())
        if result["status"] != "completed":
            raise RuntimeError(f"trial {name}{i}: {result['status']} {result['failure_reason']}")
        # a forked child is reaped by the server, so its CPU shows up when the server is reaped:
        # for the fork server the per-trial CPU is measured at the end (see main)
        out.append((wall, _children_cpu_s() - cpu0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    os.chdir(REPO)
    from scheduler.runtime.fork_server import ForkServerLauncher, default_preload
    from scheduler.runtime.launch import ExecLauncher

    with tempfile.TemporaryDirectory(prefix="trial_launch_") as d:
        tmp = Path(d)
        store, config = _dataset(tmp)
        binding = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}

        execd = _run(ExecLauncher(binding), tmp, "exec", store, config, args.trials)

        cpu0, t0 = _children_cpu_s(), time.perf_counter()
        server = ForkServerLauncher(binding, default_preload("hydragnn_ensemble"))
        server._await(lambda m: m.get("ready"), 900, "finish importing")
        ready_s = time.perf_counter() - t0
        forked = _run(server, tmp, "fork", store, config, args.trials)
        server.close()
        server_cpu = _children_cpu_s() - cpu0  # the server's import + every forked trial

    e_wall = statistics.median(w for w, _ in execd)
    f_wall = statistics.median(w for w, _ in forked)
    e_cpu = statistics.median(c for _, c in execd)
    print(f"{args.trials} real trials (GIN, 1 epoch, 64 alloy graphs), one after another, medians:")
    print(f"  exec (a new interpreter per trial):   {e_wall:.2f} s wall, {e_cpu:.2f} s CPU per trial")
    print(f"  fork server:                          {f_wall:.2f} s wall per trial; "
          f"server start-up (imports once) {ready_s:.2f} s; CPU of server + all trials {server_cpu:.2f} s "
          f"= {server_cpu / args.trials:.2f} s per trial")
    print(f"  ratio exec/fork per trial: wall {e_wall / f_wall:.2f}x; "
          f"CPU {e_cpu * args.trials / server_cpu:.2f}x over {args.trials} trials (server start-up included)")


if __name__ == "__main__":
    main()
