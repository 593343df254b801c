"""The device gate: timing on a GPU alone, everything else beside other work.

Several processes may use one GPU at once: a batch's device lanes (`LocalPool`), each with its judge, and any
other forge process on the machine. Verifying a candidate tolerates neighbours (its results do not depend on what
else runs), timing does not (another context's kernels share the device's time slices). So every forge process on a
GPU holds the device's gate *shared* while it runs work there, and *exclusively* while it times or runs the stream
probes (whose GPU-side sleep another context's time slices would stretch): a timing waits for the work in flight to
reach its next step, and no new work starts until the timing is done.

The gate is a reader-writer lock of two `flock` files per physical device (named after its UUID, in the machine's
temporary folder, so every forge process on the machine meets the same gate whatever its cache): a turnstile that a
timing holds while it waits, so that new shared holders queue behind it (no timing is starved by a stream of
verifications), and the lock itself. The OS releases both when a process dies: a killed worker never leaves the
device locked.

One holder per process at a time: `shared()` nests in itself, and `exclusive()` inside `shared()` gives the shared
hold up for the timing and takes it again after. Shared work calls `checkpoint()` between its steps: a timing that
waits then gets the device after the step in flight, not after the whole evaluation. Waiting is counted (`waited_s`), so a verdict can say what the
gate cost.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: the stage a process is in while it waits for the gate (its deadline: `StageTimeouts.device_wait`)
WAIT_STAGE = "device_wait"


def gate_dir() -> Path:
    """Where the gates live: the machine's temporary folder, one per user."""
    return Path(tempfile.gettempdir()) / f"forge-gates-{os.getuid()}"


class DeviceGate:
    """A machine-wide reader-writer lock over one device (see the module's docstring)."""

    def __init__(self, key: str, folder: Path | None = None) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:80] or "device"
        folder = folder or gate_dir()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.key = key
        self.path = folder / f"{safe}.lock"
        self._turn = os.open(folder / f"{safe}.turn", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._lock = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._shared = 0  # nesting depth of shared holds
        self._exclusive = False
        self.waited_s = 0.0  # seconds this process waited for the gate, in all
        #: told the stage name while this process waits for the gate (`WAIT_STAGE`), then `stage` again once it
        #: holds it: the parent's deadline for a stage does not run while another process's work holds the device
        self.notify: Callable[[str], None] | None = None
        self.stage = ""  # the stage the process is in (its deadline restarts after a wait)
        #: waits for this process's work queued on the device (a synchronization) before the gate is given up: a
        #: timing must not start while kernels launched under the shared hold still run
        self.drain: Callable[[], None] | None = None

    def close(self) -> None:
        for fd in (self._turn, self._lock):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _drain(self) -> None:
        if self.drain is not None:
            self.drain()

    def _flock(self, fd: int, op: int, waiting: list[float]) -> None:
        """`flock(fd, op)`; when it would block, the wait is said (`notify`) and timed into `waiting`."""
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if not waiting:
            waiting.append(time.perf_counter())
            if self.notify is not None:
                self.notify(WAIT_STAGE)
        fcntl.flock(fd, op)

    def _waited(self, waiting: list[float]) -> None:
        if waiting:
            self.waited_s += time.perf_counter() - waiting[0]
            if self.notify is not None and self.stage:
                self.notify(self.stage)

    def _take_shared(self) -> None:
        waiting: list[float] = []
        self._flock(self._turn, fcntl.LOCK_EX, waiting)  # behind any timing that waits
        try:
            self._flock(self._lock, fcntl.LOCK_SH, waiting)
        finally:
            fcntl.flock(self._turn, fcntl.LOCK_UN)
        self._waited(waiting)

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Held around work on the device that tolerates other work beside it."""
        if self._exclusive:  # a timing's exclusive hold covers any work
            yield
            return
        if self._shared:  # the same hold, one level deeper
            self._shared += 1
            try:
                yield
            finally:
                self._shared -= 1
            return
        self._take_shared()
        self._shared = 1
        try:
            yield
        finally:
            self._shared = 0
            try:
                self._drain()
            except Exception:  # noqa: BLE001 - a device error: the work that met it reports it, the gate opens
                pass
            fcntl.flock(self._lock, fcntl.LOCK_UN)

    def checkpoint(self) -> None:
        """A point between steps of shared work: when a timing waits for the device, give the shared hold up and
        take it again behind the timing, so that it waits for a step, not for the whole evaluation."""
        if not self._shared or self._exclusive:
            return
        try:
            fcntl.flock(self._turn, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a timing (or a moment's shared taker) holds the turnstile
            self._drain()
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._take_shared()
            return
        fcntl.flock(self._turn, fcntl.LOCK_UN)  # nobody waits

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Inside `shared()`: the hold given up while this process waits for another one (which may need the gate
        itself), taken again after."""
        if not self._shared or self._exclusive:
            yield
            return
        self._drain()
        fcntl.flock(self._lock, fcntl.LOCK_UN)
        try:
            yield
        finally:
            self._take_shared()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held around a timing: the device to this process alone. Inside `shared()`, the shared hold is given up
        for the time (not atomically: a timing of another process may come first) and taken again after."""
        if self._exclusive:
            yield
            return
        held = self._shared
        if held:
            self._drain()
            fcntl.flock(self._lock, fcntl.LOCK_UN)
        waiting: list[float] = []
        self._flock(self._turn, fcntl.LOCK_EX, waiting)
        try:
            self._flock(self._lock, fcntl.LOCK_EX, waiting)
            self._waited(waiting)
            self._exclusive = True
            try:
                yield
            finally:
                self._exclusive = False
                fcntl.flock(self._lock, fcntl.LOCK_UN)
        finally:
            fcntl.flock(self._turn, fcntl.LOCK_UN)
            if held:
                self._take_shared()


class NoGate:
    """The gate of a device that needs none (the CPU: its timings run on the host, whose load no lock can hold)."""

    waited_s = 0.0
    notify: Callable[[str], None] | None = None
    stage = ""

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        yield

    def checkpoint(self) -> None:
        pass

    def close(self) -> None:
        pass
