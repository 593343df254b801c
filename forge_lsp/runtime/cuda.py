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
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import numbers
import os
import re
import struct
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

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

STATIC_SHARED_MEM_LIMIT = 48 * 1024
"""Dynamic shared memory a kernel may use without opting in through a function attribute."""

_CACHE_FORMAT = 1
_Output = Literal["cubin", "ptx"]


# --------------------------------------------------------------------------------------- errors


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


# ----------------------------------------------------------------------------- compile settings


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
def nvrtc_version() -> str:
    """NVRTC's ``major.minor`` version as reported by the library loaded by ``cuda.bindings``."""
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    _nvrtc_check(err, "nvrtcVersion")
    return f"{major}.{minor}"


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


def cache_dir() -> Path:
    """Directory of the on-disk NVRTC cache: ``$FORGE_CACHE_DIR/nvrtc`` (default ``~/.cache/forge-lsp``)."""
    root = os.environ.get("FORGE_CACHE_DIR") or "~/.cache/forge-lsp"
    return Path(root).expanduser() / "nvrtc"


def _as_options(options: Sequence[str] | str) -> list[str]:
    """User options as a list; a lone string is one option, not a sequence of characters."""
    return [options] if isinstance(options, str) else [str(o) for o in options]


def _nvrtc_options(target: str, options: Sequence[str] | str, lineinfo: bool) -> list[str]:
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


# ------------------------------------------------------------------------------------ compiling


@dataclass(frozen=True)
class _Artifact:
    """One NVRTC output: the binary (cubin bytes or PTX text as bytes), the lowered name and the log."""

    binary: bytes
    lowered_name: str
    log: str


_memory_cache: dict[str, _Artifact] = {}
_kernels: dict[str, Kernel] = {}


def _nvrtc_check(err: Any, call: str) -> None:
    """Raise CudaCompileError when an NVRTC call other than the compile itself fails."""
    if int(err) != 0:
        raise CudaCompileError(f"{call} failed: {getattr(err, 'name', err)}")


def _program_name(name: str) -> str:
    """The file name NVRTC uses in its log lines, e.g. ``scale.cu(4): error: ...``."""
    return re.sub(r"\W", "_", name.split("<", 1)[0].strip()) + ".cu"


def _nvrtc_compile(
    source: str, name: str, arch: str, options: list[str], output: _Output, filename: str | None = None
) -> _Artifact:
    """Run NVRTC once: compile ``source`` with ``name`` as a name expression and fetch the output."""
    from cuda.bindings import nvrtc

    program = filename or _program_name(name)
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
    return _Artifact(binary=binary, lowered_name=lowered.decode(), log=log)


def _compile_failure(source: str, name: str, arch: str, log: str) -> CudaCompileError:
    """The error for a failed compile: a missing kernel name is reported as such, with the names present."""
    names = kernel_names(source)
    if name.split("<", 1)[0].strip() not in names:
        message = f"{_not_found_message(name, names)}\nNVRTC log:\n{log}"
    else:
        message = f"NVRTC could not compile kernel '{name}' for {arch}:\n{log}"
    return CudaCompileError(message, log=log, kernel_name=name)


def _not_found_message(name: str, names: list[str]) -> str:
    found = ", ".join(names) if names else "none"
    return f"kernel '{name}' is not a __global__ function of the source (__global__ functions found: {found})"


def _cache_key(
    source: str, name: str, arch: str, options: list[str], output: _Output, filename: str | None = None
) -> str:
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


def _disk_load(key: str, output: _Output) -> _Artifact | None:
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
    return _Artifact(binary=binary, lowered_name=meta["lowered_name"], log=str(meta.get("log", "")))


def _disk_store(key: str, output: _Output, artifact: _Artifact) -> None:
    """Store an artifact (metadata first, binary last, each atomically); an unwritable cache is skipped."""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        meta = {"lowered_name": artifact.lowered_name, "log": artifact.log}
        _atomic_write(directory / f"{key}.json", json.dumps(meta).encode())
        _atomic_write(directory / f"{key}.{output}", artifact.binary)
    except OSError:
        return


def _compile(
    source: str,
    name: str,
    arch: str | None,
    options: Sequence[str] | str,
    lineinfo: bool,
    output: _Output,
    filename: str | None = None,
) -> tuple[str, str, _Artifact]:
    """Compile through the memory and disk caches; returns (arch, cache key, artifact)."""
    sm = resolve_arch(arch)
    target = sm if output == "cubin" else "compute_" + sm.removeprefix("sm_")
    opts = _nvrtc_options(target, options, lineinfo)
    key = _cache_key(source, name, sm, opts, output, filename)
    artifact = _memory_cache.get(key) or _disk_load(key, output)
    if artifact is None:
        artifact = _nvrtc_compile(source, name, sm, opts, output, filename)
        _disk_store(key, output, artifact)
    _memory_cache[key] = artifact
    return sm, key, artifact


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


