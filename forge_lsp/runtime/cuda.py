"""Raw CUDA kernels for candidates: NVRTC compilation to a cached cubin, launched on torch tensors.

A candidate module compiles its kernels at import time and launches them in ``forward``::

    from forge_lsp.runtime import cuda as fcuda

    _scale = fcuda.compile_kernel(SRC, "scale")      # NVRTC -> cubin now (cached); module load deferred

    class ModelNew(torch.nn.Module):
        def forward(self, x):
            y = torch.empty_like(x)
            _scale(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, y, 2.0, x.numel()))
            return y

Compilation needs no GPU when the target architecture is known (``arch=`` or ``$FORGE_CUDA_ARCH``),
so a candidate can be imported and precompiled on a CPU machine. The module is loaded into the
CUDA context of torch's current device at the first launch, and launches go to torch's current
stream unless ``stream=`` says otherwise.

Compiled binaries are cached in process and on disk under ``$FORGE_CACHE_DIR/nvrtc`` (default
``~/.cache/forge-lsp/nvrtc``), keyed by the sha256 of source, kernel name, options, architecture
and NVRTC version.

torch and ``cuda.bindings`` are imported inside the functions that need them, so importing this
module is cheap and works on machines without either.

This module is the candidates' one import and only re-exports: the code lives in ``compiler``
(the cached compile), ``nvrtc`` (one NVRTC compile), ``cache`` (the disk cache), ``toolkit``
(target and headers), ``params`` (kernel signatures), ``launch`` (``Kernel``), ``driver``
(driver calls and contexts) and ``errors``.
"""

from __future__ import annotations

from forge_lsp.runtime.cache import cache_dir
from forge_lsp.runtime.compiler import compile_kernel, compile_to_cubin, compile_to_ptx
from forge_lsp.runtime.errors import CudaCompileError, CudaLaunchError, KernelArgumentError
from forge_lsp.runtime.launch import STATIC_SHARED_MEM_LIMIT, Kernel
from forge_lsp.runtime.nvrtc import nvrtc_version
from forge_lsp.runtime.params import KernelParam, kernel_names, parse_kernel_params
from forge_lsp.runtime.toolkit import cuda_include_dir, resolve_arch

__all__ = [
    "CudaCompileError",
    "CudaLaunchError",
    "Kernel",
    "KernelArgumentError",
    "KernelParam",
    "STATIC_SHARED_MEM_LIMIT",
    "cache_dir",
    "compile_kernel",
    "compile_to_cubin",
    "compile_to_ptx",
    "cuda_include_dir",
    "kernel_names",
    "nvrtc_version",
    "parse_kernel_params",
    "resolve_arch",
]
