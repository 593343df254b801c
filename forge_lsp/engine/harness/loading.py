"""Execute task and candidate modules inside the worker, with cached `load_inline` builds."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .cudasplit import (
    Split,
    binding_signatures,
    bindings_source,
    bindings_tag,
    bindings_tail,
    split_cuda_source,
    split_prelude,
)
from .cxx import (  # noqa: F401 - re-exported: tests and tools read them here
    _BLANK,
    _CUDA_RUNTIME_API,
    _DEVICE_FROM_HOST,
    _INCLUDE,
    _OP_CALL,
    _TEMPLATE_KERNEL,
    _TORCH_HEADER,
    _TORCH_NAME,
    _TORCH_ONLY_API,
    _UMBRELLAS,
    _top_level_chunks,
    _torch_namespace_block,
)


class CompileError(Exception):
    """A candidate failed to build (syntax, extension build, NVRTC/Triton compile)."""


def cache_dir() -> Path:
    return Path(os.environ.get("FORGE_CACHE_DIR") or Path.home() / ".cache" / "forge-lsp")


def exec_module(source: str, name: str, kind: str) -> types.ModuleType:
    """Write `source` to the cache (so tracebacks, inspect and Triton see a real file) and execute it as a module.

    The file is named by the source's hash, and what runs is always `source` itself: a file found changed since it
    was written (a candidate may have rewritten a task's file to poison the reference of later evaluations) is written
    again, and the code is compiled from `source`, never from a bytecode cache a candidate could have replaced."""
    from ..logparse import worker_module_name

    data = source.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()[:16]
    folder = cache_dir() / "modules"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / worker_module_name(source, kind)
    try:
        intact = path.read_bytes() == data
    except OSError:
        intact = False
    if not intact:
        if path.exists():
            print(f"forge: {path.name} was changed since it was written; written again", file=sys.stderr, flush=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    mod_name = f"forge_{kind}_{digest}_{name}".replace("-", "_").replace(".", "_")
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - what the worker is for
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return module


def forget_module(module: types.ModuleType) -> None:
    sys.modules.pop(module.__name__, None)


_OPT_FLAG = re.compile(r"-O[0-3sg]?|-g\d?|-ffast-math|-funroll-loops|-march=\S+|-mtune=\S+")


#: seconds a build that would precompile torch/extension.h waits for the builds reading it to finish; then it builds
#: without refreshing the header (g++ ignores a header precompiled with other flags)
PCH_WAIT_S = 60.0

#: the file a finished build leaves in its folder: the module's file name, loaded as it is from then on
BUILT_MARKER = "forge-built.json"
#: each `load_inline` build attempt of this process, in order: (header set, seconds, built?); a build worker reports
#: and clears it per candidate (`BuildResult.attempts`), so a header fallback's cost is seen
BUILD_ATTEMPTS: list[tuple[str, float, bool]] = []


def pch_lock_path() -> Path:
    """The lock over torch's precompiled torch/extension.h. torch writes the .gch into its own include folder, which
    every forge process on the machine shares whatever its cache, so the lock is the machine's, named after that
    folder."""
    import tempfile

    tag = hashlib.sha256(str(torch_include_dir()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"forge-pch-{tag}.lock"


@contextlib.contextmanager
def precompiled_header(extra_cflags, extra_include_paths, refresh: bool, wait_s: float = PCH_WAIT_S) -> Iterator[None]:
    """Held around a build whose main.cpp includes torch/extension.h: g++ reads torch's precompiled
    ``extension.h.gch`` (when valid for its flags) and must never see it half written.

    torch writes the .gch in place, over about 45 s (a machine's first CUDA build), and g++ stops with "cannot read"
    on a partial one. So the header is written only under this machine-wide lock held exclusively, and every build
    that may read it holds it shared for its whole build. With `refresh`, the header is first checked and, if
    missing or built for other flags, built (torch's ``_check_and_build_extension_h_precompiler_headers``); when
    builds reading it hold the lock past `wait_s`, the build goes on without refreshing it. A header forge refreshed
    for the same flags before (a marker beside the lock says so) is not checked again: no wait for the exclusive lock,
    which builds reading the header may hold off for minutes. Builds that do not include torch/extension.h (the slim
    tier) take no part.
    """
    import fcntl
    import time

    from torch.utils import cpp_extension

    build = getattr(cpp_extension, "_check_and_build_extension_h_precompiler_headers", None)
    flags = json.dumps([list(extra_cflags or []), list(extra_include_paths or []), os.environ.get("CXX", "")])
    with open(pch_lock_path(), "a") as fh:
        if refresh and build is not None:
            # refreshed for these flags already (by this process or another): no wait for the builds reading it
            fcntl.flock(fh, fcntl.LOCK_SH)
            try:
                refresh = not _header_refreshed_for(flags)
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        if refresh and build is not None:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if time.monotonic() < deadline:
                        time.sleep(0.05)
                        continue
                    print(
                        "forge: torch/extension.h is in use by other builds; building without refreshing its "
                        "precompiled header",
                        file=sys.stderr,
                        flush=True,
                    )
                    break
                try:
                    build(list(extra_cflags or []), list(extra_include_paths or []))
                    _refresh_marker().write_text(flags)
                except Exception as exc:  # noqa: BLE001 - a precompiled header is an optimization, never a failure
                    print(f"forge: precompiled header unavailable ({exc}); building without it", file=sys.stderr)
                break
        fcntl.flock(fh, fcntl.LOCK_SH)  # from exclusive, not atomically: a writer that slips in between is waited for
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _refresh_marker() -> Path:
    """Beside the machine's lock: the flags torch's precompiled header was last refreshed for by forge (written under
    the lock held exclusively, read under it shared)."""
    return pch_lock_path().with_suffix(".flags")


def _header_refreshed_for(flags: str) -> bool:
    """Whether forge last refreshed torch's precompiled header for `flags` and the header is there. A build of
    something else (a user's own load_inline) may have rebuilt it for other flags since: g++ then ignores a header
    built for other flags, and the build is only slower."""
    try:
        return _refresh_marker().read_text() == flags and (torch_include_dir() / "torch" / "extension.h.gch").is_file()
    except OSError:
        return False


@contextlib.contextmanager
def _keep_precompiled_header(cpp_extension: Any) -> Iterator[None]:
    """torch's load_inline deletes torch/extension.h's precompiled header whenever a build does not ask for it
    (``use_pch=False``, its default): the machine's one header, which other builds may be reading or writing. forge
    builds always pass False and manage the header in `precompiled_header`; meanwhile that deletion does nothing."""
    original = getattr(cpp_extension, "remove_extension_h_precompiler_headers", None)
    if original is None:
        yield
        return
    cpp_extension.remove_extension_h_precompiler_headers = lambda: None
    try:
        yield
    finally:
        cpp_extension.remove_extension_h_precompiler_headers = original


def _mark_built(folder: Path, module: Any) -> None:
    """Say in `folder` that its build finished, and which file is its module (torch may version the name)."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or Path(path).parent != folder:
        return
    tmp = folder / f"{BUILT_MARKER}.{os.getpid()}.tmp"
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    tmp.write_text(json.dumps({"module": Path(path).name, "sha256": digest}))
    os.replace(tmp, folder / BUILT_MARKER)


def _load_built(folder: Path, kwargs: dict[str, Any]) -> types.ModuleType | None:
    """The module a finished build left in `folder` (see `_mark_built`), imported as torch would; None when there is
    none or it does not import (then the folder is built again)."""
    if kwargs.get("is_python_module") is False:
        return None
    try:
        marker = json.loads((folder / BUILT_MARKER).read_text())
        name, digest = marker["module"], marker["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    path = folder / str(name)
    if path.parent != folder or not path.is_file():
        return None
    try:
        intact = hashlib.sha256(path.read_bytes()).hexdigest() == digest
    except OSError:
        intact = False
    if not intact:  # changed since its build (another candidate's code wrote it?): built again
        print(f"forge: {path.name} is not what its build made; building it again", file=sys.stderr, flush=True)
        return None
    spec = importlib.util.spec_from_file_location(path.name.split(".")[0], path)
    if spec is None or spec.loader is None:
        return None
    print(f"forge: loading {path.name}, built before (no compiler)", file=sys.stderr, flush=True)  # the worker's log
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as exc:
        print(f"forge: {path.name} did not load ({exc}); building it again", file=sys.stderr, flush=True)
        return None
    return module


def torch_include_dir() -> Path:
    return Path(torch.__file__).parent / "include"


def _toolchain_id(with_cuda: bool) -> str:
    parts = [torch.__version__, sys.version.split()[0], os.environ.get("TORCH_CUDA_ARCH_LIST", "")]
    if with_cuda:
        parts.append(str(torch.version.cuda))
    return "|".join(parts)


@contextlib.contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    """One forge build at a time in an extension's build folder, under an OS lock that dies with its holder.

    torch marks a build in progress with a ``lock`` file in the folder and waits while it exists; a build
    killed mid-compile (a deadline, a cancel) leaves it behind, and every later build of that extension would
    wait for it until its own deadline. Holding this lock, no other forge build is in the folder, so a ``lock``
    file found now is such a leftover: it is removed, and said in the worker's log."""
    import fcntl

    with open(folder / ".forge-build.flock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released by the OS if this process dies
        stale = folder / "lock"
        if stale.exists():
            stale.unlink(missing_ok=True)
            print(f"forge: removed a build lock left by a killed build in {folder.name}", file=sys.stderr, flush=True)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
            keys = [
                "functions",
                "extra_cflags",
                "extra_cuda_cflags",
                "extra_ldflags",
                "extra_include_paths",
                "build_directory",
                "verbose",
                "with_cuda",
                "is_python_module",
                "with_pytorch_error_handling",
                "keep_intermediates",
                "use_pch",
            ]
            kwargs.update(zip(keys, args, strict=False))
        with_cuda = bool(cuda_sources) if kwargs.get("with_cuda") is None else bool(kwargs["with_cuda"])
        if with_cuda:
            flags = list(kwargs.get("extra_cuda_cflags") or [])
            if "-lineinfo" not in flags:
                flags.append("-lineinfo")
            kwargs["extra_cuda_cflags"] = flags
        # torch's precompiled torch/extension.h: wanted for CUDA builds (their main.cpp holds only declarations and
        # bindings), or where the candidate or FORGE_LOAD_INLINE_PCH=1 asks. torch's own use_pch=False *deletes* the
        # machine's header, so torch always gets False and `precompiled_header` looks after it; the flag is not part
        # of the cache key: it changes how main.cpp compiles, not what it compiles to.
        asked = kwargs.pop("use_pch", None)
        pch_env = os.environ.get("FORGE_LOAD_INLINE_PCH")
        if asked is None:
            want_pch = (with_cuda and pch_env != "0") or pch_env == "1"
        else:
            want_pch = bool(asked) and pch_env != "0"
        if with_cuda and want_pch:
            # optimization flags do not matter in a main.cpp of declarations and bindings, and dropping them keeps
            # one precompiled header valid for all
            kwargs["extra_cflags"] = [f for f in kwargs.get("extra_cflags") or [] if not _OPT_FLAG.fullmatch(f)]

        def build(cuda_src, cpp_src=cpp_sources, extra=None):
            kw_all = dict(kwargs, **(extra or {}))
            key_src = json.dumps(
                [
                    name,
                    cpp_src,
                    cuda_src,
                    {k: v for k, v in sorted(kw_all.items()) if k not in ("verbose", "build_directory")},
                    _toolchain_id(with_cuda),
                ],
                default=str,
                sort_keys=True,
            )
            unique = f"{name}_{hashlib.sha256(key_src.encode()).hexdigest()[:12]}"
            folder = cache_dir() / "torch_extensions" / unique
            folder.mkdir(parents=True, exist_ok=True)
            built = _load_built(folder, kw_all)
            if built is not None:  # built before, by this worker or another: no compiler, no header, no lock
                return built
            # verbose=False: torch then keeps the compilers' output in its error, which `_headers_may_fix` reads; it is
            # printed to the worker's log below
            kw = dict(kw_all, build_directory=str(folder), verbose=False, use_pch=False)
            main_cpp = "\n".join([cpp_src] if isinstance(cpp_src, str) else list(cpp_src or []))
            # load_inline puts <torch/extension.h> first in main.cpp unless no_implicit_headers
            reads_header = not kw_all.get("no_implicit_headers") or _EXTENSION_H in main_cpp
            header = (
                precompiled_header(kw_all.get("extra_cflags"), kw_all.get("extra_include_paths"), refresh=want_pch)
                if reads_header
                else contextlib.nullcontext()
            )
            try:
                with _build_lock(folder), header, _keep_precompiled_header(cpp_extension):
                    # a copy: load_inline inserts its header into the list it is given
                    module = original(unique, list(cpp_src) if isinstance(cpp_src, list) else cpp_src, cuda_src, **kw)
            except (RuntimeError, OSError) as exc:
                if "Error building extension" in str(exc) or "ninja" in str(exc).lower():
                    print(str(exc), file=sys.stderr, flush=True)  # the compilers' messages, in the worker's log
                    raise CompileError(f"load_inline build of {name!r} failed: {exc}") from exc
                raise
            _mark_built(folder, module)
            return module

        def build_split(split: Split):
            obj = device_object(split.device, name, kwargs, split.device_flags)
            cflags = [f for f in kwargs.get("extra_cflags") or [] if not _OPT_FLAG.fullmatch(f)] + split.host_flags
            ldflags = [obj, *(kwargs.get("extra_ldflags") or [])]  # torch appends its libraries, cudart among them
            extra = {"no_implicit_headers": True, "with_cuda": True, "extra_cflags": cflags, "extra_ldflags": ldflags}
            # build workers (niced) precompile the prelude; a device's worker, which may be timing, never does
            precompiles = bool(os.environ.get("FORGE_WORKER_NICE"))
            plan = split_bindings_plan(split, cpp_sources, kwargs)
            ninja = ninja_for(name, dict(kwargs, **extra)) if plan is not None or precompiles else None
            if precompiles and ninja is not None and not split_prelude_ready(cflags):
                # the first split builds: precompile beside them
                split_prelude_pch(ninja, cflags)
                split_prelude_pch(ninja, cflags, lite=True)
            host, lite = split.host, False
            if plan is not None and ninja is not None:
                functions, sigs, wrap = plan
                try:
                    bind = bindings_object(sigs, wrap, ninja)
                except CompileError as exc:  # main.cpp then binds as load_inline does
                    print(f"forge: {name}: {exc}", file=sys.stderr, flush=True)
                else:
                    full, light = str(split_prelude_file()), str(split_prelude_file(lite=True))
                    host = [
                        split.host[0].replace(full, light, 1),
                        *split.host[1:],
                        bindings_tail(functions, sigs, bindings_tag(sigs, wrap)),
                    ]
                    extra = dict(extra, functions=None, extra_ldflags=[obj, bind, *ldflags[1:]])
                    lite = True
            module = build(None, host, extra)
            if precompiles and isinstance(getattr(module, "__file__", None), str):
                split_prelude_pch(Path(module.__file__).parent, cflags, lite=lite)
            return module

        # cheapest first; each fallback is announced in the worker log
        tiers = []
        split = split_build_args(name, cpp_sources, cuda_sources, kwargs, original) if with_cuda else None
        if split is not None:
            tiers.append((SPLIT_TIER, lambda: build_split(split)))
        slim = slim_build_args(cpp_sources, cuda_sources, original) if "no_implicit_headers" not in kwargs else None
        if slim is not None:
            tiers.append(("slim per-operator headers", lambda: build(slim[1], slim[0], slim[2])))
        lighter = lighter_cuda_headers(cuda_sources)
        if lighter is not None:
            tiers.append(("<torch/types.h>", lambda: build(lighter)))
        tiers.append(("the source's own headers", lambda: build(cuda_sources)))
        for i, (label, attempt) in enumerate(tiers):
            t0 = time.perf_counter()
            try:
                module = attempt()
            except Exception as exc:  # noqa: BLE001 - any failure of a rewrite falls back to the source
                BUILD_ATTEMPTS.append((label, round(time.perf_counter() - t0, 3), False))
                if i == len(tiers) - 1:
                    raise
                own = isinstance(exc, CompileError) and (
                    _only_deprecated_type(str(exc)) if label == SPLIT_TIER else not _headers_may_fix(str(exc))
                )
                if own:
                    # the candidate's own error: more of torch's headers cannot fix it, and they cost a minute a try
                    print(
                        f"forge: {name}: the build with {label} failed on the candidate's own code; heavier headers "
                        "would fail the same way, so none are tried",
                        file=sys.stderr,
                        flush=True,
                    )
                    raise
                print(
                    f"forge: {name}: the build with {label} failed ({type(exc).__name__}); trying the next header set",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            BUILD_ATTEMPTS.append((label, round(time.perf_counter() - t0, 3), True))
            return module
        raise AssertionError("unreachable: the last tier returns or raises")

    cpp_extension.load_inline = load_inline
    try:
        yield
    finally:
        cpp_extension.load_inline = original


_EXTENSION_H = "#include <torch/extension.h>"


def _HAS_NO_IMPLICIT_HEADERS(load_inline_fn) -> bool:  # noqa: N802 - reads like the flag it tests
    """Whether this torch's load_inline can skip its implicit headers (torch 2.8 and newer)."""
    import inspect

    try:
        return "no_implicit_headers" in inspect.signature(load_inline_fn).parameters
    except (TypeError, ValueError):
        return False


def slim_cuda_sources(cuda_sources, include_dir: Path) -> str | list[str] | None:
    """CUDA sources with torch's umbrella headers replaced by the per-operator headers they use.

    A KernelBench-style ``.cu`` includes <torch/extension.h> to get ``torch::Tensor``,
    ``torch::empty_like``, ``TORCH_CHECK`` and the current stream; nvcc then parses all of
    ATen, the C++ frontend and pybind11 (72 s on a CPU host, 62 s on the H200 host). This
    prelude includes <ATen/core/Tensor.h>, one <ATen/ops/NAME.h> per ``torch::NAME(`` or
    ``at::NAME(`` call, <ATen/Dispatch.h> and the c10 CUDA stream/guard headers when used, and
    torch's dtype aliases — what ATen's own kernels include (13 s on the CPU host).
    Returns None when the source needs more (the C++ frontend, autograd, pybind11) or has no
    umbrella header; the caller falls back if the slim build fails.
    """
    if not cuda_sources:
        return None
    parts = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources)
    joined = "\n".join(parts)
    if not any(inc in _UMBRELLAS for inc in _INCLUDE.findall(joined)) or _TORCH_ONLY_API.search(joined):
        return None
    ops_dir = include_dir / "ATen" / "ops"
    ops = sorted({name for name in _OP_CALL.findall(joined) if (ops_dir / f"{name}.h").is_file()})
    lines = [
        "// forge: slim prelude in place of torch's umbrella headers (fallback: the source as written)",
        "#include <ATen/core/Tensor.h>",
        "#include <c10/util/Exception.h>",
    ]
    lines += [f"#include <ATen/ops/{name}.h>" for name in ops]
    if "AT_DISPATCH" in joined:
        lines.append("#include <ATen/Dispatch.h>")
    if _CUDA_RUNTIME_API.search(joined):
        lines += ["#include <c10/cuda/CUDAStream.h>", "#include <c10/cuda/CUDAGuard.h>"]
    if "C10_CUDA_" in joined:
        lines.append("#include <c10/cuda/CUDAException.h>")
    lines.append(_torch_namespace_block(include_dir))
    prelude = "\n".join(lines) + "\n"

    def rewrite(src: str, first: bool) -> str:
        out, placed = [], not first
        for line in src.splitlines(keepends=True):
            m = _INCLUDE.match(line.rstrip("\n"))
            if m and m.group(1) in _UMBRELLAS:
                if not placed:
                    out.append(prelude)
                    placed = True
                continue
            out.append(line)
        return "".join(out) if placed else prelude + "".join(out)

    slim = [rewrite(p, i == 0) for i, p in enumerate(parts)]
    guarded = [hide_host_code_from_device_pass(p) for p in slim]
    if all(g is not None for g in guarded):
        slim = guarded  # type: ignore[assignment]
    return slim[0] if isinstance(cuda_sources, str) else slim


_HOST_ONLY_BEGIN = "#ifndef __CUDA_ARCH__  // forge: host-only torch code, hidden from the device compiler\n"
_HOST_ONLY_END = "#endif  // forge: host-only\n"


def hide_host_code_from_device_pass(src: str) -> str | None:
    """Wrap torch includes and torch-using host code in ``#ifndef __CUDA_ARCH__``, or None.

    nvcc parses the whole file twice: for the host, and again in the device pass (cicc), where
    torch's headers cost a third of a cold build and are never needed: kernels do not use torch
    types. Hiding the host-only parts from the device pass is safe unless device code is
    generated from host code (template kernels instantiated by their launch, extended lambdas,
    thrust/cub) or torch names appear in device code: then None, and nothing is hidden.
    """
    if _TEMPLATE_KERNEL.search(_BLANK.sub(" ", src)):
        return None
    out: list[str] = []
    hidden = False
    for chunk in _top_level_chunks(src):
        code = _BLANK.sub(" ", chunk)
        directive = _INCLUDE.search(chunk) if code.lstrip().startswith("#") else None
        if directive:
            host_only = bool(_TORCH_HEADER.match(directive.group(1)))
        elif code.lstrip().startswith("#"):
            host_only = False
        elif _TORCH_NAME.search(code):
            if _DEVICE_FROM_HOST.search(code):
                return None
            host_only = True
        else:
            host_only = False
        if host_only and not hidden:
            out.append(_HOST_ONLY_BEGIN)
        elif not host_only and hidden and chunk.strip():
            out.append(_HOST_ONLY_END)
        if chunk.strip():
            hidden = host_only
        out.append(chunk if chunk.endswith("\n") or not host_only else chunk + "\n")
    if hidden:
        out.append(_HOST_ONLY_END)
    return "".join(out)


def slim_build_args(cpp_sources, cuda_sources, load_inline_fn) -> tuple[list[str], list[str], dict] | None:
    """(cpp_sources, cuda_sources, extra kwargs) for a load_inline build with the slim prelude, or None.

    load_inline puts <torch/types.h> (all of ATen) first in the .cu unless `no_implicit_headers`
    (torch 2.8+); the slim build passes it and adds the light implicit headers itself. main.cpp gets
    the slim main prelude (`slim_main_sources`) where its sources are declarations, else keeps
    <torch/extension.h> first (bindings, precompiled header). None when the source needs the full
    headers or this torch cannot skip its implicit ones.
    """
    slim = slim_cuda_sources(cuda_sources, torch_include_dir())
    if slim is None or not _HAS_NO_IMPLICIT_HEADERS(load_inline_fn):
        return None
    cpp_list = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources or [])
    cuda_list = [slim] if isinstance(slim, str) else list(slim)
    main = slim_main_sources(cpp_list, torch_include_dir())
    return (
        main if main is not None else [_EXTENSION_H, *cpp_list],
        ["#include <cuda.h>\n#include <cuda_runtime.h>", *cuda_list],
        {"no_implicit_headers": True},
    )


#: the first tier: kernels through nvcc without torch, the launchers beside the bindings (`cudasplit`)
SPLIT_TIER = "device/host split"


def split_build_args(name: str, cpp_sources, cuda_sources, kwargs: dict, load_inline_fn) -> Split | None:
    """The device/host split of a load_inline call's sources (`cudasplit.split_cuda_source`), or None: one CUDA source,
    a torch that can skip its implicit headers, a candidate that did not ask for headers of its own choosing, and
    ``FORGE_CUDA_SPLIT`` not 0. Writes the CUDA source as the candidate wrote it to the cache, the file the split's
    ``#line`` directives name."""
    if os.environ.get("FORGE_CUDA_SPLIT") == "0" or "no_implicit_headers" in kwargs or not cuda_sources:
        return None
    parts = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources)
    if len(parts) != 1 or not isinstance(parts[0], str) or not _HAS_NO_IMPLICIT_HEADERS(load_inline_fn):
        return None
    cpp_list = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources or [])
    functions = kwargs.get("functions")
    names = [functions] if isinstance(functions, str) else list(functions or [])
    folder = cache_dir() / "cuda_sources"
    folder.mkdir(parents=True, exist_ok=True)
    origin = folder / f"{name}_{hashlib.sha256(parts[0].encode()).hexdigest()[:16]}.cu"
    if not origin.exists():
        tmp = origin.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(parts[0], encoding="utf-8")
        os.replace(tmp, origin)
    return split_cuda_source(
        cpp_list,
        parts[0],
        torch_include_dir(),
        str(origin),
        list(kwargs.get("extra_cuda_cflags") or []),
        names,
        prelude_include=str(split_prelude_file()),
    )


def split_prelude_file(lite: bool = False) -> Path:
    """`cudasplit.split_prelude` as a header file in the cache, where its precompiled forms go beside it
    (`split_prelude_pch`), named by its content (`lite`: the one without pybind11, for a main.cpp whose bindings are
    an object of their own)."""
    text = split_prelude(torch_include_dir(), lite=lite) + "\n"
    key = hashlib.sha256((text + torch.__version__).encode()).hexdigest()[:16]
    path = cache_dir() / "split_prelude" / key / "forge_split_prelude.h"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


#: the candidate's own main.cpp flags a precompiled split prelude is made for (others parse the prelude): the
#: optimization level and the per-thread default stream
_PCH_FLAG = re.compile(r"-O[0-3]|-DCUDA_API_PER_THREAD_DEFAULT_STREAM")
_PCH_ASKED: set[str] = set()


def _main_cpp_compiler(ninja: str) -> tuple[str, list[str]] | None:
    """The compiler and flags torch's build.ninja (its text) gives main.cpp, less the extension's name (no header
    reads it; GCC refuses a precompiled header made under another value)."""
    import shlex

    found = {k: v for k, v in re.findall(r"^(cxx|cflags|post_cflags) = (.*)$", ninja, re.MULTILINE)}
    if "cxx" not in found or "cflags" not in found:
        return None
    flags = [f for f in shlex.split(found["cflags"]) + shlex.split(found.get("post_cflags", "")) if f]
    return found["cxx"], [f for f in flags if not f.startswith("-DTORCH_EXTENSION_NAME=")]


def split_prelude_ready(candidate_flags: list[str]) -> bool:
    """Whether this process already saw to the precompiled preludes for these flags (made, or being made)."""
    key = json.dumps(sorted(f.strip() for f in candidate_flags if f.strip()))
    if key in _PCH_ASKED:
        return True
    _PCH_ASKED.add(key)
    return False


#: precompiled forms of the split prelude kept at most (one per flag set, ~240 MB each)
PCH_VARIANTS = 4
_PCH_THREADS: list[threading.Thread] = []


def ninja_for(name: str, kwargs: dict) -> str | None:
    """The build.ninja torch's load_inline would write for a main.cpp-only extension with these keyword arguments
    (torch's own writer, into a scratch folder; nothing is compiled), or None where this torch's writer cannot be
    called so. What `split_prelude_pch` reads main.cpp's flags from before the first split build has run."""
    import inspect
    import tempfile

    from torch.utils import cpp_extension

    writer = getattr(cpp_extension, "_write_ninja_file_to_build_library", None)
    if writer is None:
        return None
    with tempfile.TemporaryDirectory(prefix="forge-ninja-") as tmp:
        values = {
            "path": str(Path(tmp) / "build.ninja"),
            "name": name,
            "sources": [str(Path(tmp) / "main.cpp")],
            "extra_cflags": list(kwargs.get("extra_cflags") or []),
            "extra_cuda_cflags": list(kwargs.get("extra_cuda_cflags") or []),
            "extra_sycl_cflags": [],
            "extra_ldflags": list(kwargs.get("extra_ldflags") or []),
            "extra_include_paths": list(kwargs.get("extra_include_paths") or []),
            "with_cuda": True,
            "with_sycl": False,
            "is_standalone": False,
        }
        try:
            params = inspect.signature(writer).parameters
            writer(**{k: v for k, v in values.items() if k in params})
            return (Path(tmp) / "build.ninja").read_text()
        except Exception:  # noqa: BLE001 - an internal of torch's: without it the prelude is precompiled after a build
            return None


def split_prelude_pch(
    build_folder: Path | str, candidate_flags: list[str], lite: bool = False
) -> threading.Thread | None:
    """Precompile the split prelude for the flags a split build's main.cpp was compiled with, unless done: g++ then
    loads it (about 3.5 s) instead of parsing torch and pybind11 (about 10 s) in every later split build of the
    same flags. GCC picks the form whose flags match from ``forge_split_prelude.h.gch/``, and parses the header where
    none does, so a missing or mismatched one only costs time.

    The flags are the ones torch's build.ninja gave main.cpp (read back from `build_folder`), less the extension's
    name (no header reads it; GCC refuses a precompiled header made under another value). Written by one process at
    a time (a lock taken without waiting: the others build as they are), in a thread of this one, off the build's
    path, and renamed into place whole: g++ never reads a half-written one. Only for builds whose own flags are
    `_PCH_FLAG`s; None when nothing is started."""
    if any(f.strip() and not _PCH_FLAG.fullmatch(f.strip()) for f in candidate_flags):
        return None
    if isinstance(build_folder, str):  # the build.ninja text itself (`ninja_for`)
        ninja = build_folder
    else:
        try:
            ninja = (build_folder / "build.ninja").read_text()
        except OSError:
            return None
    compiler = _main_cpp_compiler(ninja)
    if compiler is None:
        return None
    cxx, flags = compiler
    header = split_prelude_file(lite)
    gch_dir = header.with_name(header.name + ".gch")
    key = hashlib.sha256(json.dumps([cxx, flags]).encode()).hexdigest()[:16]
    target = gch_dir / f"{key}.gch"
    if target.exists() or (gch_dir.is_dir() and len(list(gch_dir.glob("*.gch"))) >= PCH_VARIANTS):
        return None
    import fcntl

    lock = open(header.parent / f"{key}.lock", "a")  # noqa: SIM115 - held by the thread until it is done
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None

    def make() -> None:
        import shlex
        import subprocess

        try:
            if target.exists():
                return
            tmp = header.parent / f"{key}.{os.getpid()}.tmp.gch"  # outside the folder g++ reads
            cmd = [*shlex.split(cxx), "-x", "c++-header", str(header), "-o", str(tmp), *flags]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
            try:  # every build waits for it: ahead of the (niced) builds where the machine allows it
                os.setpriority(os.PRIO_PROCESS, proc.pid, 0)
            except OSError:
                pass
            _out, err = proc.communicate()
            if proc.returncode != 0:
                print(f"forge: the split prelude did not precompile: {err[-2000:]}", file=sys.stderr)
                tmp.unlink(missing_ok=True)
                return
            gch_dir.mkdir(exist_ok=True)
            os.replace(tmp, target)
            print(f"forge: precompiled the split prelude for {' '.join(flags)[-200:]}", file=sys.stderr, flush=True)
        finally:
            lock.close()

    thread = threading.Thread(target=make, name="forge-split-pch", daemon=True)
    thread.start()
    _PCH_THREADS.append(thread)
    return thread


def _nvcc_std() -> str:
    """The -std torch's load_inline gives nvcc when the candidate gives none (read from torch's own build code)."""
    import inspect

    from torch.utils import cpp_extension

    try:
        text = inspect.getsource(cpp_extension._write_ninja_file_to_build_library)
    except (AttributeError, OSError, TypeError):
        return "-std=c++17"
    found = re.findall(r"cuda_flags\.append\('(-std=c\+\+\d+)'\)", text)
    return found[-1] if found else "-std=c++17"


def bindings_object(sigs: list[str], wrap: bool, ninja: str) -> str:
    """The object of a split build's bindings (`cudasplit.bindings_source`) for functions of these types, compiled
    by main.cpp's compiler with main.cpp's flags (read from torch's build.ninja text `ninja`, so the precompiled
    full prelude serves it) and cached by content: every candidate whose bound functions have these types links the
    same object, and its own main.cpp never parses pybind11."""
    import shlex

    compiler = _main_cpp_compiler(ninja)
    if compiler is None:
        raise CompileError("torch's build file gives main.cpp no compiler")
    cxx, flags = compiler
    distinct = sorted(set(sigs))
    src_text = bindings_source(str(split_prelude_file()), distinct, bindings_tag(sigs, wrap), wrap)
    key = hashlib.sha256(json.dumps([src_text, cxx, flags, _toolchain_id(True)]).encode()).hexdigest()[:20]
    return _cached_object(
        cache_dir() / "split_bindings" / f"bind_{key}",
        ".cpp",
        src_text,
        [*shlex.split(cxx), *flags],
        "the bindings' object",
    )


def _cached_object(stem: Path, suffix: str, source: str, compiler: list[str], what: str) -> str:
    """`stem`.o compiled from `source` (written beside it as `stem` + `suffix`) by `compiler` ``-c``, unless it is
    there already (its name carries its content's key); each file written whole by a rename, so concurrent builds
    of the same object are harmless. A failure is a `CompileError` naming `what`, the compiler's messages also in
    the worker's log."""
    import subprocess

    stem.parent.mkdir(parents=True, exist_ok=True)
    obj = stem.with_name(stem.name + ".o")
    if obj.is_file():
        return str(obj)
    src = stem.with_name(stem.name + suffix)
    tmp_src = src.with_name(f"{src.name}.{os.getpid()}.tmp")
    tmp_src.write_text(source, encoding="utf-8")
    os.replace(tmp_src, src)
    tmp = stem.with_name(f"{stem.name}.{os.getpid()}.tmp.o")
    done = subprocess.run([*compiler, "-c", str(src), "-o", str(tmp)], capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        out = (done.stdout + done.stderr).strip()
        print(out, file=sys.stderr, flush=True)
        tmp.unlink(missing_ok=True)
        raise CompileError(f"{what} did not compile: {out[-3000:]}")
    os.replace(tmp, obj)
    return str(obj)


#: host code that uses Python or pybind11 itself: its main.cpp keeps the full prelude and the bindings
_USES_PYTHON = re.compile(r"py::|pybind11|PyObject|Py_|THP\w+|PYBIND11_|HANDLE_TH_ERRORS")


def split_bindings_plan(split: Split, cpp_sources: Any, kwargs: dict) -> tuple[dict[str, str], list[str], bool] | None:
    """Where a split build's bindings can be `bindings_object`'s object: the bound functions (name to docstring,
    as load_inline reads `functions`), their declared types, and whether torch's error handling wraps them; None
    where main.cpp keeps load_inline's own bindings (cpp_sources more than plain declarations, host code that uses
    Python itself, docstrings that are not plain text)."""
    functions = kwargs.get("functions")
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, list | tuple):
        functions = {f: f for f in functions}
    if not isinstance(functions, dict) or not functions:
        return None
    if any(not isinstance(d, str) or re.search(r'["\\\n]', d) for d in functions.values()):
        return None
    cpp_list = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources or [])
    sigs = binding_signatures(cpp_list, list(functions))
    if sigs is None or _USES_PYTHON.search("".join(split.host)):
        return None
    return functions, sigs, bool(kwargs.get("with_pytorch_error_handling", True))


def device_object(device_src: str, name: str, kwargs: dict, extra_flags: list[str] | None = None) -> str:
    """The object file of a split's device source, compiled by nvcc with the flags torch's load_inline gives a .cu
    (its common flags, the arch list's -gencode, -fPIC, the candidate's own), and cached by content: a repaired
    candidate, whose launchers changed and kernels did not, links the object its original built."""
    import shlex

    from torch.utils import cpp_extension

    home = getattr(cpp_extension, "CUDA_HOME", None)
    if not home:
        raise CompileError("no CUDA toolkit found (CUDA_HOME): cannot build CUDA sources")
    nvcc = str(Path(home) / "bin" / "nvcc")
    extra = [a for f in kwargs.get("extra_cuda_cflags") or [] for a in shlex.split(str(f))]
    flags = [
        *cpp_extension.COMMON_NVCC_FLAGS,
        *cpp_extension._get_cuda_arch_flags(list(kwargs.get("extra_cuda_cflags") or [])),
        "--compiler-options",
        "-fPIC",
        *extra,
        *(extra_flags or []),
    ]
    if not any(f.startswith("-std=") for f in flags):
        flags.append(_nvcc_std())
    flags += [f"-I{os.path.abspath(p)}" for p in kwargs.get("extra_include_paths") or []]
    if os.getenv("CC"):
        flags = ["-ccbin", os.environ["CC"], *flags]
    # the key leaves out the #line directives: a repaired candidate's kernels are the same code on other lines (or
    # of another source file), and its launches, not its kernels, are what a repair changes
    code = "".join(ln for ln in device_src.splitlines(keepends=True) if not ln.startswith("#line "))
    key = hashlib.sha256(json.dumps([code, flags, nvcc, _toolchain_id(True)]).encode()).hexdigest()[:20]
    return _cached_object(
        cache_dir() / "device_objects" / f"{name}_{key}", ".cu", device_src, [nvcc, *flags], f"{name!r}'s device code"
    )


_QUOTED = re.compile("\"([^\"\\n]*)\"|'([^'\\n]*)'|\u2018([^\u2019\\n]*)\u2019")
_WORD = re.compile(r"[A-Za-z_]\w*")
#: messages that say a name is unknown where it is used
#: nvcc's word for a qualifier it does not know (`torch::nn::X` under <torch/types.h>), which names no word of it
_UNKNOWN_QUALIFIER = re.compile(r'name followed by "::" must be a class or namespace name')
_UNKNOWN_NAME = re.compile(
    r"is undefined|was not declared|has no member|is not a member of|does not name a type|not a namespace|"
    r"has not been declared|undeclared identifier|unknown type name|is not a template|incomplete type"
)
#: names any message may quote that no torch header can add or change: C++ words, fundamental and <cstdint>
#: types, CUDA's vector and half types
_PLAIN_WORDS = frozenset(
    "const volatile unsigned signed int long short char float double bool void auto struct class enum union "
    "static inline constexpr true false nullptr operator template typename this std size_t ssize_t ptrdiff_t "
    "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t dim3 half __half __nv_bfloat16 "
    "float2 float3 float4 int2 int3 int4 uint2 uint4 double2 double4 char4 uchar4 __restrict__ restrict".split()
)


def library_words() -> frozenset[str]:
    """Every identifier in torch's and the CUDA toolkit's headers: what a heavier header set could declare. Read once
    per machine (about 2 s) and kept in the cache."""
    if "words" in _LIBRARY_WORDS:
        return _LIBRARY_WORDS["words"]
    from torch.utils import cpp_extension

    roots = [torch_include_dir()]
    home = getattr(cpp_extension, "CUDA_HOME", None)
    if home and (Path(home) / "include").is_dir():
        roots.append(Path(home) / "include")
    tag = hashlib.sha256(json.dumps([str(r) for r in roots] + [torch.__version__]).encode()).hexdigest()[:16]
    path = cache_dir() / f"library-words-{tag}.txt"
    try:
        _LIBRARY_WORDS["words"] = frozenset(path.read_text().split())
        return _LIBRARY_WORDS["words"]
    except OSError:
        pass
    found: set[bytes] = set()
    word = re.compile(rb"[A-Za-z_]\w*")
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                try:
                    found.update(word.findall(Path(dirpath, f).read_bytes()))
                except OSError:
                    continue
    words = {w.decode() for w in found}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text("\n".join(sorted(words)))
    os.replace(tmp, path)
    _LIBRARY_WORDS["words"] = frozenset(words)
    return _LIBRARY_WORDS["words"]


#: read once per process (a dict, never rebound: the monkeypatch guard watches forge's module globals)
_LIBRARY_WORDS: dict[str, frozenset[str]] = {}


def _only_deprecated_type(log: str) -> bool:
    """Whether every compiler error is ``x.type()`` given where a scalar type is wanted: torch's deprecated type
    object, the same in every header set, so the split build's error is the source's own (any other error of a split
    build goes on to the slim tier, which compiles the source as the candidate laid it out)."""
    from ..logparse import compile_errors

    errors = [e for e in compile_errors(log) if e.severity == "error"]
    return bool(errors) and all("DeprecatedTypeProperties" in e.message for e in errors)


def _headers_may_fix(log: str, words: frozenset[str] | None = None) -> bool:
    """Whether a build that failed with these compiler messages could build with more of torch's headers.

    No, only when every error is in the candidate's own files (cuda.cu, main.cpp: not inside a header) and names
    nothing a header could declare: a name unknown where it is used that no torch or CUDA header has (a typo, a
    launcher the bindings name but nothing defines), a mismatch between plain types (``double *`` for ``const float
    *``), or ``x.type()`` where a scalar type is wanted (no header converts torch's deprecated type object). Any
    other message, or none that can be read, says yes: the next header set is tried, as before."""
    from ..logparse import compile_errors

    errors = [e for e in compile_errors(log) if e.severity == "error"]
    if not errors:
        return True
    words = library_words() if words is None else words
    for e in errors:
        if Path(e.file).name not in ("cuda.cu", "main.cpp"):
            return True
        if "DeprecatedTypeProperties" in e.message:
            continue
        if _UNKNOWN_QUALIFIER.search(
            e.message
        ):  # a namespace a header declares (`torch::nn::`), unnamed in the message
            return True
        quoted = {w for q in _QUOTED.findall(e.message) for part in q for w in _WORD.findall(part)}
        if _UNKNOWN_NAME.search(e.message):
            if quoted & words or not quoted:
                return True
            continue
        if (quoted - _PLAIN_WORDS) & words:
            return True
    return False


SLIM_MAIN_MARK = "// forge: slim main.cpp prelude in place of <torch/extension.h>"


def slim_main_sources(cpp_sources: list[str], include_dir: Path) -> list[str] | None:
    """main.cpp's sources with a light prelude in place of <torch/extension.h>, or None.

    A CUDA candidate's main.cpp holds the declarations of its launchers and the pybind11 bindings
    load_inline generates for them. <torch/extension.h> there is the whole C++ frontend and pybind11:
    about 28 s of g++ on the CPU host without torch's precompiled header (which takes ~45 s to build,
    once per machine), against 7 s with this prelude: pybind11 with torch's tensor casters
    (<torch/csrc/utils/pybind.h>), its error translation (<torch/csrc/Exceptions.h>, for
    ``torch::wrap_pybind_function``) and the ``torch::`` names of <torch/types.h>. Only when the sources
    define nothing (no braces: declarations, includes, ``using``) and need nothing of the C++ frontend or
    pybind11 themselves; their own includes are kept, torch's umbrella headers dropped.
    """
    joined = "\n".join(cpp_sources)
    code = _BLANK.sub(" ", joined)
    if "{" in code or "}" in code or _TORCH_ONLY_API.search(code):
        return None
    prelude = "\n".join(
        [
            SLIM_MAIN_MARK,
            "#include <ATen/core/Tensor.h>",
            "#include <torch/csrc/utils/pybind.h>",
            "#include <torch/csrc/Exceptions.h>",
            _torch_namespace_block(include_dir),
        ]
    )
    kept = [
        "".join(
            line
            for line in src.splitlines(keepends=True)
            if not ((m := _INCLUDE.match(line.rstrip("\n"))) and m.group(1) in _UMBRELLAS)
        )
        for src in cpp_sources
    ]
    return [prelude + "\n", *kept]


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
