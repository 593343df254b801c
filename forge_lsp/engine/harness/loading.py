"""Execute task and candidate modules inside the worker, with cached `load_inline` builds."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any, Iterator

import torch


class CompileError(Exception):
    """A candidate failed to build (syntax, extension build, NVRTC/Triton compile)."""


def cache_dir() -> Path:
    return Path(os.environ.get("FORGE_CACHE_DIR") or Path.home() / ".cache" / "forge-lsp")


def exec_module(source: str, name: str, kind: str) -> types.ModuleType:
    """Write `source` to the cache (so tracebacks, inspect and Triton see a real file) and import it."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    folder = cache_dir() / "modules"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{kind}_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source, encoding="utf-8")
        os.replace(tmp, path)
    mod_name = f"forge_{kind}_{digest}_{name}".replace("-", "_").replace(".", "_")
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return module


def forget_module(module: types.ModuleType) -> None:
    sys.modules.pop(module.__name__, None)


def _toolchain_id(with_cuda: bool) -> str:
    parts = [torch.__version__, sys.version.split()[0], os.environ.get("TORCH_CUDA_ARCH_LIST", "")]
    if with_cuda:
        parts.append(str(torch.version.cuda))
    return "|".join(parts)


@contextlib.contextmanager
def cached_load_inline() -> Iterator[None]:
    """Route `torch.utils.cpp_extension.load_inline` through a content-addressed build cache.

    Candidates written for KernelBench all call their extension "elementwise_add" or similar;
    torch would rebuild whenever two candidates with the same name alternate. Here the name
    and build directory come from a hash of the sources, flags and toolchain, so a candidate
    evaluated again loads its built extension in well under a second.
    """
    from torch.utils import cpp_extension

    original = cpp_extension.load_inline

    def load_inline(name, cpp_sources, cuda_sources=None, *args, **kwargs):
        if args:  # positional form: functions, extra_cflags, ... map onto keywords
            keys = ["functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags",
                    "extra_include_paths", "build_directory", "verbose", "with_cuda",
                    "is_python_module", "with_pytorch_error_handling", "keep_intermediates", "use_pch"]
            kwargs.update(zip(keys, args))
        with_cuda = bool(cuda_sources) if kwargs.get("with_cuda") is None else bool(kwargs["with_cuda"])
        if with_cuda:
            flags = list(kwargs.get("extra_cuda_cflags") or [])
            if "-lineinfo" not in flags:
                flags.append("-lineinfo")
            kwargs["extra_cuda_cflags"] = flags
        if os.environ.get("FORGE_LOAD_INLINE_PCH") == "1":
            kwargs.setdefault("use_pch", True)
        def build(cuda_src):
            key_src = json.dumps(
                [name, cpp_sources, cuda_src,
                 {k: v for k, v in sorted(kwargs.items()) if k not in ("verbose", "build_directory")},
                 _toolchain_id(with_cuda)],
                default=str, sort_keys=True,
            )
            unique = f"{name}_{hashlib.sha256(key_src.encode()).hexdigest()[:12]}"
            folder = cache_dir() / "torch_extensions" / unique
            folder.mkdir(parents=True, exist_ok=True)
            kw = dict(kwargs, build_directory=str(folder), verbose=True)  # build log -> worker log
            try:
                return original(unique, cpp_sources, cuda_src, **kw)
            except (RuntimeError, OSError) as exc:
                if "Error building extension" in str(exc) or "ninja" in str(exc).lower():
                    raise CompileError(f"load_inline build of {name!r} failed: {exc}") from exc
                raise

        light = lighter_cuda_headers(cuda_sources)
        if light is not None:
            try:
                return build(light)
            except CompileError:
                print(f"forge: {name}: the build with <torch/types.h> failed; building the source as written",
                      file=sys.stderr, flush=True)
        return build(cuda_sources)

    cpp_extension.load_inline = load_inline
    try:
        yield
    finally:
        cpp_extension.load_inline = original


_EXTENSION_H = "#include <torch/extension.h>"


def lighter_cuda_headers(cuda_sources) -> str | list[str] | None:
    """CUDA sources with `<torch/extension.h>` swapped for `<torch/types.h>`, or None.

    nvcc spends most of a cold load_inline build parsing torch/extension.h (the whole C++
    frontend and pybind11). Launchers in .cu files need only tensors, TORCH_CHECK and streams,
    which torch/types.h declares; on the H200 host this halved the .cu compile (62.6 s -> 31.3 s,
    BENCHMARKS.md). Python bindings live in the generated main.cpp, so they are unaffected;
    sources that use pybind11 themselves keep the full header. The caller falls back to the
    source as written if the lighter build fails.
    """
    if not cuda_sources:
        return None
    parts = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources)
    if not any(_EXTENSION_H in p for p in parts) or any("PYBIND11" in p or "py::" in p for p in parts):
        return None
    light = [p.replace(_EXTENSION_H, "#include <torch/types.h>") for p in parts]
    return light[0] if isinstance(cuda_sources, str) else light


def is_compile_error(exc: BaseException) -> bool:
    """Exceptions that mean "the candidate did not compile", whichever backend raised them."""
    if isinstance(exc, (CompileError, SyntaxError)):
        return True
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"CompilationError", "CudaCompileError", "CompileTimeAssertionFailure"}:
        return True
    return False


def call_model(model: torch.nn.Module, inputs: list[Any]) -> Any:
    with torch.no_grad():
        return model(*inputs)
