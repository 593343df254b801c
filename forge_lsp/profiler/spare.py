"""Spare profiled processes: started before anyone asks for a profile, so a profile in the process costs the call
and its build, not Python's and torch's start-up and CUDA's and CUPTI's (about 3.5 s of the 6-7 s a cold profile
takes).

A spare (`target.serve_spare`) imports torch, starts CUDA on its device and CUPTI's module capture, says ``ready``
and waits for one request. It profiles that one call and exits: candidate code never shares a process with the next
profile. Taking a spare starts the next one behind it. Each spare holds a CUDA context on its device while it
waits (a few hundred MiB); ``FORGE_PROFILE_SPARE=0`` turns them off, and `close` ends them.

The language server (from the moment its workspace opens on a GPU machine) and the optimizer's Judge keep spares
(`shared`); the one-shot CLI does not.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..sandbox import child_env, finish_sandboxed, kill_tree, spawn
from .target import SPARE_FLAG


@dataclass
class Spare:
    """A started spare: its process, and the file its output goes to."""

    proc: subprocess.Popen
    out: IO[bytes]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> bool:
        """Whether it has started (torch, CUDA, CUPTI) and waits for its request."""
        return self.alive() and os.pread(self.out.fileno(), 64, 0).startswith(b"ready")

    def run(self, request_file: Path, timeout: float, cancel: threading.Event | None = None):
        """Hand it the request and wait for it, as `run_sandboxed` waits (`SandboxResult`): killed on a timeout or
        when `cancel` is set."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(f"{request_file}\n".encode())
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died meanwhile: its exit status and output say why
        try:
            return finish_sandboxed(self.proc, self.out, timeout=timeout, cancel=cancel)
        finally:
            self.out.close()

    def end(self) -> None:
        kill_tree(self.proc, wait=None)
        self.proc.wait()
        kill_tree(self.proc)
        self.out.close()


def enabled() -> bool:
    return os.environ.get("FORGE_PROFILE_SPARE", "1") != "0"


class Spares:
    """At most one waiting spare per (device, cache)."""

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable
        self._waiting: dict[tuple[str, Path], Spare] = {}
        self._lock = threading.Lock()

    def warm(self, device: str, cache: Path) -> None:
        """Start a spare for `device` and `cache` unless one waits already."""
        if device == "cpu" or not enabled():
            return
        key = (device, Path(cache))
        with self._lock:
            spare = self._waiting.get(key)
            if spare is not None and spare.alive():
                return
            self._waiting[key] = self._start(device, Path(cache))

    def take(self, device: str, cache: Path) -> Spare | None:
        """The waiting spare for `device` and `cache`, if one is alive (the next one is started behind it)."""
        if not enabled():
            return None
        key = (device, Path(cache))
        with self._lock:
            spare = self._waiting.pop(key, None)
        if spare is not None and not spare.alive():
            spare.end()
            spare = None
        self.warm(device, cache)
        return spare

    def wait_ready(self, device: str, cache: Path, timeout: float = 60.0) -> bool:
        """Wait until the spare for `device` and `cache` is ready (started if none waits); whether it is."""
        self.warm(device, cache)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                spare = self._waiting.get((device, Path(cache)))
            if spare is None or not spare.alive():
                return False
            if spare.ready():
                return True
            time.sleep(0.05)
        return False

    def _start(self, device: str, cache: Path) -> Spare:
        work = Path(tempfile.mkdtemp(prefix="spare-", dir=_mkdir(cache / "profiles")))
        out = tempfile.TemporaryFile()
        proc = spawn(
            [self.python, "-m", "forge_lsp.profiler.target", SPARE_FLAG, device],
            env=child_env(device, cache),
            cwd=work,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        return Spare(proc, out)

    def close(self) -> None:
        with self._lock:
            waiting, self._waiting = list(self._waiting.values()), {}
        for spare in waiting:
            spare.end()


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


_SHARED: Spares | None = None
_SHARED_LOCK = threading.Lock()


def close_shared() -> None:
    """End the spares `shared` started, if any."""
    with _SHARED_LOCK:
        spares = _SHARED
    if spares is not None:
        spares.close()


def shared() -> Spares:
    """This process's spares (the language server's and the Judge's)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = Spares()
        return _SHARED
