"""Evaluation workers forked from a process that has imported torch already: a start costs a fork, not an import.

A CPU worker's start-up is mostly `import torch` (about 2 s of CPU); a batch, an optimize run or the test suite starts
one worker per candidate, and a judge beside it. The zygote is one child process (started by `sandbox.spawn`, so it
is owned, dies with forge and gets the scrubbed environment) that imports torch and the worker's module once and
never runs anything else: no candidate, task or user code ever runs in it. On request it forks a worker, which sets
up what `sandbox.spawn` would have (its own session, death with its parent, its working folder, its whole
environment, its log as stdout and stderr, its pipes at the descriptor numbers its arguments name) and then runs
`forge_lsp.engine.worker.main`.

    python -m forge_lsp.engine.zygote_child --fd N     (the zygote's side: `zygote_child.py`)

For CPU workers, unless `FORGE_ZYGOTE=0`: a process that forks CUDA workers must not have initialised CUDA, and the
GPU path keeps its fresh processes until that is measured on a GPU. A forked worker titles itself (setproctitle), so
its /proc/PID/cmdline, `ps` and `top` name `forge_lsp.engine.worker` and its arguments as a started worker's do; its
/proc/PID/environ is blank (the block held the zygote's scrubbed environment; the worker's own is in `os.environ`).
A zygote that cannot start or has died is said in the worker's log and the worker is started the usual way. What
takes effect only at a process's start (OpenMP's and MKL's thread counts, the allocator, preloaded libraries:
`AT_START_PREFIXES`) is the zygote's in every worker it forks, so there is a zygote per set of such values, started
with the worker's.

The parent's side: `fork_worker` returns a `Forked`, which stands for a `subprocess.Popen` wherever forge keeps one
(`pid`, `returncode`, `poll`, `wait`, `kill`, `terminate`, `send_signal`); its exit status comes from the zygote,
which reaps it. `sandbox.kill_tree` ends its tree as it ends any child's.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from ..sandbox import _register, _stat, package_env, spawn
from .zygote_child import ForkRequest

_MAX_MESSAGE = 1 << 20
_ENABLED_ENV = "FORGE_ZYGOTE"


def enabled(device: str) -> bool:
    """Whether workers for `device` are forked from a zygote: CPU workers, unless `FORGE_ZYGOTE` is 0 (or false, no,
    off), which starts each afresh."""
    return device == "cpu" and os.environ.get(_ENABLED_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


# ----------------------------------------------------------------------------- the parent's side
class ZygoteError(RuntimeError):
    """The zygote could not start, or could not fork a worker."""


class Forked:
    """A worker forked by the zygote, as forge keeps a `subprocess.Popen`. Not this process's child: its exit status
    is the zygote's to read, and it comes here through `Zygote`."""

    def __init__(self, zygote: Zygote, pid: int, args: Sequence[str]) -> None:
        self._zygote = zygote
        self.pid = pid
        self.args = list(args)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._zygote.wait_exit(self.pid, 0.5 if left is None else min(0.5, left))
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # once reaped, the pid may name another process
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def as_popen(self) -> subprocess.Popen:
        """This, typed as what forge keeps for a child (it answers everything forge asks of one)."""
        return cast(subprocess.Popen, self)


