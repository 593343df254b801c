"""The on-disk NVRTC cache: its folder (``$FORGE_CACHE_DIR/nvrtc``), the key of a compile (the sha256 of
source, kernel name, file name, options, architecture, output kind and NVRTC version) and artifacts stored
and loaded by key, each file written atomically; an unreadable entry is a miss, an unwritable folder is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from forge_lsp.runtime.nvrtc import Artifact, Output, nvrtc_version

__all__ = ["cache_dir", "cache_key", "disk_load", "disk_store"]

_CACHE_FORMAT = 1


def cache_dir() -> Path:
    """Directory of the on-disk NVRTC cache: ``$FORGE_CACHE_DIR/nvrtc`` (default ``~/.cache/forge-lsp``)."""
    root = os.environ.get("FORGE_CACHE_DIR") or "~/.cache/forge-lsp"
    return Path(root).expanduser() / "nvrtc"


def cache_key(
    source: str, name: str, arch: str, options: list[str], output: Output, filename: str | None = None
) -> str:
    """The sha256 naming a compile in both caches (NVRTC's and cuda.bindings' versions included)."""
    from cuda import bindings

    payload = json.dumps(
        {
            "format": _CACHE_FORMAT,
            "output": output,
            "source": source,
            "name": name,
            "filename": filename,
            "arch": arch,
            "options": options,
            "nvrtc": nvrtc_version(),
            "cuda_bindings": getattr(bindings, "__version__", ""),
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and os.replace."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def disk_load(key: str, output: Output) -> Artifact | None:
    """The cached artifact for ``key``, or None when absent or unreadable."""
    directory = cache_dir()
    try:
        binary = (directory / f"{key}.{output}").read_bytes()
        meta = json.loads((directory / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("lowered_name"), str):
        return None
    if output == "cubin" and not binary.startswith(b"\x7fELF"):
        return None
    return Artifact(binary=binary, lowered_name=meta["lowered_name"], log=str(meta.get("log", "")))


def disk_store(key: str, output: Output, artifact: Artifact) -> None:
    """Store an artifact (metadata first, binary last, each atomically); an unwritable cache is skipped."""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        meta = {"lowered_name": artifact.lowered_name, "log": artifact.log}
        _atomic_write(directory / f"{key}.json", json.dumps(meta).encode())
        _atomic_write(directory / f"{key}.{output}", artifact.binary)
    except OSError:
        return
