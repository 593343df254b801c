"""The runtime's errors: compile failures (NVRTC or nvcc), CUDA driver failures, and launch arguments that do
not fit a kernel's parameters. Standard library only; every other runtime module raises these.
"""

from __future__ import annotations

__all__ = ["CudaCompileError", "CudaLaunchError", "KernelArgumentError"]


class CudaCompileError(RuntimeError):
    """NVRTC or nvcc could not compile a source, or the requested kernel is not in it.

    The message holds the compiler's full log (with ``file(line)`` locations); ``log`` holds the
    log alone and ``kernel_name`` the kernel asked for (``None`` for whole-file nvcc builds).
    """

    def __init__(self, message: str, *, log: str = "", kernel_name: str | None = None) -> None:
        super().__init__(message)
        self.log = log
        self.kernel_name = kernel_name


class CudaLaunchError(RuntimeError):
    """A CUDA driver call failed; ``result`` is the CUresult name (e.g. ``CUDA_ERROR_INVALID_VALUE``)."""

    def __init__(self, message: str, *, result: str | None = None) -> None:
        super().__init__(message)
        self.result = result


class KernelArgumentError(TypeError, ValueError):
    """A launch argument does not fit the kernel's parameter (wrong kind, device, dtype or range)."""
