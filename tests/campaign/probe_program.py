"""A trial program for the fork-server tests: reports what its process looks like, then obeys.

    python -m tests.campaign.probe_program train CONFIG --dataset D -o RUN_DIR [...] 

Writes RUN_DIR/probe.json (pid, parent pid, session id, GPU variables, argv, whether torch was
already imported when the program started) and then does what CONFIG's "action" says: "exit" with
CONFIG["code"], "raise", "segfault", "hang", "print" (a line on stdout and one on stderr).
"""

import json
import os
import signal
import sys
import time

_TORCH_AT_START = "torch" in sys.modules


def main(argv: list[str]) -> int:
    config = json.loads(open(argv[1]).read())
    run_dir = argv[argv.index("-o") + 1]
    probe = {
        "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "argv": argv,
        "torch_at_start": _TORCH_AT_START, "name": __name__,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "niceness": os.nice(0),
    }
    with open(os.path.join(run_dir, "probe.json"), "w") as fh:
        json.dump(probe, fh)
    action = config.get("action", "exit")
    if action == "raise":
        raise RuntimeError("probe failure")
    if action == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if action == "hang":
        while True:
            time.sleep(1.0)
    if action == "print":
        print("probe stdout line")
        print("probe stderr line", file=sys.stderr)
    return int(config.get("code", 0))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