# ---------------------------------------------------------------------------- parameter parsing


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter as declared in the source.

    ``ctype`` is the declared type without qualifiers (``"float*"``, ``"long long"``), with
    template type parameters substituted; ``pointer`` says whether it is a pointer (or array);
    ``kind`` is the canonical element/value type (``"f32"``, ``"f64"``, ``"f16"``, ``"bf16"``,
    ``"bool"``, ``"i8"``...``"u64"``), or None for other types (structs, vector types, ``void``).
    """

    name: str
    ctype: str
    pointer: bool
    kind: str | None


_NAMED_KINDS = {
    "float": "f32",
    "double": "f64",
    "bool": "bool",
    "half": "f16",
    "__half": "f16",
    "__nv_bfloat16": "bf16",
    "nv_bfloat16": "bf16",
    "int8_t": "i8",
    "uint8_t": "u8",
    "int16_t": "i16",
    "uint16_t": "u16",
    "int32_t": "i32",
    "uint32_t": "u32",
    "int64_t": "i64",
    "uint64_t": "u64",
    "size_t": "u64",
    "ssize_t": "i64",
    "ptrdiff_t": "i64",
    "intptr_t": "i64",
    "uintptr_t": "u64",
}
_INTEGER_WORDS = frozenset({"signed", "unsigned", "char", "short", "int", "long"})
_TYPE_WORDS = _INTEGER_WORDS | {"float", "double", "bool", "void"}
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict|__grid_constant__|struct|class)\b")
_ATTRIBUTE_CALLS = frozenset(
    {"__launch_bounds__", "__cluster_dims__", "__maxnreg__", "__attribute__", "__declspec", "alignas"}
)
_COMMENT_OR_LITERAL = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_PREPROCESSOR_LINE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_OPENERS = {"(": ")", "<": ">", "[": "]", "{": "}"}


@dataclass(frozen=True)
class _Signature:
    name: str
    params: str
    template: str | None


def _strip_code(source: str) -> str:
    """Source with comments blanked (line structure kept) and preprocessor lines removed."""

    def blank(m: re.Match[str]) -> str:
        text = m.group()
        return text if text[0] in "\"'" else re.sub(r"[^\n]", " ", text)

    return _PREPROCESSOR_LINE.sub("", _COMMENT_OR_LITERAL.sub(blank, source))


def _closing(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``text[start]``, or -1 if unbalanced."""
    stack = [_OPENERS[text[start]]]
    for i in range(start + 1, len(text)):
        ch = text[i]
        if ch in "([{":
            stack.append(_OPENERS[ch])
        elif ch in ")]}":
            if ch != stack.pop():
                return -1
            if not stack:
                return i
    return -1


