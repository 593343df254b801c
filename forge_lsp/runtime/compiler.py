"""The compile front door: :func:`compile_to_cubin`, :func:`compile_to_ptx` and :func:`compile_kernel` resolve
the architecture, look the compile up in the process's memory and then on disk, run NVRTC on a miss, and
store what it built. ``compile_kernel`` gives one :class:`~forge_lsp.runtime.launch.Kernel` per compile
key, so a module is loaded once per device.
"""

from __future__ import annotations

from collections.abc import Sequence

from forge_lsp.runtime.cache import cache_key, disk_load, disk_store
from forge_lsp.runtime.launch import Kernel
from forge_lsp.runtime.nvrtc import Artifact, Output, nvrtc_compile, nvrtc_options, program_name
from forge_lsp.runtime.params import parse_kernel_params
from forge_lsp.runtime.toolkit import resolve_arch

__all__ = ["compile_kernel", "compile_to_cubin", "compile_to_ptx"]

_memory_cache: dict[str, Artifact] = {}
_kernels: dict[str, Kernel] = {}
#: the text of every program compiled in this process, by the file name its line info and log use: NVRTC's programs
#: are no files, and a profiler's hot lines in them are found in these (`compiled_programs`)
_programs: dict[str, str] = {}


def _compile(
    source: str,
    name: str,
    arch: str | None,
    options: Sequence[str] | str,
    lineinfo: bool,
    output: Output,
    filename: str | None = None,
) -> tuple[str, str, Artifact]:
    """Compile through the memory and disk caches; returns (arch, cache key, artifact)."""
    sm = resolve_arch(arch)
    _programs[filename or program_name(name)] = source
    target = sm if output == "cubin" else "compute_" + sm.removeprefix("sm_")
    opts = nvrtc_options(target, options, lineinfo)
    key = cache_key(source, name, sm, opts, output, filename)
    artifact = _memory_cache.get(key) or disk_load(key, output)
    if artifact is None:
        artifact = nvrtc_compile(source, name, sm, opts, output, filename)
        disk_store(key, output, artifact)
    _memory_cache[key] = artifact
    return sm, key, artifact


def compiled_programs() -> dict[str, str]:
    """The sources this process compiled through NVRTC, by the file name their line info names (a copy)."""
    return dict(_programs)


def compile_to_cubin(
    source: str,
    name: str,
    *,
    arch: str | None = None,
    options: Sequence[str] | str = (),
    lineinfo: bool = True,
) -> bytes:
    """Compile ``source`` with NVRTC to a cubin for one architecture; no GPU is needed.

    ``name`` is the kernel to keep addressable (an ``extern "C"`` name, a C++ name or a template
    instance such as ``"k<float>"``); ``arch`` is resolved by :func:`resolve_arch`.
    Raises ``CudaCompileError`` carrying NVRTC's log.
    """
    return _compile(source, name, arch, options, lineinfo, "cubin")[2].binary


def compile_to_ptx(
    source: str,
    name: str,
    *,
    arch: str | None = None,
    options: Sequence[str] | str = (),
    lineinfo: bool = True,
) -> str:
    """Compile ``source`` with NVRTC to PTX for ``compute_XY`` of the resolved architecture."""
    return _compile(source, name, arch, options, lineinfo, "ptx")[2].binary.decode()


def compile_kernel(
    source: str,
    name: str,
    *,
    options: Sequence[str] | str = (),
    arch: str | None = None,
    lineinfo: bool = True,
    filename: str | None = None,
) -> Kernel:
    """Compile kernel ``name`` of ``source`` to a cubin now and return a launchable :class:`Kernel`.

    The cubin is cached (memory and disk); the same source, name, options and architecture give
    back the same ``Kernel`` object, so its module is loaded once per device. Default NVRTC options
    are ``--std=c++17``, ``--generate-line-info`` (when ``lineinfo``) and the CUDA include
    directory; ``options`` are appended. The parameter list is parsed from the source to marshal
    launch arguments. ``filename`` names the source in NVRTC's log and in the line info (profiler
    hot spots then point at that file); by default it is derived from ``name``. Raises
    ``CudaCompileError`` on compile errors or an unknown kernel name.
    """
    sm, key, artifact = _compile(source, name, arch, options, lineinfo, "cubin", filename)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = Kernel(
            name=name,
            lowered_name=artifact.lowered_name,
            arch=sm,
            cubin=artifact.binary,
            params=parse_kernel_params(source, name),
            log=artifact.log,
        )
        kernel = _kernels.setdefault(key, kernel)
    return kernel
