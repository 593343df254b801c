"""Runtime helpers that kernel candidates import: CUDA compilation (NVRTC, nvcc) and launches.

``from forge_lsp.runtime import cuda as fcuda`` gives :func:`~forge_lsp.runtime.cuda.compile_kernel`;
``forge_lsp.runtime.nvcc`` compiles whole files with the CUDA toolkit's nvcc. Importing this
package loads neither torch nor ``cuda.bindings``.
"""

from forge_lsp.runtime.errors import CudaCompileError, CudaLaunchError, KernelArgumentError

__all__ = ["CudaCompileError", "CudaLaunchError", "KernelArgumentError"]
