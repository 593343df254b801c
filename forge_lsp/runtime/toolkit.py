"""What NVRTC compiles for and with: the target architecture (``arch=``, ``$FORGE_CUDA_ARCH``, else torch's
current device) and the CUDA toolkit's include directory (``$CUDA_HOME``/``$CUDA_PATH``, ``cuda.pathfinder``,
``/usr/local/cuda``). torch and ``cuda.pathfinder`` are imported only inside the functions that ask them.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

from forge_lsp.runtime.errors import CudaCompileError

__all__ = ["cuda_include_dir", "resolve_arch"]


_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d{2,3})([af]?)$")


def resolve_arch(arch: str | None = None) -> str:
    """Return the cubin target as ``sm_XY`` (or ``sm_XYa``/``sm_XYf``).

    Taken from ``arch`` (``"sm_90"``, ``"sm_90a"``, ``"90"``), else ``$FORGE_CUDA_ARCH``, else
    the compute capability of torch's current CUDA device; for capability 9.0 and newer the
    architecture-specific variant (``sm_90a``) is chosen, since the cubin only has to run on that
    very device and the variant unlocks wgmma/TMA-class instructions.
    Raises ``CudaCompileError`` when none of the three is available.
    """
    value = (arch or os.environ.get("FORGE_CUDA_ARCH", "")).strip()
    if not value:
        value = _torch_device_arch() or ""
    if not value:
        raise CudaCompileError(
            "no CUDA target architecture: pass arch='sm_90', set FORGE_CUDA_ARCH=sm_90, "
            "or run where torch.cuda.is_available()"
        )
    match = _ARCH_RE.match(value.lower())
    if match is None:
        raise ValueError(f"invalid CUDA architecture {value!r}: expected e.g. 'sm_90', 'sm_90a' or '90'")
    return f"sm_{match.group(1)}{match.group(2)}"


def _torch_device_arch() -> str | None:
    """The architecture of torch's current CUDA device, or None without torch or a device."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


@cache
def cuda_include_dir() -> str | None:
    """A CUDA toolkit include directory holding ``cuda_fp16.h``, or None.

    NVRTC has no header search path of its own; this directory is added to every compile so that
    ``#include <cuda_fp16.h>``/``<cuda_bf16.h>`` work. Looked up in ``$CUDA_HOME``/``$CUDA_PATH``,
    then through ``cuda.pathfinder``, then ``/usr/local/cuda``.
    """
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cudart")
    except Exception:  # noqa: BLE001 - optional discovery: an old or broken pathfinder just finds nothing
        found = None
    if found:
        candidates.append(Path(found))
    candidates.append(Path("/usr/local/cuda/include"))
    for directory in candidates:
        if (directory / "cuda_fp16.h").is_file():
            return str(directory)
    return None
