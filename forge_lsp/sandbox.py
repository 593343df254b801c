"""The one way forge runs a child process: scrubbed environment, own process group, timeout, kill.

Untrusted code (candidates, tasks, user scripts) and the tools that run it (evaluation workers,
the FX-graph probe, ncu, the peaks measurement) only ever run in child processes started here or
with what is here:

- `scrubbed_env`: the caller's environment without any variable whose name looks like a secret
  (`SECRET_ENV`: keys, tokens, passwords, credentials...); API keys never reach a child.
- `child_env`: that environment plus what forge's children need (cache folders, the Triton
  interpreter on the CPU, this package importable from a source checkout).
- `run_sandboxed`: run a command in its own process group (``start_new_session``) with its output
  in a temporary file, wait at most `timeout` seconds or until `cancel` is set, and then kill the
  whole group with SIGKILL (also when the caller is interrupted). Returns a `SandboxResult` with a
  bounded tail of the output.
- `kill_group`: SIGKILL the group of a child the caller keeps itself (the long-lived evaluation
  worker, which talks over pipes).

Standard library only: the engine, the profiler and the agent all import it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SECRET_ENV",
    "SandboxResult",
    "child_env",
    "default_cache_dir",
    "is_secret_name",
    "kill_group",
    "run_sandboxed",
    "scrubbed_env",
]

#: Environment variables never passed to children (the candidate could read or print them).
SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)", re.IGNORECASE)

#: Bytes of output `run_sandboxed` keeps by default (the tail).
DEFAULT_EXCERPT = 6000

_POLL_S = 0.05  # how often a cancel event is looked at while a child runs


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
    env = scrubbed_env()
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "FORGE_CACHE_DIR": str(cache_dir),
            "TRITON_CACHE_DIR": str(cache_dir / "triton"),
            "TORCH_EXTENSIONS_DIR": str(cache_dir / "torch_extensions"),
        }
    )
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    # the package must be importable in the child even when run from a source checkout
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def kill_group(proc: subprocess.Popen, *, wait: float | None = None) -> None:
    """SIGKILL the process group of `proc` (started with ``start_new_session=True``) if it still runs.

    Falls back to killing `proc` alone when the group cannot be signalled. With `wait`, then reaps
    `proc` for at most that many seconds. Never raises.
    """
    if proc.poll() is None:
        _kill_group_now(proc)
    if wait is not None:
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass


def _kill_group_now(proc: subprocess.Popen) -> None:
    """SIGKILL the group named by `proc`'s pid (`proc` alone if that fails). `proc` must not be reaped yet."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except OSError:
            pass


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
    """Run `cmd` in its own process group with `env` (use `child_env`/`scrubbed_env`), stdin closed.

    Waits until it exits, `timeout` seconds pass, or `cancel` is set; on a timeout, a cancel, or
    any exception in the caller's thread meanwhile (KeyboardInterrupt too) the whole process group
    gets SIGKILL. stdout and stderr go to one temporary file, of which the last `excerpt` bytes
    come back. Raises only what starting the process raises (OSError for a missing program).
    """
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            cwd=str(cwd),
            start_new_session=True,
        )
        code: int | None = None
        timed_out = cancelled = False
        try:
            if cancel is None:
                try:
                    code = proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
            else:
                code, timed_out, cancelled = _wait_or_cancel(proc, timeout, cancel)
        finally:
            if code is None:  # timed out, cancelled, or the caller was interrupted
                # not reaped yet, so its pid still names the group even if it just exited:
                # the group is killed whatever the leader did
                _kill_group_now(proc)
                proc.wait()
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
