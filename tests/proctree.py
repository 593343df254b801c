"""Reading the process tree from /proc, for the tests that check what forge starts and what it leaves behind."""

from __future__ import annotations

import time
from pathlib import Path


def _table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, command line) of every running (not zombie) process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X"):
            out[int(entry.name)] = (int(fields[1]), fields[0], cmd)
    return out


def descendants(root: int) -> dict[int, str]:
    """Running descendants of `root` (not `root` itself): pid -> command line."""
    table = _table()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _state, cmd) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = cmd
                frontier.append(pid)
    return found


def running(pids) -> set[int]:
    """Those of `pids` that still run (a zombie waiting for its reaper has stopped running)."""
    table = _table()
    return {p for p in pids if p in table}


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def seconds_until_gone(pids, limit: float = 10.0) -> float:
    """Seconds until none of `pids` runs any more (`limit` + 1 if some still do after `limit`)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if not running(pids):
            return time.monotonic() - t0
        time.sleep(0.01)
    return limit + 1