def _split_top_level(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside (), [], {} and <> nesting."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _signature_at(text: str, start: int) -> _Signature | None:
    """The kernel declared by the ``__global__`` ending at ``start``, or None if it cannot be read."""
    i = start
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if text.startswith("[[", i):
            i = text.find("]]", i)
            if i < 0:
                return None
            i += 2
            continue
        ident = _IDENT.match(text, i)
        if ident is None:
            return None
        i = ident.end()
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "(":
            close = _closing(text, i)
            if close < 0:
                return None
            if ident.group() in _ATTRIBUTE_CALLS:
                i = close + 1
                continue
            return _Signature(ident.group(), text[i + 1 : close], _template_before(text, start))
    return None


def _template_before(text: str, global_start: int) -> str | None:
    """The parameter list of a ``template<...>`` heading the declaration that contains ``__global__``."""
    head_start = max(text.rfind(ch, 0, global_start) for ch in ";{}") + 1
    head = text[head_start:global_start]
    match = re.search(r"\btemplate\s*<(.*)>[\w\s\"]*__global__$", head, re.S)
    return match.group(1) if match else None


def _signatures(source: str) -> list[_Signature]:
    text = _strip_code(source)
    found = (_signature_at(text, m.end()) for m in re.finditer(r"\b__global__\b", text))
    return [sig for sig in found if sig is not None]


def kernel_names(source: str) -> list[str]:
    """Names of the ``__global__`` functions declared in ``source``, in order, without repeats."""
    return list(dict.fromkeys(sig.name for sig in _signatures(source)))


def _template_types(template: str | None, name: str) -> dict[str, str]:
    """Map template type parameters to the arguments in ``name`` (``k<float, 4>``) or their defaults."""
    if template is None or "<" not in name:
        return {}
    args = [a.strip() for a in _split_top_level(name[name.index("<") + 1 : name.rindex(">")], ",")]
    mapping = {}
    for i, param in enumerate(_split_top_level(template, ",")):
        match = re.fullmatch(r"\s*(?:typename|class)\s+([A-Za-z_]\w*)\s*(?:=\s*(.+?))?\s*", param, re.S)
        if match is None:
            continue
        if i < len(args) and args[i]:
            mapping[match.group(1)] = args[i]
        elif match.group(2):
            mapping[match.group(1)] = match.group(2)
    return mapping


def _kind(words: list[str]) -> str | None:
    """Canonical kind of a type spelled by ``words`` (qualifiers removed), or None if unsupported."""
    words = [w.removeprefix("std::") for w in words]
    if len(words) == 1 and words[0] in _NAMED_KINDS:
        return _NAMED_KINDS[words[0]]
    if not words or not set(words) <= _INTEGER_WORDS:
        return None
    if "char" in words:
        bits = 8
    elif "short" in words:
        bits = 16
    elif "long" in words:
        bits = 64  # LP64: long and long long are 64-bit on the Linux hosts CUDA runs on
    else:
        bits = 32
    return f"{'u' if 'unsigned' in words else 'i'}{bits}"


def _parse_param(text: str, index: int, types: dict[str, str]) -> KernelParam:
    decl = _split_top_level(text, "=")[0]
    decl = re.sub(r"\[[^\]]*\]", "*", decl)  # `float x[]` is a pointer
    for template_name, actual in types.items():
        decl = re.sub(rf"\b{re.escape(template_name)}\b", actual, decl)
    stars = decl.count("*")
    words = _QUALIFIERS.sub(" ", decl.replace("*", " ")).split()
    name = f"arg{index}"
    if len(words) > 1 and words[-1] not in _TYPE_WORDS and _IDENT.fullmatch(words[-1]):
        name = words.pop()
    reference = any("&" in w for w in words)
    words = [w.replace("&", "") for w in words if w.replace("&", "")]
    ctype = " ".join(words) + "*" * stars + ("&" if reference else "")
    return KernelParam(name=name, ctype=ctype, pointer=stars > 0, kind=None if reference else _kind(words))


def parse_kernel_params(source: str, name: str) -> tuple[KernelParam, ...]:
    """Parameters of kernel ``name`` (``"k"`` or a template instance ``"k<float>"``) in ``source``.

    Raises ``CudaCompileError`` listing the ``__global__`` functions present when ``name`` is not one.
    """
    base = name.split("<", 1)[0].strip()
    signatures = _signatures(source)
    for sig in signatures:
        if sig.name == base:
            if sig.params.strip() in ("", "void"):
                return ()
            types = _template_types(sig.template, name)
            return tuple(_parse_param(p, i, types) for i, p in enumerate(_split_top_level(sig.params, ",")))
    names = list(dict.fromkeys(sig.name for sig in signatures))
    raise CudaCompileError(_not_found_message(name, names), kernel_name=name)


# ------------------------------------------------------------------------------------ launching


_CTYPES: dict[str, type[ctypes._SimpleCData]] = {
    "bool": ctypes.c_bool,
    "i8": ctypes.c_int8,
    "u8": ctypes.c_uint8,
    "i16": ctypes.c_int16,
    "u16": ctypes.c_uint16,
    "i32": ctypes.c_int32,
    "u32": ctypes.c_uint32,
    "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
}
_FLOAT_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16"}


def _half_bits(value: float) -> int:
    """IEEE binary16 bits of ``value`` (round to nearest even; overflow gives infinity)."""
    try:
        return struct.unpack("<H", struct.pack("<e", value))[0]
    except OverflowError:
        return 0xFC00 if value < 0 else 0x7C00


def _bfloat16_bits(value: float) -> int:
    """bfloat16 bits of ``value`` (round to nearest even, like ``__float2bfloat16``)."""
    if math.isnan(value):
        return 0x7FC0
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _check(result: tuple[Any, ...], call: str) -> Any:
    """Unpack a ``cuda.bindings.driver`` result tuple, raising CudaLaunchError unless CUDA_SUCCESS."""
    err, *values = result
    if int(err) != 0:
        raise _driver_error(err, call)
    return values[0] if len(values) == 1 else tuple(values)


def _driver_error(err: Any, what: str) -> CudaLaunchError:
    name = getattr(err, "name", str(err))
    return CudaLaunchError(f"{what} failed with {name} ({int(err)})", result=name)


_context_lock = threading.Lock()
_primary_contexts: dict[int, Any] = {}


_thread_state = threading.local()


def _ensure_context(device: int) -> None:
    """Make the primary context of torch device ``device`` current on this thread (torch's context).

    Checked once per thread and device: torch keeps that context current afterwards.
    """
    from cuda.bindings import driver

    done = getattr(_thread_state, "devices", None)
    if done is None:
        done = _thread_state.devices = set()
    if device in done:
        return
    context = _primary_contexts.get(device)
    if context is None:
        with _context_lock:
            context = _primary_contexts.get(device)
            if context is None:
                _check(driver.cuInit(0), "cuInit")
                handle = _check(driver.cuDeviceGet(device), "cuDeviceGet")
                context = _check(driver.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")
                _primary_contexts[device] = context
    if int(_check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")) != int(context):
        _check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    done.add(device)


def _dim3(value: int | Sequence[int], what: str) -> tuple[int, int, int]:
    """A grid or block size as three positive ints; an int or 1-3 ints, padded with 1."""
    dims = (value,) if isinstance(value, numbers.Integral) else value
    if (
        not isinstance(dims, Sequence)
        or not 1 <= len(dims) <= 3
        or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and int(d) >= 1 for d in dims)
    ):
        raise ValueError(f"{what} must be a positive int or a tuple of 1 to 3 positive ints, got {value!r}")
    x, y, z = (*(int(d) for d in dims), 1, 1, 1)[:3]
    return x, y, z


def _stream_handle(stream: Any, device: int) -> int:
    """The CUstream handle to launch on: ``stream`` (int or torch stream) or torch's current stream."""
    import torch

    if stream is None:
        return int(torch.cuda.current_stream(device).cuda_stream)
    if isinstance(stream, numbers.Integral) and not isinstance(stream, bool):
        return int(stream)
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        raise TypeError(
            f"stream must be None, an int CUstream handle or a torch.cuda.Stream, got {type(stream).__name__}"
        )
    stream_device = getattr(stream, "device", None)
    if isinstance(stream_device, torch.device) and stream_device.index not in (None, device):
        raise ValueError(f"stream is on {stream_device} but the current device is cuda:{device}")
    return int(handle)


@dataclass
class _Loaded:
    """A kernel's module and function in one device's context."""

    module: Any
    function: Any
    max_dynamic_shared: int = STATIC_SHARED_MEM_LIMIT


@dataclass(eq=False)
class Kernel:
    """A compiled kernel; call it to launch on torch tensors.

    ``kernel(grid, block, args, shared_mem=0, stream=None)``: ``grid``/``block`` are an int or
    1-3 ints; ``args`` match the parameters in order (tensors or device addresses for pointers,
    Python numbers for scalars, ctypes objects passed as raw bytes); ``shared_mem`` is dynamic
    shared memory in bytes (above 48 KiB the kernel is opted in first); ``stream`` is a
    ``torch.cuda.Stream`` or CUstream handle, default torch's current stream. The module is loaded
    into the current device's primary context at its first launch there.
    """

    name: str
    lowered_name: str
    arch: str
    cubin: bytes = field(repr=False)
    params: tuple[KernelParam, ...]
    log: str = field(default="", repr=False)
    _loaded: dict[int, _Loaded] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __call__(
        self,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[Any] = (),
        *,
        shared_mem: int = 0,
        stream: Any = None,
    ) -> None:
        import torch
        from cuda.bindings import driver

        grid3, block3 = _dim3(grid, "grid"), _dim3(block, "block")
        if not isinstance(shared_mem, numbers.Integral) or shared_mem < 0:
            raise ValueError(f"shared_mem must be a non-negative int (bytes), got {shared_mem!r}")
        if len(args) != len(self.params):
            signature = ", ".join(f"{p.ctype} {p.name}" for p in self.params)
            raise KernelArgumentError(
                f"kernel '{self.name}' takes {len(self.params)} arguments ({signature}), got {len(args)}"
            )
        if not self._loaded and not torch.cuda.is_available():
            raise CudaLaunchError(f"cannot launch kernel '{self.name}': torch sees no CUDA device")
        device = torch.cuda.current_device()
        marshalled = [self._marshal(p, a, device) for p, a in zip(self.params, args, strict=True)]
        handle = _stream_handle(stream, device)
        _ensure_context(device)
        function = self._function(device, int(shared_mem))
        addresses = (ctypes.c_void_p * len(marshalled))(*(address for _, address in marshalled))
        err, *_ = driver.cuLaunchKernel(
            function,
            *grid3,
            *block3,
            int(shared_mem),
            handle,
            ctypes.addressof(addresses) if marshalled else None,
            0,
        )
        if int(err) != 0:
            raise _driver_error(
                err, f"cuLaunchKernel of '{self.name}' (grid={grid3}, block={block3}, shared_mem={shared_mem})"
            )

    def _function(self, device: int, shared_mem: int) -> Any:
        """The CUfunction in ``device``'s context, loading the module and opting in to shared memory."""
        import torch
        from cuda.bindings import driver

        with self._lock:
            loaded = self._loaded.get(device)
            if loaded is None:
                err, module = driver.cuModuleLoadData(self.cubin)
                if int(err) != 0:
                    major, minor = torch.cuda.get_device_capability(device)
                    raise _driver_error(
                        err,
                        f"cuModuleLoadData of kernel '{self.name}' compiled for {self.arch} on cuda:{device} "
                        f"(sm_{major}{minor}; set arch= or FORGE_CUDA_ARCH to match)",
                    )
                function = _check(
                    driver.cuModuleGetFunction(module, self.lowered_name.encode()),
                    f"cuModuleGetFunction('{self.lowered_name}')",
                )
                loaded = self._loaded[device] = _Loaded(module=module, function=function)
            if shared_mem > loaded.max_dynamic_shared:
                attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                _check(
                    driver.cuFuncSetAttribute(loaded.function, attribute, shared_mem),
                    f"allowing {shared_mem} bytes of dynamic shared memory for kernel '{self.name}' "
                    "(cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                )
                loaded.max_dynamic_shared = shared_mem
            return loaded.function

    def _marshal(self, param: KernelParam, value: Any, device: int) -> tuple[Any, int]:
        """Convert one argument: returns (object to keep alive, address of the parameter's bytes)."""
        import torch

        where = f"parameter '{param.name}' ({param.ctype}) of kernel '{self.name}'"
        if isinstance(value, ctypes._SimpleCData | ctypes.Structure | ctypes.Union | ctypes.Array):
            return value, ctypes.addressof(value)
        if param.pointer:
            if isinstance(value, torch.Tensor):
                if value.device.type != "cuda" or value.device.index != device:
                    raise KernelArgumentError(f"{where} got a tensor on {value.device}; it must be on cuda:{device}")
                expected = _FLOAT_DTYPES.get(param.kind or "")
                if expected is not None and value.dtype != getattr(torch, expected):
                    raise KernelArgumentError(
                        f"{where} expects a torch.{expected} tensor, got {value.dtype} "
                        "(pass tensor.data_ptr() to reinterpret the memory)"
                    )
                pointer = ctypes.c_void_p(value.data_ptr())
            elif value is None:
                pointer = ctypes.c_void_p(None)
            elif isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= int(value) < 2**64:
                pointer = ctypes.c_void_p(int(value))
            else:
                raise KernelArgumentError(
                    f"{where} needs a CUDA tensor, a device address (int) or None, got {type(value).__name__}"
                )
            return pointer, ctypes.addressof(pointer)
        if callable(getattr(value, "getPtr", None)):  # cuda.bindings structs, e.g. CUtensorMap
            return value, int(value.getPtr())
        if isinstance(value, torch.Tensor):
            raise KernelArgumentError(f"{where} is a scalar; pass a Python number (e.g. tensor.item()), not a tensor")
        if param.kind is None:
            raise KernelArgumentError(
                f"{where} has a type the launcher cannot build from {type(value).__name__}; "
                "pass a ctypes object (or a cuda.bindings struct) holding its bytes"
            )
        scalar = self._scalar(param, value, where)
        return scalar, ctypes.addressof(scalar)

    @staticmethod
    def _scalar(param: KernelParam, value: Any, where: str) -> ctypes._SimpleCData:
        """A by-value scalar argument as the ctypes object of the parameter's kind."""
        kind = param.kind or ""
        if kind == "bool" or kind[0] in "iu":
            if not isinstance(value, numbers.Integral):
                raise KernelArgumentError(f"{where} needs an int, got {type(value).__name__}")
            if kind != "bool":
                bits = int(kind[1:])
                low, high = (0, 2**bits) if kind[0] == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1))
                if not low <= int(value) < high:
                    raise KernelArgumentError(f"{where}: {value} is out of range [{low}, {high - 1}]")
            return _CTYPES[kind](int(value))
        if not isinstance(value, numbers.Real):
            raise KernelArgumentError(f"{where} needs a float, got {type(value).__name__}")
        if kind == "f16":
            return ctypes.c_uint16(_half_bits(float(value)))
        if kind == "bf16":
            return ctypes.c_uint16(_bfloat16_bits(float(value)))
        return _CTYPES[kind](float(value))
