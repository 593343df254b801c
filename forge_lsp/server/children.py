"""The processes this server started, found and killed when the session ends.

Jobs kill their own workers when cancelled; this is the backstop for the rest: a worker a job thread was
starting while it was cancelled, a profiler's child. Workers run in process groups of their own (see
`forge_lsp.sandbox`), so each descendant's group is killed with it. Linux: read from ``/proc``; elsewhere
nothing is found.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

log = logging.getLogger("forge_lsp.server")


def _parent_of(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return int(fields[1]) if fields[0] != "Z" else None  # a zombie is dead already: only its reaping is left


def descendants(root: int | None = None) -> list[int]:
    """Every live process below `root` (this process by default), parents before their children."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if name.isdigit():
            parent = _parent_of(int(name))
            if parent is not None:
                children.setdefault(parent, []).append(int(name))
    out: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(0), []):
            out.append(child)
            todo.append(child)
    return out


def kill_descendants(timeout: float = 0.5) -> list[int]:
    """SIGKILL every descendant and its process group (never this process's own group), then reap the
    direct children for at most `timeout` seconds. Returns the pids found."""
    pids = descendants()
    if not pids:
        return []
    own_group = os.getpgid(0)
    for pid in pids:
        try:
            group = os.getpgid(pid)
            if group != own_group:
                os.killpg(group, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no children left
            break
        if reaped == 0:
            time.sleep(0.01)
    return pids
