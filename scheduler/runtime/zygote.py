"""The fork server of one agent: imports the trial program's heavy modules once, then forks trials.

    python .../scheduler/runtime/zygote.py MODULE [MODULE ...]

(run by path, not with ``-m``, so that it does not import the ``scheduler`` package; like
``python -m`` it puts the working directory first on ``sys.path``).

A trial process started the classic way (``python -m hydragnn_ensemble train ...``) spends seconds
importing torch and torch_geometric before it trains (about 6 s of CPU here, more on a parallel file
system); a campaign of a thousand trials pays that a thousand times. This process pays it once per
agent: it imports MODULE..., then forks one child per request. The child is a fresh copy of this
process with those modules already loaded; it runs the program exactly as ``python -m PROGRAM ARGS``
would (``runpy.run_module`` with ``sys.argv`` set) and leaves with ``os._exit``.

Protocol (one JSON object per line; requests on stdin, replies on stdout):

- at start-up: ``{"ready": true, "preloaded": [...], "not_imported": {module: error}}``, or
  ``{"ready": false, "error": "..."}`` and exit when preloading initialised CUDA/HIP (a forked child
  cannot use a GPU runtime its parent initialised; the agent then exec's its trials);
- request ``{"id": N, "program": MODULE, "args": [...], "log_path": PATH, "niceness": K}`` ->
  ``{"id": N, "pid": PID}`` or ``{"id": N, "error": "..."}``;
- whenever a child ends: ``{"exited": PID, "returncode": CODE}`` (``subprocess`` convention:
  negative = killed by that signal).

Isolation is the same as for an exec'd trial: each child starts its own session (so the agent can
kill its process group), is a child subreaper and gets ``PR_SET_PDEATHSIG=SIGKILL`` (this server
itself gets it too, from the agent), so nothing outlives a dead agent. This server is a subreaper
too: what an ended trial left behind becomes its child, which the agent kills and this server
reaps (without an exit report: it was no trial). End of stdin (the agent closed the pipe or died):
the server kills its children's groups and exits.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import runpy
import select
import signal
import sys
import traceback

_PR_SET_PDEATHSIG = 1


_PR_SET_CHILD_SUBREAPER = 36  # (scheduler.runtime.process_tree.SUBREAPER; this file imports nothing of ours)


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _become_subreaper() -> None:
    """Orphans of this process's descendants become its children (scheduler.runtime.process_tree)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _forget_preloaded(program: str) -> None:
    """Drop the program's own module (not its imports) so that it runs as ``__main__`` afresh, as
    under ``python -m``, instead of next to its preloaded copy."""
    sys.modules.pop(f"{program}.__main__", None)
    module = sys.modules.get(program)
    if module is not None and not hasattr(module, "__path__"):
        del sys.modules[program]


def _print_program_traceback(exc: BaseException) -> None:
    """The traceback without this server's and runpy's frames: what the program alone would print."""
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename == __file__
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _run_child(request: dict, keep_fds: tuple[int, ...]) -> None:
    """In the forked child: detach, redirect output to the log, run the program; never returns."""
    code = 1
    try:
        os.setsid()
        os.nice(request.get("niceness", 0))
        _die_with_parent()
        _become_subreaper()  # what the trial starts stays in its tree, whatever session it moves to
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        log = os.open(request["log_path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        for fd in (log, null, *keep_fds):
            os.close(fd)
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
        program = request["program"]
        sys.argv = [program, *request["args"]]
        _forget_preloaded(program)
        try:
            runpy.run_module(program, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except BaseException as exc:  # the program's own crash: report it like the interpreter would
            _print_program_traceback(exc)
            code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


class _Server:
    def __init__(self, reply_fd: int) -> None:
        self.reply_fd = reply_fd
        self.children: set[int] = set()
        self.buffer = b""
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        _become_subreaper()  # an ended trial's leftovers come here: the agent kills them, we reap

    def reply(self, obj: dict) -> None:
        os.write(self.reply_fd, (json.dumps(obj) + "\n").encode())

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.children:  # not an ended trial's leftover the agent killed (adopted)
                self.children.discard(pid)
                self.reply({"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})

    def start(self, request: dict) -> None:
        try:
            pid = os.fork()
        except OSError as exc:
            self.reply({"id": request.get("id"), "error": f"fork failed: {exc}"})
            return
        if pid == 0:
            _run_child(request, keep_fds=(self.wake_r, self.wake_w, self.reply_fd))
        self.children.add(pid)
        self.reply({"id": request["id"], "pid": pid})

    def shutdown(self) -> None:
        """Kill every child's process group and reap the children."""
        for pid in self.children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:  # between fork() and its setsid()
                os.kill(pid, signal.SIGKILL)
            except PermissionError:
                pass
        for pid in self.children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    def serve(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([0, self.wake_r], [], [])
            except InterruptedError:
                continue
            if self.wake_r in ready:
                try:
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            self.reap()
            if 0 not in ready:
                continue
            chunk = os.read(0, 65536)
            if not chunk:
                self.shutdown()
                return
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    self.start(json.loads(line))


def _gpu_initialised() -> bool:
    """True if preloading initialised CUDA/HIP, which a forked child can no longer use."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


def main(modules: list[str]) -> int:
    _die_with_parent()
    reply_fd = os.dup(1)  # the protocol pipe; fd 1 becomes stderr so that nothing a preloaded
    os.dup2(2, 1)         # module prints can corrupt it
    # a module asking torch.cuda.is_available() at import must not initialise CUDA in the server
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    preloaded, failed = [], {}
    for name in modules:
        try:
            importlib.import_module(name)
            preloaded.append(name)
        except Exception as exc:  # noqa: BLE001 - reported to the agent; the trial will show it again
            failed[name] = f"{type(exc).__name__}: {exc}"
    if _gpu_initialised():
        os.write(reply_fd, (json.dumps({"ready": False, "error": "initialised the GPU runtime while "
                                        f"importing {modules}; forked trials could not use it"})
                            + "\n").encode())
        return 0
    gc.freeze()  # what is loaded now is never collected: a child's collections do not copy its pages
    server = _Server(reply_fd)
    server.reply({"ready": True, "preloaded": preloaded, "not_imported": failed})
    server.serve()
    return 0


if __name__ == "__main__":
    sys.path[0] = os.getcwd()  # where "python -m PROGRAM" would look first, not this file's folder
    sys.exit(main(sys.argv[1:]))
