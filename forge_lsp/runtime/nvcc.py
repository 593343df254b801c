"""Compile-only CUDA builds with the toolkit's ``nvcc`` (no GPU needed).

The nvcc binary is ``$CUDA_HOME/bin/nvcc`` when that exists, else the first ``nvcc`` on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from forge_lsp.runtime.errors import CudaCompileError
from forge_lsp.runtime.toolkit import resolve_arch

__all__ = ["compile_cubin", "find_nvcc", "nvcc_version"]


def find_nvcc() -> str | None:
    """Path of the nvcc to use, or None if there is none."""
    home = os.environ.get("CUDA_HOME")
    if home:
        candidate = Path(home) / "bin" / "nvcc"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("nvcc")


def nvcc_version() -> str | None:
    """nvcc's full version (e.g. ``"13.0.88"``), or None if nvcc is missing or does not answer."""
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)", proc.stdout)
    return match.group(2) if match else None


def compile_cubin(
    source: str,
    *,
    arch: str = "sm_90",
    options: Sequence[str] | str = (),
    lineinfo: bool = True,
    timeout: float = 120,
) -> bytes:
    """Compile a whole ``.cu`` source with ``nvcc -cubin -arch=<arch> [-lineinfo]`` and return the cubin.

    The source is built as ``kernel.cu`` in a temporary directory, so diagnostics read
    ``kernel.cu(LINE): error: ...``. Raises ``CudaCompileError`` (``log`` = nvcc's output) when
    nvcc fails or runs past ``timeout`` seconds, and FileNotFoundError when there is no nvcc.
    """
    nvcc = find_nvcc()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found: set CUDA_HOME or put nvcc on PATH")
    user = [options] if isinstance(options, str) else list(options)
    sm = resolve_arch(arch)
    with tempfile.TemporaryDirectory(prefix="forge-nvcc-") as tmp:
        Path(tmp, "kernel.cu").write_text(source)
        cmd = [nvcc, "-cubin", f"-arch={sm}", *(["-lineinfo"] if lineinfo else []), *user]
        cmd += ["-o", "kernel.cubin", "kernel.cu"]
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            log = _text(exc.stderr) + _text(exc.stdout)
            raise CudaCompileError(f"nvcc timed out after {timeout} s compiling for {sm}:\n{log}", log=log) from exc
        log = proc.stderr + proc.stdout
        if proc.returncode != 0:
            raise CudaCompileError(f"nvcc failed (exit {proc.returncode}) compiling for {sm}:\n{log}", log=log)
        return Path(tmp, "kernel.cubin").read_bytes()


def _text(output: str | bytes | None) -> str:
    """Partial output captured by a TimeoutExpired (bytes even in text mode on some platforms)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""
