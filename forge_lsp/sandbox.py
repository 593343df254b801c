"""The one way forge runs a child process: scrubbed environment, own session, death with its parent, kill.

Untrusted code (candidates, tasks, user scripts) and the tools that run it (evaluation workers,
build workers, the FX-graph probe, ncu, compute-sanitizer, the peaks measurement) only ever run
in child processes started here:

- `scrubbed_env`: the caller's environment without any variable whose name looks like a secret
  (`SECRET_ENV`: keys, tokens, passwords, credentials...); API keys never reach a child.
- `child_env`: that environment plus what forge's children need (cache folders, the Triton
  interpreter on the CPU, this package importable from a source checkout).
- `spawn`: start a child the caller keeps (the long-lived evaluation worker, which talks over
  pipes). `run_sandboxed`: run a command to its end with its output in a temporary file, wait at
  most `timeout` seconds or until `cancel` is set, then kill its whole tree (also when the caller
  is interrupted). Returns a `SandboxResult` with a bounded tail of the output.
- `kill_tree`: SIGKILL a child's whole tree — its process group, its session, and every
  descendant seen in /proc — now. `kill_all`: every tree this process owns (the CLI's SIGTERM and
  SIGHUP handlers, interpreter exit).
- `tree_rss`: the resident memory of a child's whole tree (the workers' host-memory cap).

Process-tree ownership: every child started here runs in its own session (its pid names its
process group and session), is registered in this process's table of live children until it is
reaped and its tree killed, and dies with this process however this process ends:

- the child gets ``PR_SET_PDEATHSIG = SIGKILL`` right after the fork (Linux). The kernel sends it
  when the *thread* that forked exits, so every child is forked by one long-lived thread of this
  process (`_Spawner`), never by a pool thread that may end first;
- a guardian process (`_Guardian`, one per forge process, in its own session) holds the read end
  of a pipe only this process writes to, and learns each child's group as it starts and ends.
  When this process dies — exit, exception, SIGTERM, SIGKILL — the pipe reads EOF and the guardian
  SIGKILLs every group and session still registered: the grandchildren (compilers, ninja, the
  profiled process under ncu, whatever a candidate started) that PDEATHSIG alone would orphan.

Standard library only: the engine, the profiler, the agent and the worker all import it.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = [
    "SECRET_ENV",
    "SandboxResult",
    "child_env",
    "children_die_with_this_process",
    "default_cache_dir",
    "package_env",
    "is_secret_name",
    "kill_all",
    "kill_group",
    "kill_tree",
    "live_children",
    "finish_sandboxed",
    "run_sandboxed",
    "scrubbed_env",
    "spawn",
    "tree_pids",
    "tree_rss",
]

#: Environment variables never passed to children (the candidate could read or print them).
SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)", re.IGNORECASE)

#: Bytes of output `run_sandboxed` keeps by default (the tail).
DEFAULT_EXCERPT = 6000

_POLL_S = 0.05  # how often a cancel event is looked at while a child runs
_PR_SET_PDEATHSIG = 1
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name may hold a secret (and so never reaches a child)."""
    return SECRET_ENV.search(name) is not None


def scrubbed_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default: this process's environment) without the secret-looking names."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if not is_secret_name(k)}


def default_cache_dir() -> Path:
    """``$FORGE_CACHE_DIR``, else ``~/.cache/forge-lsp``."""
    return Path(os.environ.get("FORGE_CACHE_DIR") or Path.home() / ".cache" / "forge-lsp")


def child_env(device: str, cache_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of forge's child processes on `device`, caching under `cache_dir`.

    The scrubbed environment, unbuffered output, the forge / Triton / torch-extension caches under
    `cache_dir`, ``TRITON_INTERPRET=1`` on the CPU (and never elsewhere), this package first on
    ``PYTHONPATH``; `extra` last (it wins).
    """
    env = package_env()
    env.update(
        {
            "FORGE_CACHE_DIR": str(cache_dir),
            "TRITON_CACHE_DIR": str(cache_dir / "triton"),
            "TORCH_EXTENSIONS_DIR": str(cache_dir / "torch_extensions"),
        }
    )
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    env.update(extra or {})
    return env


def package_env() -> dict[str, str]:
    """What every forge child's environment starts from: the scrubbed environment, unbuffered output, and this
    package importable (also when run from a source checkout)."""
    env = scrubbed_env()
    env["PYTHONUNBUFFERED"] = "1"
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# ----------------------------------------------------------------------------- /proc
@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    pgrp: int
    session: int


def _stat(pid: int) -> _Proc | None:
    """A running (not zombie) process's parent, group and session, from /proc; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in (b"Z", b"X"):  # fields: state, ppid, pgrp, session, ...
        return None
    return _Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]))


