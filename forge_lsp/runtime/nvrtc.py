"""One NVRTC compile: the option list (target, C++17, line info, the toolkit's include directory), the
program created, compiled and read back (cubin or PTX, the lowered name, the log), and the error of a failed
compile, which names the kernels present when the one asked for is not. ``cuda.bindings`` is imported only
inside the functions that call NVRTC.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from forge_lsp.runtime.errors import CudaCompileError
from forge_lsp.runtime.params import kernel_names, not_found_message
from forge_lsp.runtime.toolkit import cuda_include_dir

__all__ = ["Artifact", "Output", "nvrtc_compile", "nvrtc_options", "nvrtc_version"]

Output = Literal["cubin", "ptx"]


@cache
def nvrtc_version() -> str:
    """NVRTC's ``major.minor`` version as reported by the library loaded by ``cuda.bindings``."""
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    _nvrtc_check(err, "nvrtcVersion")
    return f"{major}.{minor}"


def _as_options(options: Sequence[str] | str) -> list[str]:
    """User options as a list; a lone string is one option, not a sequence of characters."""
    return [options] if isinstance(options, str) else [str(o) for o in options]


def nvrtc_options(target: str, options: Sequence[str] | str, lineinfo: bool) -> list[str]:
    """The full NVRTC option list: target, C++17 (unless the user sets a standard), line info, includes."""
    user = _as_options(options)
    opts = [f"--gpu-architecture={target}"]
    if not any(o.startswith(("--std", "-std")) for o in user):
        opts.append("--std=c++17")
    if lineinfo:
        opts.append("--generate-line-info")
    include = cuda_include_dir()
    if include:
        opts.append(f"--include-path={include}")
    return opts + user


@dataclass(frozen=True)
class Artifact:
    """One NVRTC output: the binary (cubin bytes or PTX text as bytes), the lowered name and the log."""

    binary: bytes
    lowered_name: str
    log: str


def _nvrtc_check(err: Any, call: str) -> None:
    """Raise CudaCompileError when an NVRTC call other than the compile itself fails."""
    if int(err) != 0:
        raise CudaCompileError(f"{call} failed: {getattr(err, 'name', err)}")


def program_name(name: str) -> str:
    """The file name NVRTC uses in its log lines, e.g. ``scale.cu(4): error: ...``."""
    return re.sub(r"\W", "_", name.split("<", 1)[0].strip()) + ".cu"


def nvrtc_compile(
    source: str, name: str, arch: str, options: list[str], output: Output, filename: str | None = None
) -> Artifact:
    """Run NVRTC once: compile ``source`` with ``name`` as a name expression and fetch the output."""
    from cuda.bindings import nvrtc

    program = filename or program_name(name)
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), program.encode(), 0, [], [])
    _nvrtc_check(err, "nvrtcCreateProgram")
    try:
        _nvrtc_check(nvrtc.nvrtcAddNameExpression(prog, name.encode())[0], "nvrtcAddNameExpression")
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        _nvrtc_check(err, "nvrtcGetProgramLogSize")
        raw_log = bytearray(size)
        _nvrtc_check(nvrtc.nvrtcGetProgramLog(prog, raw_log)[0], "nvrtcGetProgramLog")
        log = raw_log.rstrip(b"\0").decode(errors="replace")
        if int(result) != 0:
            raise _compile_failure(source, name, arch, log)
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, name.encode())
        _nvrtc_check(err, "nvrtcGetLoweredName")
        if output == "cubin":
            err, size = nvrtc.nvrtcGetCUBINSize(prog)
            _nvrtc_check(err, "nvrtcGetCUBINSize")
            data = bytearray(size)
            _nvrtc_check(nvrtc.nvrtcGetCUBIN(prog, data)[0], "nvrtcGetCUBIN")
        else:
            err, size = nvrtc.nvrtcGetPTXSize(prog)
            _nvrtc_check(err, "nvrtcGetPTXSize")
            data = bytearray(size)
            _nvrtc_check(nvrtc.nvrtcGetPTX(prog, data)[0], "nvrtcGetPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    binary = bytes(data).rstrip(b"\0") if output == "ptx" else bytes(data)
    return Artifact(binary=binary, lowered_name=lowered.decode(), log=log)


def _compile_failure(source: str, name: str, arch: str, log: str) -> CudaCompileError:
    """The error for a failed compile: a missing kernel name is reported as such, with the names present."""
    names = kernel_names(source)
    if name.split("<", 1)[0].strip() not in names:
        message = f"{not_found_message(name, names)}\nNVRTC log:\n{log}"
    else:
        message = f"NVRTC could not compile kernel '{name}' for {arch}:\n{log}"
    return CudaCompileError(message, log=log, kernel_name=name)
