"""The zygote's side of `zygote.py`: a child process that imports torch and the worker once, then forks a worker per
request. Runs only in its own process (started by `zygote.Zygote`); it never runs candidate, task or user code
itself, and each forked worker sets itself up as `sandbox.spawn` would before `worker.main`.

    python -m forge_lsp.engine.zygote_child --fd N

Messages on the socket (SOCK_SEQPACKET, one JSON object each): a request `{"args", "env", "cwd", "fds"}` comes with
the worker's log and its pipes as descriptors (SCM_RIGHTS); the answer is `{"pid"}` or `{"error"}`; each worker's
end is `{"exited": pid, "status": code}` (its exit code, or minus the signal that killed it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from typing import Any

from ..child import ChildRequest

_MAX_MESSAGE = 1 << 20


class ForkRequest(ChildRequest):
    """What the zygote forks a worker for, sent over its socket with the worker's log and pipes as descriptors:
    the worker's arguments, its whole environment, its working folder, and the numbers its pipes must take."""

    args: list[str]
    env: dict[str, str]
    cwd: str
    fds: list[int]


def _child(sock: socket.socket, wake: int, request: ForkRequest, fds: list[int]) -> None:
    """In the forked worker: become what `sandbox.spawn` makes, then run the worker. Never returns."""
    code = 1
    try:
        import fcntl

        from ..sandbox import _die_with_parent

        os.setsid()
        _die_with_parent(os.getppid())()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        os.close(wake)
        targets = list(request.fds)
        # above every number they must take, then each at its own number; the log as stdout and stderr
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 1024) for fd in fds]
        for fd in fds:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(high[0], 1)
        os.dup2(high[0], 2)
        for fd, target in zip(high[1:], targets, strict=True):
            os.dup2(fd, target, inheritable=True)
        keep = {0, 1, 2, *targets}
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in keep:
                try:
                    os.close(int(name))
                except OSError:
                    pass
        os.chdir(request.cwd)
        import setproctitle

        # /proc/PID/cmdline (ps, top, forge's own tests) names the worker, not the zygote. Before the environment is
        # replaced: setproctitle finds the room it writes in by the environment block, which it overwrites (it held
        # the zygote's scrubbed environment; the worker's own is in os.environ)
        setproctitle.setproctitle(" ".join([sys.executable, "-m", "forge_lsp.engine.worker", *request.args]))
        os.environ.clear()
        os.environ.update(request.env)
        import io
        import random

        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True, line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True, line_buffering=True)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stdin, /dev/null
        random.seed()  # not the zygote's sequence, shared by every worker it forked
        sys.argv = ["forge_lsp.engine.worker", *request.args]
        from . import worker

        code = worker.main(list(request.args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - said in the log, then the process ends
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        _EXIT(int(code or 0))


_EXIT = os._exit  # the worker wraps os._exit to say who calls it; the zygote's child ends without that


def serve(sock: socket.socket) -> int:
    """The zygote's loop: fork a worker per request, report each worker's exit. Single-threaded, so forking is safe."""
    import select

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)

    def send(msg: dict[str, Any]) -> bool:
        try:
            sock.send(json.dumps(msg).encode())
            return True
        except OSError:
            return False

    def reap() -> bool:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                return True
            if not send({"exited": pid, "status": os.waitstatus_to_exitcode(status)}):
                return False

    if not send({"ready": True}):
        return 0
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in readable:
            try:
                os.read(wake_r, 512)
            except BlockingIOError:
                pass
            if not reap():
                return 0
        if sock.fileno() in readable:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 64)
            except OSError:
                return 0
            if not data:  # forge is gone
                return 0
            try:
                request = ForkRequest.model_validate_json(data)
                if len(fds) != 1 + len(request.fds):
                    raise ValueError(f"{len(fds)} descriptors came with a request naming {len(request.fds)} and a log")
                pid = os.fork()
            except Exception as exc:  # noqa: BLE001 - answered; the zygote goes on
                for fd in fds:
                    os.close(fd)
                send({"error": f"{type(exc).__name__}: {exc}"})
                continue
            if pid == 0:
                _child(sock, wake_r, request, fds)
            for fd in fds:
                os.close(fd)
            send({"pid": pid})
            reap()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="forge-zygote")
    ap.add_argument("--fd", type=int, required=True)
    args = ap.parse_args(argv)
    sock = socket.socket(fileno=args.fd)
    try:
        import setproctitle  # noqa: F401 - set up once here (it moves the environment block); each worker titles itself
        import torch  # noqa: F401 - the import every worker would otherwise pay

        from . import worker  # noqa: F401 - and the worker's own modules
        from .harness.checks import snapshot_kernels

        snapshot_kernels()  # the dispatcher before any candidate code: taken once, every fork inherits it
    except BaseException as exc:  # noqa: BLE001 - said to the parent, which starts workers the usual way
        sock.send(json.dumps({"error": f"the zygote could not import torch: {exc}"}).encode())
        return 1
    return serve(sock)


if __name__ == "__main__":
    sys.exit(main())