def _proc_table() -> list[_Proc]:
    """Every running process this process can see."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    out = []
    for name in names:
        if name.isdigit():
            p = _stat(int(name))
            if p is not None:
                out.append(p)
    return out


def _children(pid: int) -> list[int] | None:
    """`pid`'s children from /proc/PID/task/*/children (None when the kernel does not offer the file)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread just ended
            return None
        except (OSError, ValueError):
            continue
    return out


def tree_pids(pid: int) -> list[int]:
    """`pid` and its running descendants (children, grandchildren...), from /proc; empty when `pid` is gone."""
    if _stat(pid) is None:
        return []
    seen = [pid]
    frontier = [pid]
    table: dict[int, list[int]] | None = None
    while frontier:
        nxt: list[int] = []
        for p in frontier:
            kids = _children(p)
            if kids is None:  # no children files: one scan of the whole table instead
                if table is None:
                    table = {}
                    for q in _proc_table():
                        table.setdefault(q.ppid, []).append(q.pid)
                kids = table.get(p, [])
            for k in kids:
                if k not in seen:
                    seen.append(k)
                    nxt.append(k)
        frontier = nxt
    return seen


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(pid: int) -> int:
    """Bytes resident in memory of `pid` and all its descendants together (0 when `pid` is gone)."""
    return sum(_rss(p) for p in tree_pids(pid))


def _members(leaders: set[int]) -> list[int]:
    """Running processes whose process group or session is one of `leaders`."""
    return [p.pid for p in _proc_table() if p.pgrp in leaders or p.session in leaders]


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


# ----------------------------------------------------------------------------- death with the parent
def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()


def _die_with_parent(parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGKILL when the thread that forked it ends, and dies now if its parent
    already has (then no signal would come). Runs after ``setsid``, so it composes with ``start_new_session``
    and ``process_group``."""
    prctl = _PRCTL

    def setup() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return setup


_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


def adopt_orphans() -> bool:
    """(The worker, at start.) Processes its children leave behind are reparented to it, not to init: a process a
    candidate starts stays among the worker's descendants even when it double-forks, so the worker sees it while
    the reference runs (`harness.checks.descendants`). False where this is not Linux."""
    return _PRCTL is not None and _PRCTL(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def adopts_orphans() -> bool | None:
    """Whether this process still adopts orphans (a candidate could turn it off); None where it cannot be read."""
    if _PRCTL is None:
        return None
    flag = ctypes.c_int(0)
    if _PRCTL(_PR_GET_CHILD_SUBREAPER, ctypes.addressof(flag), 0, 0, 0) != 0:
        return None
    return bool(flag.value)


def children_die_with_this_process() -> None:
    """In a process forge started (the worker): what this process's main thread starts with `subprocess`
    (compilers, ninja, a candidate's own children) gets PDEATHSIG too, so it dies with this process.

    Only for children forked by the main thread, which lives as long as the process: a child forked by
    another thread would be killed when that thread ends. Idempotent."""
    if _PRCTL is None or getattr(subprocess.Popen, "_forge_dies_with_parent", False):
        return
    original = subprocess.Popen.__init__
    main = threading.main_thread()

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        # Popen(args, bufsize, executable, stdin, stdout, stderr, preexec_fn, ...): not given positionally
        if threading.current_thread() is main and len(args) < 7:
            own = kwargs.get("preexec_fn")
            die = _die_with_parent(os.getpid())
            if own is None:
                kwargs["preexec_fn"] = die
            else:

                def both() -> None:
                    die()
                    own()

                kwargs["preexec_fn"] = both
        original(self, *args, **kwargs)

    subprocess.Popen.__init__ = __init__  # type: ignore[method-assign]
    subprocess.Popen._forge_dies_with_parent = True  # type: ignore[attr-defined]


_GUARDIAN_CODE = r"""# forge-lsp guardian: kills its parent's child process trees once the parent is gone
import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
leaders, buf = set(), b""
while True:
    try:
        chunk = os.read(0, 65536)
    except InterruptedError:
        continue
    except OSError:
        break
    if not chunk:
        break
    *lines, buf = (buf + chunk).split(b"\n")
    for line in lines:
        try:
            n = int(line[1:])
        except ValueError:
            continue
        if line[:1] == b"+":
            leaders.add(n)
        else:
            leaders.discard(n)

def members():
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/" + name + "/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] not in (b"Z", b"X") and (int(fields[2]) in leaders or int(fields[3]) in leaders):
                out.append(int(name))
    return out

end = time.monotonic() + 5
while leaders and time.monotonic() < end:
    for g in leaders:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass
    left = members()
    if not left:
        break
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.02)
"""


class _Guardian:
    """The process that kills this process's children's trees when this process is gone (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # reentrant: `kill_all` runs in signal handlers
        self._proc: subprocess.Popen | None = None
        self._fd: int | None = None
        self._owner = 0  # the pid that started it (a forked copy of this process needs its own)

    def _start(self) -> None:
        r, w = os.pipe()  # both ends close-on-exec: no other child inherits the write end
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _GUARDIAN_CODE],
                stdin=r,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # out of reach of the terminal's and the caller's group signals
                cwd="/",
            )
        except OSError:
            os.close(w)
            self._proc, self._fd = None, None
            return
        finally:
            os.close(r)
        self._fd, self._owner = w, os.getpid()

    def _write(self, line: bytes) -> bool:
        if self._fd is None:
            return False
        try:
            os.write(self._fd, line)
            return True
        except OSError:
            return False

    def tell(self, line: bytes, live: Sequence[int]) -> None:
        """Send `line` ("+pid" or "-pid"), restarting the guardian (with every live group) if it is gone."""
        with self._lock:
            if self._owner != os.getpid() or (self._proc is not None and self._proc.poll() is not None):
                if self._fd is not None:  # a dead guardian's pipe, or a forked copy of our parent's
                    try:
                        os.close(self._fd)
                    except OSError:
                        pass
                self._proc, self._fd = None, None
            if self._fd is None:
                self._start()
                if line.startswith(b"-"):
                    line = b""
                line = b"".join(b"+%d\n" % p for p in live) + line
            if line and not self._write(line):
                self._proc, self._fd = None, None


