"""Bytes one process writes once and others map, read-only, without copying them through a pipe.

The judge's input sets go to a task's workers this way (`pipe.Sealed`): the judge writes them into a memory file
(`memfd_create`) and seals it against any write, growth or shrinking (`F_SEAL_WRITE`, ...), then names it by its
path under the judge's ``/proc/<pid>/fd``. A worker opens that path and maps it read-only: no byte crosses a pipe
(two pipes before: judge to parent, parent to worker, about 0.3 s per 128 MiB on the GPU host). The seals hold for
every process, the file's creator included: nothing a candidate does in its worker (opening the path for writing,
`mprotect`) changes the sets the next candidate is sent. The file lives while the judge keeps it open.

Linux only (`supported`); elsewhere, or where ``/proc`` is not readable, the sets travel on the pipes as before.
"""

from __future__ import annotations

import fcntl
import functools
import mmap
import os
from collections.abc import Iterable
from dataclasses import dataclass

_SEALS = (
    getattr(fcntl, "F_SEAL_SEAL", 0)
    | getattr(fcntl, "F_SEAL_SHRINK", 0)
    | getattr(fcntl, "F_SEAL_GROW", 0)
    | getattr(fcntl, "F_SEAL_WRITE", 0)
)


@dataclass
class SealedFile:
    """A sealed memory file this process holds open (`seal`): mapped by others through `path` while it is open."""

    fd: int
    nbytes: int

    @property
    def path(self) -> str:
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def seal(parts: Iterable[bytes | bytearray | memoryview], name: str = "forge-sealed") -> SealedFile:
    """`parts`, one after the other, in a new memory file sealed against any change. Raises `OSError`."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        total = 0
        for part in parts:
            view = memoryview(part).cast("B")
            while view:
                n = os.write(fd, view)
                view, total = view[n:], total + n
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    except BaseException:
        os.close(fd)
        raise
    return SealedFile(fd, total)


def open_sealed(path: str, nbytes: int) -> mmap.mmap:
    """The sealed file at `path` (`SealedFile.path`), mapped read-only. `OSError` when it cannot be opened, is not
    `nbytes` long, or is not sealed against writes (then it is not the file the judge wrote)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        if nbytes <= 0 or size != nbytes or seals & _SEALS != _SEALS:
            raise OSError(f"{path}: {size} bytes, seals {seals:#x}; expected {nbytes} bytes, sealed against writes")
        return mmap.mmap(fd, nbytes, prot=mmap.PROT_READ)
    finally:
        os.close(fd)


@functools.cache
def supported() -> bool:
    """Whether sealed files can be made and opened by path here (Linux with memfd seals and a readable ``/proc``)."""
    if not all(hasattr(fcntl, s) for s in ("F_ADD_SEALS", "F_GET_SEALS", "F_SEAL_WRITE")) or not hasattr(
        os, "memfd_create"
    ):
        return False
    try:
        f = seal([b"forge"])
        try:
            with open_sealed(f.path, f.nbytes) as m:
                return m[:] == b"forge"
        finally:
            f.close()
    except OSError:
        return False
