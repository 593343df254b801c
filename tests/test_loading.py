"""Candidate loading helpers: header rewrites for load_inline CUDA builds."""

import pytest


def test_lighter_cuda_headers_rewrite():
    from forge_lsp.engine.harness.loading import lighter_cuda_headers

    src = "#include <torch/extension.h>\n__global__ void k() {}\n"
    assert lighter_cuda_headers(src) == "#include <torch/types.h>\n__global__ void k() {}\n"
    assert lighter_cuda_headers([src])[0].startswith("#include <torch/types.h>")
    assert lighter_cuda_headers(src + "PYBIND11_MODULE(x, m) {}") is None  # needs the full header
    assert lighter_cuda_headers("__global__ void k() {}") is None
    assert lighter_cuda_headers(None) is None


KERNELBENCH_STYLE_CU = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <typename scalar_t>
__global__ void add_kernel(const scalar_t* a, const scalar_t* b, scalar_t* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "size mismatch");
    auto out = torch::zeros_like(a);
    auto scratch = torch::empty({a.size(0)}, a.options().dtype(torch::kFloat32));
    const int64_t n = a.numel();
    AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "add", ([&] {
        add_kernel<scalar_t><<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
    }));
    return out;
}
"""


def test_slim_prelude_replaces_umbrella_headers_with_the_operators_used():
    from forge_lsp.engine.harness.loading import slim_cuda_sources, torch_include_dir

    slim = slim_cuda_sources(KERNELBENCH_STYLE_CU, torch_include_dir())
    assert "#include <torch/extension.h>" not in slim and "#include <ATen/cuda/CUDAContext.h>" not in slim
    for header in ("ATen/ops/zeros_like.h", "ATen/ops/empty.h", "ATen/Dispatch.h", "c10/cuda/CUDAStream.h"):
        assert f"#include <{header}>" in slim
    assert "constexpr auto kFloat32" in slim  # torch:: dtype aliases come along
    assert slim.count("forge: slim prelude") == 1 and "add_kernel<scalar_t><<<" in slim


def test_slim_prelude_declines_sources_that_need_the_full_frontend():
    from forge_lsp.engine.harness.loading import slim_cuda_sources, torch_include_dir

    inc = torch_include_dir()
    assert slim_cuda_sources(KERNELBENCH_STYLE_CU + "\nstatic torch::nn::Linear* l = nullptr;\n", inc) is None
    assert slim_cuda_sources(KERNELBENCH_STYLE_CU + "\nPYBIND11_MODULE(x, m) {}\n", inc) is None
    assert slim_cuda_sources("__global__ void k() {}", inc) is None
    assert isinstance(slim_cuda_sources([KERNELBENCH_STYLE_CU], inc), list)


@pytest.mark.slow
def _nvcc_compile(tmp_path, source: str, flags: list[str]):
    """nvcc -c of `source` against torch's headers (compile-only, no GPU needed); skips without nvcc."""
    import shutil
    import subprocess
    import sysconfig

    from torch.utils import cpp_extension

    from forge_lsp.engine.harness.loading import torch_include_dir

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    if not (torch_include_dir() / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").exists():
        (stub / "cuda_cmake_macros.h").write_text("#define C10_CUDA_BUILD_SHARED_LIBS\n")  # CPU torch lacks it
    cu = tmp_path / "k.cu"
    cu.write_text(source)
    includes = [f"-I{p}" for p in cpp_extension.include_paths()] + [
        f"-I{tmp_path / 'stub'}",
        f"-I{sysconfig.get_paths()['include']}",
    ]
    return subprocess.run(
        [nvcc, "-c", "-std=c++17", *flags, *includes, str(cu), "-o", str(tmp_path / "k.o")],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_slim_prelude_compiles_with_nvcc(tmp_path):
    """Compile-only: the slim .cu must build where the torch headers are (no GPU needed)."""
    from forge_lsp.engine.harness.loading import slim_cuda_sources, torch_include_dir

    r = _nvcc_compile(tmp_path, slim_cuda_sources(KERNELBENCH_STYLE_CU, torch_include_dir()), ["-arch=sm_90"])
    assert r.returncode == 0, r.stderr[-3000:]


def test_cuda_build_tries_slim_then_types_h_then_the_source_as_written(monkeypatch, tmp_path):
    from torch.utils import cpp_extension

    from forge_lsp.engine.harness.loading import SLIM_MAIN_MARK, cached_load_inline

    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FORGE_LOAD_INLINE_PCH", "0")
    calls = []

    def fake_load_inline(name, cpp_sources, cuda_sources=None, no_implicit_headers=False, **kw):
        cu = "\n".join(cuda_sources) if isinstance(cuda_sources, list) else cuda_sources
        kind = "slim" if "forge: slim prelude" in cu else "types.h" if "<torch/types.h>" in cu else "as written"
        if kind == "slim":  # load_inline would prepend <torch/types.h>: the shim adds the light headers itself
            assert no_implicit_headers and "#include <cuda_runtime.h>" in cu
            assert cpp_sources[0].startswith(SLIM_MAIN_MARK)  # main.cpp: declarations and bindings, light headers
        else:
            assert not no_implicit_headers
        calls.append((kind, name, kw["build_directory"]))
        if kind != fail_until:
            raise RuntimeError(f"Error building extension '{name}'")
        return kind

    monkeypatch.setattr(cpp_extension, "load_inline", fake_load_inline)
    for fail_until, expected in (
        ("slim", ["slim"]),
        ("types.h", ["slim", "types.h"]),
        ("as written", ["slim", "types.h", "as written"]),
    ):
        calls.clear()
        with cached_load_inline():
            assert cpp_extension.load_inline("ext", "", KERNELBENCH_STYLE_CU, functions=["f"]) == fail_until
        assert [c[0] for c in calls] == expected
        assert len({c[1] for c in calls}) == len(calls)  # each variant has its own name and build dir
        assert all(str(tmp_path) in c[2] for c in calls)
    assert cpp_extension.load_inline is fake_load_inline  # restored on exit

    def old_torch_load_inline(name, cpp_sources, cuda_sources=None, **kw):  # no no_implicit_headers (torch < 2.8)
        calls.append(("types.h" if "<torch/types.h>" in cuda_sources else "as written", name, ""))
        return "ok"

    monkeypatch.setattr(cpp_extension, "load_inline", old_torch_load_inline)
    calls.clear()
    with cached_load_inline():
        cpp_extension.load_inline("ext", "", KERNELBENCH_STYLE_CU, functions=["f"])
    assert [c[0] for c in calls] == ["types.h"]  # slim is pointless when torch/types.h is forced in


PLAIN_KERNEL_CU = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>

#define BLOCK 256  // a macro "{" in a comment must not confuse the split
/* torch::Tensor in a comment is not code */
__device__ __forceinline__ float twice(float v) { return 2.f * v; }

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = twice(x[i]);
}

static void check(const torch::Tensor& x) { TORCH_CHECK(x.is_cuda(), "x must be on the GPU"); }

torch::Tensor scale(torch::Tensor x) {
    check(x);
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    const long long n = x.numel();
    scale_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""


def test_torch_host_code_is_hidden_from_the_device_pass_only():
    from forge_lsp.engine.harness.loading import (
        _top_level_chunks,
        hide_host_code_from_device_pass,
        slim_cuda_sources,
        torch_include_dir,
    )

    slim = slim_cuda_sources(PLAIN_KERNEL_CU, torch_include_dir())
    assert "".join(_top_level_chunks(slim)) == slim
    hidden = _device_pass_view(slim)
    assert "__global__ void scale_kernel" in hidden and "twice(float v)" in hidden and "#define BLOCK" in hidden
    assert "torch::Tensor scale" not in hidden and "ATen/core/Tensor.h" not in hidden
    assert "c10/cuda/CUDAGuard.h" not in hidden and "static void check" not in hidden
    host = _host_pass_view(slim)
    assert "torch::Tensor scale" in host and "ATen/core/Tensor.h" in host and "scale_kernel<<<" in host
    # device code generated from host code must stay visible: nothing is hidden then
    assert hide_host_code_from_device_pass(KERNELBENCH_STYLE_CU) is None  # template kernel, launch instantiates it
    lambda_src = PLAIN_KERNEL_CU.replace("check(x);", "auto f = [] __device__ (float v) { return v; };")
    assert hide_host_code_from_device_pass(lambda_src) is None


def _preprocessor_view(src: str, device: bool) -> str:
    """Keep the lines the preprocessor keeps for the device (__CUDA_ARCH__ defined) or host pass."""
    out, stack = [], [True]
    for line in src.splitlines():
        text = line.strip()
        if text.startswith("#ifndef __CUDA_ARCH__"):
            stack.append(stack[-1] and not device)
        elif text.startswith("#if"):
            stack.append(stack[-1])
        elif text.startswith("#endif"):
            stack.pop()
        elif stack[-1]:
            out.append(line)
    return "\n".join(out)


def _device_pass_view(src: str) -> str:
    return _preprocessor_view(src, device=True)


def _host_pass_view(src: str) -> str:
    return _preprocessor_view(src, device=False)


@pytest.mark.slow
def test_slim_source_with_hidden_host_code_builds_with_nvcc(tmp_path):
    """Compile-only with load_inline's nvcc flags: kernel, device stub and launcher all end up in the object."""
    import subprocess

    from forge_lsp.engine.harness.loading import slim_cuda_sources, torch_include_dir

    source = "#include <cuda.h>\n#include <cuda_runtime.h>\n" + slim_cuda_sources(PLAIN_KERNEL_CU, torch_include_dir())
    r = _nvcc_compile(
        tmp_path,
        source,
        ["-gencode", "arch=compute_90,code=sm_90", "--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__"],
    )
    assert r.returncode == 0, r.stderr[-3000:]
    symbols = subprocess.run(["nm", "-C", str(tmp_path / "k.o")], capture_output=True, text=True).stdout
    assert "scale(at::Tensor)" in symbols and "__device_stub__" in symbols
    fatbin = tmp_path / "fatbin.bin"  # the device code is there: the embedded cubin defines the kernel
    subprocess.run(
        ["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(tmp_path / "k.o"), str(fatbin)], check=True
    )
    assert b"_Z12scale_kernelPKfPfx" in fatbin.read_bytes()


CPP_ADD = """
#include <torch/extension.h>
torch::Tensor add_one(torch::Tensor x) { return x + 1; }
"""

LOAD = """
import sys, torch
from torch.utils import cpp_extension
from forge_lsp.engine.harness.loading import cached_load_inline
with cached_load_inline():
    ext = cpp_extension.load_inline("add_one_ext", [sys.argv[1]], functions=["add_one"])
print("loaded", ext.add_one(torch.zeros(2)).tolist())
"""


@pytest.mark.slow
def test_a_build_lock_left_by_a_killed_build_does_not_stall_the_next_build(tmp_path):
    """torch leaves ``lock`` in an extension's build folder when its build is killed; the next build of the same
    extension would wait for it until its deadline. forge's builds hold an OS lock on the folder, so the
    leftover is known stale, removed and said."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, FORGE_CACHE_DIR=str(tmp_path), FORGE_LOAD_INLINE_PCH="0")
    first = subprocess.run([sys.executable, "-c", LOAD, CPP_ADD], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0 and "loaded [1.0, 1.0]" in first.stdout, first.stderr[-2000:]
    (folder,) = [p for p in (tmp_path / "torch_extensions").iterdir() if p.name.startswith("add_one_ext")]
    (folder / "lock").write_text("")  # what a build killed mid-compile leaves, with no mark of a finished build
    (folder / "forge-built.json").unlink()
    again = subprocess.run([sys.executable, "-c", LOAD, CPP_ADD], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "loaded [1.0, 1.0]" in again.stdout, again.stderr[-2000:]
    assert "removed a build lock left by a killed build" in again.stderr
    assert not (folder / "lock").exists()


def test_a_main_of_declarations_gets_the_slim_prelude_instead_of_torch_extension_h():
    from forge_lsp.engine.harness.loading import SLIM_MAIN_MARK, slim_main_sources, torch_include_dir

    decls = "#include <torch/extension.h>\n#include <vector>\n// a {brace} in a comment\ntorch::Tensor f(torch::Tensor x);\n"
    main = slim_main_sources([decls], torch_include_dir())
    assert main is not None and main[0].startswith(SLIM_MAIN_MARK)
    assert "#include <torch/extension.h>" not in "".join(main) and "#include <vector>" in main[1]
    assert "torch::Tensor f(torch::Tensor x);" in main[1]
    assert slim_main_sources([""], torch_include_dir()) is not None  # load_inline's bindings only
    # a definition, or pybind11 / the C++ frontend used in main.cpp itself: the full header stays
    assert slim_main_sources(["torch::Tensor f(torch::Tensor x) { return x; }"], torch_include_dir()) is None
    assert slim_main_sources(["void g(py::object o);"], torch_include_dir()) is None
    assert slim_main_sources(["torch::nn::Linear make();"], torch_include_dir()) is None


@pytest.mark.slow
def test_bindings_built_on_the_slim_main_prelude_load_and_run(tmp_path):
    """main.cpp as load_inline writes it for a slim build (the prelude, the declarations, its generated bindings),
    linked with the definitions built elsewhere (as the .cu is): the module imports and calls through torch's
    bindings, errors included."""
    import torch
    from torch.utils import cpp_extension

    from forge_lsp.engine.harness.loading import slim_main_sources, torch_include_dir

    decls = "#include <torch/extension.h>\ntorch::Tensor add_one(torch::Tensor x);\n"
    bindings = [
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",
        'm.def("add_one", torch::wrap_pybind_function(add_one), "add_one");',
        "}",
    ]
    main = tmp_path / "main.cpp"
    main.write_text("\n".join([*slim_main_sources([decls], torch_include_dir()), *bindings]))
    impl = tmp_path / "impl.cpp"
    impl.write_text(
        "#include <ATen/core/Tensor.h>\n#include <ATen/ops/add.h>\n#include <c10/util/Exception.h>\n"
        'at::Tensor add_one(at::Tensor x) { TORCH_CHECK(x.dim() == 1, "x must be 1-D"); return at::add(x, 1); }\n'
    )
    ext = cpp_extension.load("slim_main_check", [str(main), str(impl)], build_directory=str(tmp_path))
    assert ext.add_one(torch.zeros(3)).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="x must be 1-D"):  # torch's error translation is there
        ext.add_one(torch.zeros(2, 2))


@pytest.mark.integration
def test_a_build_reading_torch_extension_h_waits_while_the_header_is_written(tmp_path, monkeypatch):
    """g++ stops with "cannot read" on a half-written precompiled header: a build that may read it starts only once
    the build writing it is done."""
    import fcntl
    import threading
    import time

    from forge_lsp.engine.harness import loading

    # a lock of the test's own: the machine's is also taken by the real builds of tests running beside this one
    lock = tmp_path / "pch.lock"
    monkeypatch.setattr(loading, "pch_lock_path", lambda: lock)
    released: list[float] = []
    holding = threading.Event()

    def writer() -> None:
        with open(loading.pch_lock_path(), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            holding.set()
            time.sleep(0.5)
            released.append(time.monotonic())
            fcntl.flock(fh, fcntl.LOCK_UN)

    t = threading.Thread(target=writer)
    t.start()
    assert holding.wait(10)
    with loading.precompiled_header([], None, refresh=False):
        entered = time.monotonic()
    t.join()
    assert released and entered >= released[0]


def test_a_build_refreshing_the_header_builds_it_alone_then_reads_it_shared(monkeypatch, tmp_path):
    import fcntl

    from torch.utils import cpp_extension

    from forge_lsp.engine.harness import loading

    monkeypatch.setattr(loading, "pch_lock_path", lambda: tmp_path / "pch.lock")  # not the machine's
    seen: list[tuple[list[str], bool]] = []

    def check_and_build(flags, includes):  # torch's: checks the header's flags, rebuilds it if they differ
        with open(loading.pch_lock_path(), "a") as probe:  # nobody else may hold the lock meanwhile
            try:
                fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
                free = True
            except BlockingIOError:
                free = False
        seen.append((flags, free))

    monkeypatch.setattr(cpp_extension, "_check_and_build_extension_h_precompiler_headers", check_and_build)
    with loading.precompiled_header(["-DX"], None, refresh=True):
        with open(loading.pch_lock_path(), "a") as other:  # now shared: other readers come in, no writer
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert seen == [(["-DX"], False)]


def test_a_header_refreshed_for_the_same_flags_is_not_waited_for_again(monkeypatch, tmp_path):
    """Builds reading torch's precompiled header hold the machine's lock shared for their whole build: a build that
    wanted it exclusively, to check the header, waited up to a minute for them, for each header tier it tried, though
    the header was already built for its flags. Once forge has refreshed it for some flags, a build with the same
    flags goes straight to reading it; other flags, or a header gone, still refresh it."""
    import fcntl
    import threading
    import time

    from torch.utils import cpp_extension

    from forge_lsp.engine.harness import loading

    monkeypatch.setattr(loading, "pch_lock_path", lambda: tmp_path / "pch.lock")
    include = tmp_path / "include"
    (include / "torch").mkdir(parents=True)
    monkeypatch.setattr(loading, "torch_include_dir", lambda: include)
    built: list[list[str]] = []

    def check_and_build(flags, includes):  # torch's: rebuilds the header for these flags
        built.append(flags)
        (include / "torch" / "extension.h.gch").write_bytes(b"pch")

    monkeypatch.setattr(cpp_extension, "_check_and_build_extension_h_precompiler_headers", check_and_build)
    with loading.precompiled_header(["-DX"], None, refresh=True):
        pass
    assert built == [["-DX"]]
    reading, done = threading.Event(), threading.Event()

    def reader() -> None:  # another build, reading the header all along
        with open(loading.pch_lock_path(), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_SH)
            reading.set()
            done.wait(30)
            fcntl.flock(fh, fcntl.LOCK_UN)

    t = threading.Thread(target=reader)
    t.start()
    try:
        assert reading.wait(10)
        t0 = time.monotonic()
        with loading.precompiled_header(["-DX"], None, refresh=True, wait_s=20):
            pass
        assert time.monotonic() - t0 < 5 and built == [["-DX"]]  # neither waited nor built again
        t0 = time.monotonic()
        with loading.precompiled_header(["-DY"], None, refresh=True, wait_s=0.5):
            pass
        assert time.monotonic() - t0 >= 0.5 and built == [["-DX"]]  # other flags: waited, then went on
    finally:
        done.set()
        t.join()
    (include / "torch" / "extension.h.gch").unlink()
    with loading.precompiled_header(["-DX"], None, refresh=True):
        pass
    assert built == [["-DX"], ["-DX"]]  # the header gone: built again


def test_a_slim_build_neither_waits_for_nor_deletes_the_precompiled_header(monkeypatch, tmp_path):
    """A slim build's main.cpp does not include torch/extension.h: it builds while another build writes the header.
    And torch's load_inline deletes the machine's header whenever a build does not ask for it: not under forge."""
    import fcntl
    import threading

    from torch.utils import cpp_extension

    from forge_lsp.engine.harness import loading

    fake_torch = tmp_path / "torch"
    header = fake_torch / "include" / "torch" / "extension.h.gch"
    header.parent.mkdir(parents=True)
    header.write_text("precompiled")
    monkeypatch.setattr(cpp_extension, "_TORCH_PATH", str(fake_torch))
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def fake_load_inline(name, cpp_sources, cuda_sources=None, use_pch=False, no_implicit_headers=False, **kw):
        calls.append((cpp_sources[0], use_pch))
        if use_pch is not True:  # what torch's load_inline does
            cpp_extension.remove_extension_h_precompiler_headers()
        return "built"

    monkeypatch.setattr(cpp_extension, "load_inline", fake_load_inline)
    results = []
    with open(loading.pch_lock_path(), "a") as writing:
        fcntl.flock(writing, fcntl.LOCK_EX)  # another build is writing the header
        with loading.cached_load_inline():
            t = threading.Thread(
                target=lambda: results.append(
                    cpp_extension.load_inline("ext", "", KERNELBENCH_STYLE_CU, functions=["f"])
                )
            )
            t.start()
            t.join(60)
        fcntl.flock(writing, fcntl.LOCK_UN)
    assert results == ["built"], "the slim build waited for the header's lock"
    assert calls[0][0].startswith(loading.SLIM_MAIN_MARK) and calls[0][1] is False
    assert header.read_text() == "precompiled"
    cpp_extension.remove_extension_h_precompiler_headers()  # torch's own, outside forge's builds
    assert not header.exists()


def test_the_precompiled_header_is_not_part_of_the_cache_key(monkeypatch, tmp_path):
    """Whether main.cpp compiled with torch's precompiled header or without, it is the same extension: a candidate
    built without it (the header was being written) is found by the device's worker that has it."""
    from torch.utils import cpp_extension

    from forge_lsp.engine.harness import loading

    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(
        cpp_extension, "_check_and_build_extension_h_precompiler_headers", lambda f, i: None, raising=False
    )
    folders = []

    def fake_load_inline(name, cpp_sources, cuda_sources=None, use_pch=False, **kw):
        assert use_pch is False
        folders.append(kw["build_directory"])
        return "built"

    monkeypatch.setattr(cpp_extension, "load_inline", fake_load_inline)
    with loading.cached_load_inline():
        for asked in (True, False, None):
            cpp_extension.load_inline("ext", CPP_ADD, functions=["add_one"], use_pch=asked)
    assert len(folders) == 3 and len(set(folders)) == 1, folders


@pytest.mark.slow
def test_a_finished_build_is_loaded_as_it_is_without_the_compiler(tmp_path):
    """A build that finished says so in its folder; the next load of the same extension imports the module at once,
    with no compiler, header or lock involved (a device's worker loading what a build worker built)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, FORGE_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", LOAD, CPP_ADD], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0 and "loaded [1.0, 1.0]" in first.stdout, first.stderr[-2000:]
    (folder,) = [p for p in (tmp_path / "torch_extensions").iterdir() if p.name.startswith("add_one_ext")]
    assert (folder / "forge-built.json").exists()
    no_compiler = LOAD.replace(
        "with cached_load_inline():",
        "def refuse(*a, **k):\n    raise SystemExit('the build ran again')\ncpp_extension.load_inline = refuse\n"
        "with cached_load_inline():",
    )
    again = subprocess.run(
        [sys.executable, "-c", no_compiler, CPP_ADD], env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and "loaded [1.0, 1.0]" in again.stdout, again.stderr[-2000:]
    (so,) = [p for p in folder.iterdir() if p.suffix == ".so"]
    built = so.read_bytes()
    so.write_bytes(built[:-16] + bytes(16))  # changed since its build (another candidate's code, say): built again
    changed = subprocess.run([sys.executable, "-c", no_compiler, CPP_ADD], env=env, capture_output=True, text=True)
    assert changed.returncode != 0 and "the build ran again" in changed.stderr
    assert "is not what its build made" in changed.stderr
    so.write_bytes(built)
    (folder / "forge-built.json").unlink()  # no mark (a build killed before its end): built again, not trusted
    third = subprocess.run([sys.executable, "-c", no_compiler, CPP_ADD], env=env, capture_output=True, text=True)
    assert third.returncode != 0 and "the build ran again" in third.stderr