class Zygote:
    """One zygote process and the thread that reads what it says (forked pids, exit statuses)."""

    def __init__(self, python: str, env: Mapping[str, str], cwd: Path) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._lock = threading.Lock()  # one request at a time: each is answered before the next is sent
        self._cond = threading.Condition()
        self._answers: list[dict[str, Any]] = []
        self._exits: dict[int, int] = {}
        self._dead = ""
        self.log_path = cwd / f"zygote-{os.getpid()}.log"
        cwd.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            try:
                self.proc = spawn(
                    [python, "-m", "forge_lsp.engine.zygote_child", "--fd", str(theirs.fileno())],
                    env=env,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(theirs.fileno(),),
                )
            finally:
                theirs.close()
        threading.Thread(target=self._read, name="forge-zygote", daemon=True).start()
        ready = self._answer(timeout=120)
        if ready.get("ready") is not True:
            self.close()
            raise ZygoteError(f"the zygote did not start: {ready.get('error') or self._tail()}")

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(_MAX_MESSAGE)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self._dead = self._dead or f"the zygote ended ({self.proc.poll()}): {self._tail()[-500:]}"
                    self._cond.notify_all()
                    return
                msg = json.loads(data)
                if "exited" in msg:
                    self._exits[int(msg["exited"])] = int(msg["status"])
                else:
                    self._answers.append(msg)
                self._cond.notify_all()

    def _answer(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._answers:
                left = deadline - time.monotonic()
                if self._dead or left <= 0:
                    return {"error": self._dead or f"no answer within {timeout:g} s"}
                self._cond.wait(left)
            return self._answers.pop(0)

    @property
    def alive(self) -> bool:
        return not self._dead and self.proc.poll() is None

    def status(self, pid: int) -> int | None:
        """The worker's exit status once the zygote reaped it; a worker of a zygote that died is said killed."""
        with self._cond:
            if pid in self._exits:
                return self._exits[pid]
            # the zygote's children die with it (PDEATHSIG); one it died before reaping stays a zombie until whoever
            # inherited it reaps it (in a container with no init, never): it has stopped running all the same
            if self._dead and _stat(pid) is None:
                return -signal.SIGKILL
            return None

    def wait_exit(self, pid: int, timeout: float) -> None:
        with self._cond:
            if pid not in self._exits and not self._dead:
                self._cond.wait(timeout)
        if self._dead:
            time.sleep(min(timeout, 0.05))

    def fork(
        self, args: Sequence[str], *, env: Mapping[str, str], cwd: Path, log_fd: int, fds: Sequence[int]
    ) -> Forked:
        """A worker running `forge_lsp.engine.worker.main(args)`, with `fds` (this process's descriptors) at the same
        numbers in it, `log_fd` as its stdout and stderr and /dev/null as its stdin."""
        request = ForkRequest(args=list(args), env=dict(env), cwd=str(cwd), fds=list(fds)).model_dump_json().encode()
        with self._lock:
            if not self.alive:
                raise ZygoteError(self._dead or "the zygote has ended")
            try:
                socket.send_fds(self._sock, [request], [log_fd, *fds])
            except OSError as exc:
                raise ZygoteError(f"the zygote took no request: {exc}") from exc
            answer = self._answer(timeout=30)
        if "pid" not in answer:
            raise ZygoteError(f"the zygote forked no worker: {answer.get('error', answer)}")
        proc = Forked(self, int(answer["pid"]), ["forge_lsp.engine.worker", *args])
        _register(proc.as_popen())  # kill_tree and the guardian need only its pid, poll, wait and kill
        return proc

    def close(self) -> None:
        from ..sandbox import kill_tree

        try:
            self._sock.close()
        except OSError:
            pass
        kill_tree(self.proc, wait=5)


#: Environment variables that take effect only when the interpreter starts or torch loads (its OpenMP and MKL thread
#: pools, the allocator, the libraries loaded): a worker forked from a zygote has the zygote's, whatever its own
#: environment says. So a zygote is kept per value of these, started with the worker's: a worker asked for with
#: OMP_NUM_THREADS=1 gets one thread, not the zygote's pool (which, spinning on a busy machine, once made a reference
#: thousands of times slower in the candidate's process than in the judge).
AT_START_PREFIXES = (
    "OMP_",
    "GOMP_",
    "KMP_",
    "MKL_",
    "OPENBLAS_",
    "DNNL_",
    "ONEDNN_",
    "ATEN_",
    "PYTORCH_",
    "MALLOC_",
    "GLIBC_TUNABLES",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "PYTHONHASHSEED",
    "PYTHONMALLOC",
)
_zygotes: dict[tuple[str, int, tuple[tuple[str, str], ...]], Zygote] = {}
_zygotes_lock = threading.Lock()


def at_start(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of `env` that only take effect at a process's start (`AT_START_PREFIXES`), sorted."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(AT_START_PREFIXES)))


def get_zygote(python: str, cache_dir: Path, env: Mapping[str, str] | None = None) -> Zygote:
    """This process's zygote for `python` and the start-time variables of `env` (default: a worker's environment
    from this process's), started on first use and again after one died. A process asks for few such sets (one, or
    two where its workers are given a thread count), and a zygote is never closed while workers it forked may run."""
    wanted = at_start(package_env() if env is None else env)
    key = (python, os.getpid(), wanted)
    with _zygotes_lock:
        z = _zygotes.get(key)
        if z is None or not z.alive:
            # no secret in it: a forked worker's /proc/self/environ shows the zygote's; each worker gets its own with its
            # request
            zygote_env = {k: v for k, v in package_env().items() if not k.startswith(AT_START_PREFIXES)}
            zygote_env.update(wanted)
            z = _zygotes[key] = Zygote(python, zygote_env, cache_dir / "logs")
        return z


def fork_worker(
    python: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    log_fd: int,
    fds: Sequence[int],
    cache_dir: Path,
) -> Forked:
    """A CPU worker forked from this process's zygote (raises `ZygoteError` when there is none to fork from)."""
    return get_zygote(python, cache_dir, env).fork(args, env=env, cwd=cwd, log_fd=log_fd, fds=fds)