_guardian = _Guardian()
_live: dict[int, subprocess.Popen] = {}  # children started here whose tree is not known dead, by pid
_live_lock = threading.RLock()  # reentrant: `kill_all` runs in signal handlers


def _register(proc: subprocess.Popen) -> None:
    with _live_lock:
        _live[proc.pid] = proc
        live = list(_live)
    _guardian.tell(b"+%d\n" % proc.pid, live)


def _forget(pid: int) -> None:
    with _live_lock:
        known = _live.pop(pid, None)
        live = list(_live)
    if known is not None:
        _guardian.tell(b"-%d\n" % pid, live)


def live_children() -> list[subprocess.Popen]:
    """The children started here whose trees have not been killed and reaped yet."""
    with _live_lock:
        return list(_live.values())


class _Spawner:
    """One long-lived thread that forks every child, so PDEATHSIG means 'this process died'."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pid = 0

    def _run(self) -> None:
        while True:
            fn, box, done = self._jobs.get()
            try:
                box.append((True, fn()))
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                box.append((False, exc))
            done.set()

    def call(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._run, name="forge-spawner", daemon=True)
                self._thread.start()
                self._pid = os.getpid()
        if threading.current_thread() is self._thread:
            return fn()
        box: list[Any] = []
        done = threading.Event()
        self._jobs.put((fn, box, done))
        try:
            done.wait()
        except BaseException:
            # interrupted while the child starts: it must not outlive the caller who lost it
            done.wait(30)
            if box and box[0][0]:
                kill_tree(box[0][1], wait=5)
            raise
        ok, value = box[0]
        if not ok:
            raise value
        return value


_spawner = _Spawner()


def spawn(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | Path,
    stdin: Any = subprocess.DEVNULL,
    stdout: Any = None,
    stderr: Any = None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen:
    """Start `cmd` as a child this process owns: its own session and process group (its pid names both),
    PDEATHSIG SIGKILL, registered for `kill_all` and with the guardian. End it with `kill_tree`, which also
    forgets it. Raises what starting it raises (OSError for a missing program)."""
    parent = os.getpid()

    def start() -> subprocess.Popen:
        proc = subprocess.Popen(
            list(cmd),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env=dict(env),
            cwd=str(cwd),
            pass_fds=tuple(pass_fds),
            start_new_session=True,
            preexec_fn=_die_with_parent(parent),
        )
        _register(proc)
        return proc

    return _spawner.call(start)


def kill_tree(proc: subprocess.Popen, *, wait: float | None = None) -> None:
    """SIGKILL `proc`'s whole tree now: its process group, its session, and its descendants (collected from
    /proc before the signal, while they still name their parents). With `wait`, then reaps `proc` for at most
    that many seconds. Safe on a child that already ended; never raises. A child reaped here is forgotten
    (`live_children`)."""
    pid = proc.pid
    descendants = tree_pids(pid) if proc.returncode is None else []
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        if proc.returncode is None:
            try:
                proc.kill()
            except OSError:
                pass
    for p in descendants:
        _kill(p)
    for p in _members({pid}):  # members that left the group but not the session, or the reverse
        _kill(p)
    if wait is not None:
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass
    if proc.returncode is not None:
        _forget(pid)


#: The earlier name of `kill_tree`.
kill_group = kill_tree


def kill_all(*, wait: float = 1.0) -> int:
    """SIGKILL the tree of every child this process owns and reap them (at most `wait` seconds in all).
    Returns how many there were. Safe in a signal handler."""
    procs = live_children()
    for proc in procs:
        kill_tree(proc)
    end = time.monotonic() + wait
    for proc in procs:
        kill_tree(proc, wait=max(0.0, end - time.monotonic()))
    return len(procs)


atexit.register(kill_all)


@dataclass(frozen=True)
class SandboxResult:
    """How a `run_sandboxed` child ended."""

    returncode: int | None  # None when it was killed here (timed out or cancelled)
    output: str  # the last `excerpt` bytes of stdout and stderr together, decoded
    timed_out: bool = False
    cancelled: bool = False


def run_sandboxed(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | Path,
    timeout: float,
    cancel: threading.Event | None = None,
    excerpt: int = DEFAULT_EXCERPT,
) -> SandboxResult:
    """Run `cmd` as a child (`spawn`) with `env` (use `child_env`/`scrubbed_env`), stdin closed.

    Waits until it exits, `timeout` seconds pass, or `cancel` is set; on a timeout, a cancel, or
    any exception in the caller's thread meanwhile (KeyboardInterrupt too) its whole tree gets
    SIGKILL; its tree is killed when it exits too (nothing it started outlives it). stdout and
    stderr go to one temporary file, of which the last `excerpt` bytes come back. Raises only what
    starting the process raises (OSError for a missing program).
    """
    with tempfile.TemporaryFile() as out:
        proc = spawn(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        return finish_sandboxed(proc, out, timeout=timeout, cancel=cancel, excerpt=excerpt)


def finish_sandboxed(
    proc: subprocess.Popen,
    out: IO[bytes],
    *,
    timeout: float,
    cancel: threading.Event | None = None,
    excerpt: int = DEFAULT_EXCERPT,
) -> SandboxResult:
    """Wait for a child `spawn` started with its output going to the file `out`, as `run_sandboxed` waits for its
    own: its tree killed on a timeout, a cancel or an interruption, and when it exits."""
    code: int | None = None
    timed_out = cancelled = False
    try:
        code, timed_out, cancelled = _wait_or_cancel(proc, timeout, cancel or threading.Event())
    finally:
        if code is None:  # timed out, cancelled, or the caller was interrupted
            kill_tree(proc, wait=None)
            proc.wait()
        kill_tree(proc)  # what it left behind in its group or session; forgets it
    out.seek(0, os.SEEK_END)
    size = out.tell()
    out.seek(max(0, size - excerpt))
    text = out.read().decode("utf-8", errors="replace")
    return SandboxResult(code, text, timed_out=timed_out, cancelled=cancelled)


def _wait_or_cancel(proc: subprocess.Popen, timeout: float, cancel: threading.Event) -> tuple[int | None, bool, bool]:
    """(returncode or None, timed_out, cancelled), polling `cancel` every `_POLL_S` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if cancel.is_set():
            return None, False, True
        left = deadline - time.monotonic()
        if left <= 0:
            return None, True, False
        try:
            return proc.wait(timeout=min(_POLL_S, left)), False, False
        except subprocess.TimeoutExpired:
            continue
