"""What every use case shares: the error a person can act on, and where a workspace is."""

from __future__ import annotations

from pathlib import Path


class UseCaseError(Exception):
    """A request that cannot be carried out as asked (a missing file, no such class or kernel, a bad
    configuration). Its message says what to change; adapters show it (the CLI exits 2)."""


def find_workspace(path: Path) -> Path:
    """The nearest folder above `path` with pyproject.toml, forge.toml, .forge or .git; else its folder.
    That folder's `.forge/` keeps the runs, and its configuration applies."""
    start = path.resolve().parent if path.is_file() or path.suffix else path.resolve()
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in ("forge.toml", "pyproject.toml", ".forge", ".git")):
            return folder
    return start
