"""A fault-injection trial program with the trainer's CLI contract (for the campaign runtime tests).

    python -m tests.campaign.fault_trainer train CONFIG --dataset DATA -o RUN_DIR --time-budget S
        [--device D] [--no-progress] --rank R --world-size W [--local-rank L] [--init-method URL]

It imports nothing heavy (only the standard library, and torch.distributed for multi-slot trials).
The trial's behaviour is chosen by the config: ``config["Fault"]["modes"][<trial id>]`` (the trial id
is the name of RUN_DIR) or else ``config["Fault"]["mode"]`` (a search-space key), default "succeed":

- ``succeed``: sleep ``Fault.sleep_s`` and write a completed result with :func:`objective_of`;
- ``slow``: the same after sleeping ``Fault.slow_s`` instead (a trial far longer than predicted);
- ``raise``: raise ``RuntimeError("injected failure")`` (a traceback in the log, no result.json);
- ``nan``: write a diverged result (the validation loss became NaN);
- ``hang``: sleep forever, ignoring the time budget (the agent must kill it);
- ``segfault``: die of SIGSEGV; ``sigkill``: die of SIGKILL having written nothing (what the kernel's
  OOM killer does); ``sigkill_once``: like ``sigkill`` on the first attempt on one slot, succeed on
  a retry with more slots (world size > 1);
- ``crash_once``: exit 3 on the first attempt, succeed on the next one (a marker file remembers);
- ``sigkill_then_rank1_raises``: SIGKILL on one slot; on more slots rank 1 raises at once while
  rank 0 waits in the rendezvous for ever (the runtime must kill it);
- ``nan_objective`` / ``inf_metric``: a "completed" result.json with ``"objective": NaN`` / a head
  metric ``Infinity`` (what a careless trial program writes with Python's json);
- ``bad_result``: a result.json of the wrong shape (``heads`` a list, ``epochs`` a text);
- ``result_is_dir``: a directory where result.json should be;
- ``flood``: print ``Fault.flood_mb`` MB of lines before succeeding (for the log cap);
- ``epochs``: ``Fault.epochs`` epochs of ``Fault.epoch_s`` each (``Fault.epoch_s_of``: per trial
  directory name) with the validation objective
  :func:`objective_of` + 1/epoch, one ``progress.jsonl`` line per epoch (the trainer's contract);
  after each epoch it honours ``RUN_DIR/stop`` like the trainer (status ``stopped``, best so far),
  after waiting for the campaign's verdict at the stopper's rungs as the trainer does
  (:meth:`hydragnn_ensemble.run_dir.VerdictWait.wait_after`: ``RUN_DIR/verdicts.json``,
  ``RUN_DIR/go_on``; a light import, unlike the trainer's package);
  ``ignore_stop``: the same, never looking at ``RUN_DIR/stop`` (the agent must end it);
- hostile progress files: ``huge_epoch`` (a line with epoch 2**64, then epoch 1, then completes),
  ``long_line`` (a line of 1.5 MiB without a newline until its end, then epochs 1-3),
  ``progress_fifo`` (progress.jsonl is a named pipe, and the trial hangs);
- ``lie``: like ``epochs`` but every progress line claims ``Fault.lies[<trial id>]`` or ``Fault.lie``
  (a dict, e.g. ``{"epoch_s": 1.7e308}``) in place of its honest values (rank 0 must not believe it);
- ``plant_once``: on its first attempt leave a directory where the campaign writes ``stop``,
  ``go_on``, ``verdicts.json`` and ``config.json``, a directory named ``progress.jsonl``, a dangling
  symbolic link as ``result.json`` and a named pipe as ``train.rank1.log``, then exit 3
  (``Fault.then: hang``: hang instead, for a kill -9 of the campaign); later attempts succeed;
- ``daemon``: start a grandchild that leaves the trial's process group (``setsid``), writes its pid
  to ``RUN_DIR/daemon.pid`` and sleeps for ever; then succeed (the agent must end it with the trial);
- the machine's faults: ``infra_once`` (exit code 75 on the first attempt, succeed on the next; a
  marker file remembers), ``fill_disk_once`` (on the first attempt, fill the run directory's file
  system with RUN_DIR/junk and fail writing the result; succeed on the next);
  ``bad_node``: on the MPI rank ``Fault.bad_rank`` (``PMI_RANK``, inherited from the agent; "all":
  every rank) raise
  ``RuntimeError: CUDA error: an illegal memory access was encountered`` (a node-level failure),
  elsewhere succeed.

With world size > 1 the processes rendezvous through torch.distributed (gloo, the given init method)
and all-reduce their rank numbers; rank 0 writes the result.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from pathlib import Path


def objective_of(config: dict) -> float:
    """The objective of a successful trial: a smooth function of the searched hyperparameters."""
    arch = config["NeuralNetwork"]["Architecture"]
    train = config["NeuralNetwork"]["Training"]
    value = (arch["hidden_dim"] - 40) ** 2 / 100.0 + (math.log10(train["learning_rate"]) + 3.0) ** 2
    value += 0.1 * arch.get("num_conv_layers", 0)
    return round(value, 9)


def _result(status: str, objective: float | None, reason: str | None, wall: float, slots: int) -> dict:
    return {
        "status": status, "objective": objective, "heads": {}, "num_parameters": 1, "epochs": 1,
        "best_epoch": 0 if objective is not None else None, "wall_time_s": wall,
        "peak_memory_mb": None, "slots": slots, "device": "cpu", "failure_reason": reason,
        "traceback": None, "log_tail": None, "checkpoint": None,
    }


def _write(run_dir: Path, result: dict) -> None:
    tmp = run_dir / "result.json.tmp"
    try:
        tmp.write_text(json.dumps(result, allow_nan=False))
        os.replace(tmp, run_dir / "result.json")
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _mode(config: dict, run_dir: Path) -> str:
    fault = config.get("Fault", {})
    return fault.get("modes", {}).get(run_dir.name, fault.get("mode", "succeed"))


def _allreduce_ranks(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=args.init_method, rank=args.rank,
                            world_size=args.world_size)
    t = torch.tensor([args.rank])
    dist.all_reduce(t)
    dist.destroy_process_group()
    return int(t.item())


def train(args: argparse.Namespace) -> int:
    t0 = time.time()
    config = json.loads(Path(args.config).read_text())
    run_dir = Path(args.output)
    run_dir.mkdir(parents=True, exist_ok=True)
    mode = _mode(config, run_dir)
    print(f"fault_trainer: trial {run_dir.name} rank {args.rank}/{args.world_size} mode {mode}", flush=True)
    if mode == "raise":
        raise RuntimeError("injected failure")
    bad = config.get("Fault", {}).get("bad_rank")
    if mode == "bad_node" and (bad == "all" or os.environ.get("PMI_RANK") == str(bad)):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    if mode == "hang":
        while True:
            time.sleep(1.0)
    if mode == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "sigkill" or (mode == "sigkill_once" and args.world_size == 1):
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "sigkill_then_rank1_raises":
        if args.world_size == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if args.rank == 1:
            raise RuntimeError("injected failure on rank 1")
    if mode == "crash_once":
        marker = run_dir / "crashed_once"
        if not marker.exists():
            marker.write_text("1")
            print("fault_trainer: crashing on purpose (first attempt)", flush=True)
            return 3
    fault = config.get("Fault", {})
    if mode in ("epochs", "ignore_stop", "lie"):
        return _epochs(config, run_dir, t0, obey_stop=mode != "ignore_stop",
                       lie=fault.get("lies", {}).get(run_dir.name, fault.get("lie", {})) if mode == "lie" else {})
    if mode == "plant_once" and _plant_once(run_dir, fault.get("then", "fail")):
        return 3
    if mode == "daemon":
        _start_daemon(run_dir)
    if mode in ("huge_epoch", "long_line", "progress_fifo"):
        _hostile_progress(mode, config, run_dir, t0)
    if mode in ("infra_once", "fill_disk_once"):
        marker = run_dir.parent / f"{run_dir.name}.faulted"
        if not marker.exists():
            marker.write_text("1")
            if mode == "infra_once":
                print("fault_trainer: the machine failed me (exit 75)", flush=True)
                return 75
            _fill_disk(run_dir)
    time.sleep(float(fault.get("slow_s", 2.0) if mode == "slow" else fault.get("sleep_s", 0.0)))
    if args.world_size > 1:
        total = _allreduce_ranks(args)
        print(f"fault_trainer: all-reduce of ranks = {total}", flush=True)
        if args.rank != 0:
            return 0
    if mode == "nan":
        _write(run_dir, _result("diverged", None, "validation loss is NaN at epoch 1", time.time() - t0,
                                args.world_size))
        return 0
    if mode in ("nan_objective", "inf_metric"):
        result = _result("completed", objective_of(config), None, time.time() - t0, args.world_size)
        if mode == "nan_objective":
            result["objective"] = float("nan")
        else:
            result["heads"] = {"energy": {"val_mae": float("inf"), "unit": "eV"}}
        (run_dir / "result.json").write_text(json.dumps(result))  # json writes NaN / Infinity
        return 0
    if mode == "bad_result":
        result = _result("completed", objective_of(config), None, time.time() - t0, args.world_size)
        result.update(heads=["energy"], epochs="ten")
        (run_dir / "result.json").write_text(json.dumps(result))
        return 0
    if mode == "result_is_dir":
        (run_dir / "result.json").mkdir()
        return 0
    if mode == "flood":
        line = "x" * 1023 + "\n"
        for _ in range(int(float(fault.get("flood_mb", 1.0)) * 1024)):
            sys.stdout.write(line)
        sys.stdout.flush()
        time.sleep(2.5)  # the agent checks the log's size every 2 s while the trial runs
    _write(run_dir, _result("completed", objective_of(config), None, time.time() - t0, args.world_size))
    return 0


def _hostile_progress(mode: str, config: dict, run_dir: Path, t0: float) -> None:
    """Write what a careless or hostile trial program might into progress.jsonl."""
    path = run_dir / "progress.jsonl"
    if mode == "progress_fifo":
        os.mkfifo(path)
        while True:  # hang: the agent must neither block on the pipe nor miss the time limit
            time.sleep(1.0)
    with open(path, "a") as fh:
        if mode == "huge_epoch":
            fh.write(json.dumps({"epoch": 2**64, "objective": 1.0, "heads": {}}) + "\n")
            fh.write(json.dumps({"epoch": 1, "objective": objective_of(config) + 1.0, "heads": {}}) + "\n")
        else:
            fh.write("x" * (3 << 19))  # 1.5 MiB, no newline yet
            fh.flush()
            time.sleep(0.6)  # the agent reads a full MiB of it without a newline
            fh.write("\n")
            for epoch in (1, 2, 3):
                fh.write(json.dumps({"epoch": epoch, "objective": objective_of(config) + 1.0 / epoch,
                                     "heads": {}}) + "\n")
    time.sleep(0.6)  # read while the trial runs, then its exit


def _plant_once(run_dir: Path, then: str) -> bool:
    """On the first attempt (a marker beside the run directory remembers), plant what the campaign
    must cope with when it re-runs the trial; True: exit now (``then`` "fail"), else hang."""
    marker = run_dir.parent / f"{run_dir.name}.planted"
    if marker.exists():
        return False
    marker.write_text("1")
    for name in ("stop", "go_on", "verdicts.json", "progress.jsonl"):
        (run_dir / name).mkdir(exist_ok=True)
        (run_dir / name / "inside").write_text("x")
    (run_dir / "config.json").unlink()
    (run_dir / "config.json").mkdir()
    os.symlink(run_dir / "nowhere", run_dir / "result.json")
    os.mkfifo(run_dir / "train.rank1.log")
    print("fault_trainer: planted directories, a link and a pipe", flush=True)
    if then == "hang":
        while True:
            time.sleep(1.0)
    return True


def _start_daemon(run_dir: Path) -> None:
    """Fork a grandchild that calls setsid() (out of the trial's process group), records its pid
    and sleeps for ever; the trial itself goes on."""
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                (run_dir / "daemon.pid").write_text(str(os.getpid()))
                while True:
                    time.sleep(1.0)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    deadline = time.time() + 5
    while not (run_dir / "daemon.pid").exists() and time.time() < deadline:
        time.sleep(0.01)


def _fill_disk(run_dir: Path) -> None:
    """Fill the file system of ``run_dir`` (RUN_DIR/junk) and fail writing the result (ENOSPC)."""
    block = b"\0" * (1 << 16)
    with open(run_dir / "junk", "wb") as fh:
        try:
            while True:
                fh.write(block)
                fh.flush()
        except OSError as exc:
            print(f"fault_trainer: disk full ({exc})", flush=True)
    _write(run_dir, _result("completed", 1.0, None, 0.0, 1))  # raises OSError (ENOSPC): exit 1


def _epochs(config: dict, run_dir: Path, t0: float, obey_stop: bool = True, lie: dict | None = None) -> int:
    fault = config.get("Fault", {})
    from hydragnn_ensemble.run_dir import RunDir, VerdictWait

    epochs = int(fault.get("epochs", 9))
    epoch_s = float(fault.get("epoch_s_of", {}).get(run_dir.name, fault.get("epoch_s", 0.15)))
    verdicts = VerdictWait.read(RunDir(run_dir).verdicts)
    best = math.inf
    for epoch in range(1, epochs + 1):
        time.sleep(epoch_s)
        value = objective_of(config) + 1.0 / epoch
        best = min(best, value)
        with open(run_dir / "progress.jsonl", "a") as fh:
            line = {"epoch": epoch, "objective": value, "heads": {}, "elapsed_s": time.time() - t0, "epoch_s": epoch_s}
            fh.write(json.dumps({**line, **(lie or {})}) + "\n")
        stop = run_dir / "stop"
        if obey_stop and epoch < epochs and verdicts is not None:
            verdicts.wait_after(RunDir(run_dir), epoch)
        if obey_stop and stop.exists() and epoch < epochs:
            result = _result("stopped", best, stop.read_text().strip(), time.time() - t0, 1)
            result["epochs"] = epoch
            _write(run_dir, result)
            return 0
    result = _result("completed", best, None, time.time() - t0, 1)
    result["epochs"] = epochs
    _write(run_dir, result)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fault_trainer")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train")
    p.add_argument("config")
    p.add_argument("--dataset", required=True)
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--time-budget", type=float, required=True)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--init-method", default=None)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--local-rank", type=int, default=None)
    p.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
