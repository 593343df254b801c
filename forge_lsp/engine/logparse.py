"""Compiler and traceback messages from build logs, as (file, line, message) records.

Recognised: nvcc/NVRTC (``file.cu(12): error: ...``), gcc/clang (``file.cpp:12:5: error: ...``),
and Python tracebacks (the innermost ``File "...", line N`` frame in a file the caller cares
about, with the exception line). Lines are 1-based, as the tools print them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

_NVCC = re.compile(
    r"^(?P<file>[^\s()][^()\n]*?)\((?P<line>\d+)\): (?P<sev>error|warning|catastrophic error)"
    r"(?: #\d+(?:-D)?)?: (?P<msg>.+)$",
    re.MULTILINE,
)
_GCC = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>fatal error|error|warning): "
    r"(?P<msg>.+)$",
    re.MULTILINE,
)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.MULTILINE)
_FATAL = re.compile(r"^Fatal Python error: (?P<what>.+)$", re.MULTILINE)
_EXC = re.compile(r"^(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Failure)): (?P<msg>.+)$", re.MULTILINE)


@dataclass(frozen=True)
class SourceError:
    file: str
    line: int
    column: int
    severity: str  # error | warning
    message: str


def compile_errors(log: str) -> list[SourceError]:
    """Every nvcc/NVRTC and gcc/clang diagnostic in `log`, in order, without duplicates."""
    found: dict[tuple[str, int, str], SourceError] = {}
    for m in _NVCC.finditer(log):
        sev = "warning" if m["sev"] == "warning" else "error"
        found.setdefault(
            (m["file"], int(m["line"]), m["msg"]),
            SourceError(m["file"].strip(), int(m["line"]), 0, sev, m["msg"].strip()),
        )
    for m in _GCC.finditer(log):
        sev = "warning" if m["sev"] == "warning" else "error"
        found.setdefault(
            (m["file"], int(m["line"]), m["msg"]),
            SourceError(m["file"].strip(), int(m["line"]), int(m["col"]) - 1, sev, m["msg"].strip()),
        )
    return list(found.values())


def traceback_error(log: str, files: list[str | Path]) -> SourceError | None:
    """The innermost traceback frame in one of `files` (matched by name), with the exception message."""
    names = {Path(f).name for f in files}
    fatal = _FATAL.search(log)
    if fatal:  # faulthandler's dump of a crash: most recent call first
        frames = [m for m in _FRAME.finditer(log, fatal.end()) if Path(m["file"]).name in names]
        if frames:
            first = frames[0]
            return SourceError(first["file"], int(first["line"]), 0, "error", f"Fatal Python error: {fatal['what']}")
    frames = [m for m in _FRAME.finditer(log) if Path(m["file"]).name in names]
    if not frames:
        return None
    last = frames[-1]
    excs = list(_EXC.finditer(log))
    message = f"{excs[-1]['exc']}: {excs[-1]['msg']}" if excs else "error"
    return SourceError(last["file"], int(last["line"]), 0, "error", message)


def errors_for(log: str, file: str | Path) -> list[SourceError]:
    """Diagnostics of `log` that belong to `file` (matched by file name): compiler messages first, else the
    traceback frame."""
    name = Path(file).name
    mine = [e for e in compile_errors(log) if Path(e.file).name == name]
    if mine:
        return mine
    tb = traceback_error(log, [file])
    return [tb] if tb else []


def worker_module_name(source: str, kind: str) -> str:
    """The file name a worker executes `source` from (``<kind>_<sha256[:16]>.py`` in its cache), so that
    traceback frames in it can be mapped back to the user's file."""
    return f"{kind}_{hashlib.sha256(source.encode()).hexdigest()[:16]}.py"
