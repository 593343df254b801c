"""The device/host split of load_inline CUDA sources (`forge_lsp.engine.harness.cudasplit`) and the header tiers'
early stop (`loading._headers_may_fix`): text on the CPU; the split compiled with the real nvcc and g++ where they are
installed (`slow`); built, linked and run on the GPU (`gpu`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from forge_lsp.engine.harness.cudasplit import LAUNCH, split_cuda_source

ROOT = Path(__file__).resolve().parents[1]

RELU = """
#include <torch/extension.h>
#include <cuda_runtime.h>

#define BLOCK 256

__global__ void relu_kernel(const float* __restrict__ x, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        out[idx] = fmaxf(x[idx], 0.0f);
    }
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto size = x.numel();
    auto out = torch::empty_like(x);
    const int num_blocks = min(65535, (int)((size + BLOCK - 1) / BLOCK));
    relu_kernel<<<num_blocks,
                  BLOCK>>>(x.data_ptr<float>(), out.data_ptr<float>(), size);
    return out;
}
"""
CPP = ["torch::Tensor relu_cuda(torch::Tensor x);"]

TEMPLATED = """
#include <torch/extension.h>

template <typename scalar_t, int VEC>
__global__ void relu_kernel(const scalar_t* __restrict__ x, scalar_t* out, int size) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    for (int v = 0; v < VEC; ++v)
        if (idx + v < size) out[idx + v] = x[idx + v] > 0 ? x[idx + v] : 0;
}

template <int BLOCK>
__global__ void scale_kernel(float* out, int size) {
    int idx = blockIdx.x * BLOCK + threadIdx.x;
    if (idx < size) out[idx] *= 2.0f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto out = torch::empty_like(x);
    int size = x.numel();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu_cuda", ([&] {
        relu_kernel<scalar_t, 2><<<(size + 511) / 512, 256>>>(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), size);
    }));
    if (x.scalar_type() == at::kFloat) scale_kernel<256><<<(size + 255) / 256, 256>>>(out.data_ptr<float>(), size);
    return out;
}
"""


def _compilers() -> bool:
    return shutil.which("nvcc") is not None and shutil.which("g++") is not None


def cuda_include() -> Path:
    """The CUDA toolkit's headers (nvcc may be a wrapper script on PATH)."""
    import os

    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and (Path(home) / "include" / "cuda_runtime_api.h").is_file():
            return Path(home) / "include"
    out = subprocess.run(["nvcc", "-dryrun", "-c", "-x", "cu", "/dev/null"], capture_output=True, text=True).stderr
    return Path(re.search(r'-I"?([^" ]+/include)', out).group(1))


def include_dir() -> Path:
    import torch

    return Path(torch.__file__).parent / "include"


def split(src: str = RELU, cpp=CPP, flags=None, functions=("relu_cuda",)):
    return split_cuda_source(list(cpp), src, include_dir(), "/src/cand.cu", flags, list(functions))


def origin_line(text: str, needle: str) -> int:
    """The line `#line` directives give the first line containing `needle`."""
    current = 0
    for ln in text.splitlines():
        m = re.match(r'#line (\d+) "', ln)
        if m:
            current = int(m.group(1))
            continue
        if needle in ln:
            return current
        current += 1
    raise AssertionError(needle)


def test_kernels_go_to_the_device_source_and_launchers_to_main_with_their_launches_rewritten():
    s = split()
    assert s is not None and s.kernels == ["relu_kernel"]
    assert "__global__ void relu_kernel" in s.device and "torch" not in s.device.replace("// forge", "")
    assert "#define BLOCK 256" in s.device  # preprocessor lines go to both sides
    host = "".join(s.host)
    assert "void relu_kernel(const float* __restrict__ x, float* out, int size);" in host
    assert "__global__" not in host and "<<<" not in host
    # grid, block, no shared memory, stream 0 (the legacy default stream, as the candidate launched)
    assert re.search(rf"{LAUNCH}\(relu_kernel, num_blocks, BLOCK, 0, 0, x.data_ptr<float>\(\)", host)
    assert "#include <ATen/ops/empty_like.h>" in host
    assert "static inline int min(int x, int y)" in host  # nvcc's host min/max, which g++ lacks
    assert "torch::Tensor relu_cuda(torch::Tensor x);" in host


def test_both_sides_keep_the_candidates_line_numbers():
    s = split()
    want = RELU.splitlines()
    for text, needle in ((s.device, "out[idx] = fmaxf"), ("".join(s.host), "auto out = torch::empty_like")):
        line = origin_line(text, needle)
        assert needle in want[line - 1], (needle, line)
    # a launch written over two lines still ends on the line the candidate's ended on
    host = "".join(s.host)
    assert origin_line(host, "return out;") == next(i for i, ln in enumerate(want, 1) if "return out;" in ln)


def test_a_launch_with_shared_memory_and_a_stream_keeps_both():
    src = RELU.replace(
        "<<<num_blocks,\n                  BLOCK>>>", "<<<num_blocks, BLOCK, 64, at::cuda::getCurrentCUDAStream()>>>"
    )
    host = "".join(split(src).host)
    assert f"{LAUNCH}(relu_kernel, num_blocks, BLOCK, 64, at::cuda::getCurrentCUDAStream(), " in host
    assert "#include <c10/cuda/CUDAStream.h>" in host


def test_nvcc_flags_the_host_code_was_written_for_follow_it_to_main():
    s = split(flags=["-O3", "--use_fast_math", "-DTILE=32", "--default-stream", "per-thread", "-lineinfo"])
    assert s.host_flags == ["-DTILE=32", "-O3", "-DCUDA_API_PER_THREAD_DEFAULT_STREAM"]
    assert "-DCUDA_API_PER_THREAD_DEFAULT_STREAM" in split(flags=["--default-stream=per-thread"]).host_flags
    assert split(flags=["-O3"]).host_flags == ["-O3"]


@pytest.mark.parametrize(
    "why,src",
    [
        (
            "a kernel template whose arguments the launch leaves to deduction",
            RELU.replace(
                "__global__ void relu_kernel(const float*",
                "template <typename T>\n__global__ void relu_kernel(const T*",
            ),
        ),
        (
            "a kernel template dispatched over Half (c10::Half in device code)",
            TEMPLATED.replace("AT_DISPATCH_FLOATING_TYPES(", "AT_DISPATCH_FLOATING_TYPES_AND_HALF("),
        ),
        ("torch in device code", RELU.replace("fmaxf(x[idx], 0.0f)", "c10::cuda::compat::max(x[idx], 0.0f)")),
        (
            "host code writing a __constant__",
            RELU.replace("#define BLOCK 256", "#define BLOCK 256\n__constant__ float slope[1];").replace(
                "auto out = torch::empty_like(x);",
                "auto out = torch::empty_like(x);\n    cudaMemcpyToSymbol(slope, &size, 4);",
            ),
        ),
        (
            "kernels in a namespace",
            RELU.replace("__global__ void relu_kernel", "namespace k { __global__ void relu_kernel").replace(
                "        out[idx] = fmaxf(x[idx], 0.0f);\n    }\n}",
                "        out[idx] = fmaxf(x[idx], 0.0f);\n    }\n}}",
            ),
        ),
        ("a launch of something not a kernel here", RELU.replace("relu_kernel<<<", "other_kernel<<<")),
        ("thrust", RELU.replace("auto size = x.numel();", "auto size = x.numel(); thrust::fill(0);")),
        ("pybind11 in the .cu", RELU + '\nPYBIND11_MODULE(x, m) { m.def("relu_cuda", &relu_cuda); }\n'),
    ],
)
def test_what_the_split_would_not_keep_faithful_is_not_split(why, src):
    assert split(src) is None, why


def test_a_function_the_bindings_name_but_cpp_sources_do_not_declare_is_not_split():
    """As written, main.cpp sees only cpp_sources: a launcher defined in the .cu under a name cpp_sources never
    declare does not compile there. Split, it would (the launcher moves into main.cpp): so it is not split."""
    assert split(cpp=["torch::Tensor relu_forward(torch::Tensor x);"]) is None
    assert split(cpp=["torch::Tensor relu_cuda(torch::Tensor x);"]) is not None


@pytest.mark.skipif(not _compilers(), reason="needs nvcc")
def test_a_repairs_device_source_on_other_lines_links_its_originals_object(tmp_path, monkeypatch):
    from torch.utils import cpp_extension

    from forge_lsp.engine.harness import loading

    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(cuda_include().parent))
    original = split().device
    repaired = split_cuda_source(
        list(CPP), "#include <c10/cuda/CUDAStream.h>\n" + RELU, include_dir(), "/src/other.cu", [], ["relu_cuda"]
    ).device
    assert original != repaired  # other #line numbers and file
    first = loading.device_object(original, "relu", {"extra_cuda_cflags": ["-lineinfo"]})
    made = Path(first).stat().st_mtime_ns
    assert loading.device_object(repaired, "relu", {"extra_cuda_cflags": ["-lineinfo"]}) == first
    assert Path(first).stat().st_mtime_ns == made  # not compiled again
    other = loading.device_object(original, "relu", {"extra_cuda_cflags": ["-lineinfo", "-O3"]})
    assert other != first  # other flags: another object
    with pytest.raises(loading.CompileError, match="identifier"):
        loading.device_object(original.replace("fmaxf(x[idx]", "fmaxf(y[idx]"), "relu", {})


def test_kernel_templates_launched_with_their_arguments_are_split_with_each_specialization_instantiated():
    """`k<256><<<...>>>` and `k<scalar_t, 2><<<...>>>` inside AT_DISPATCH_FLOATING_TYPES: main.cpp declares the
    templates and launches the specializations; the device source instantiates every one main.cpp can launch (the
    dispatch's float and double) with stubs main.cpp can link."""
    s = split(TEMPLATED)
    assert s is not None and s.kernels == ["relu_kernel", "scale_kernel"]
    host = "".join(s.host)
    assert (
        "template <typename scalar_t, int VEC> void relu_kernel(const scalar_t* __restrict__ x, scalar_t* out, int size);"
        in host
    )
    assert f"{LAUNCH}(relu_kernel<scalar_t, 2>, " in host and f"{LAUNCH}(scale_kernel<256>, " in host
    for inst in ("&relu_kernel<double, 2>", "&relu_kernel<float, 2>", "&scale_kernel<256>"):
        assert inst in s.device, inst
    assert s.device_flags == ["-static-global-template-stub=false"]
    assert split().device_flags == []  # plain kernels: the flags they were verified with


def test_a_static_launcher_the_bindings_name_is_not_split_since_as_written_it_would_not_link():
    assert (
        split(
            RELU.replace(
                "torch::Tensor relu_cuda(torch::Tensor x) {", "static torch::Tensor relu_cuda(torch::Tensor x) {"
            )
        )
        is None
    )


def test_a_static_kernel_is_made_global_for_mains_launches_and_extern_c_kept():
    s = split(RELU.replace("__global__ void relu_kernel", "static __global__ void relu_kernel"))
    assert "static" not in s.device.split("__global__")[0].splitlines()[-1]
    s = split(RELU.replace("__global__ void relu_kernel", 'extern "C" __global__ void relu_kernel'))
    assert 'extern "C" void relu_kernel(' in "".join(s.host)


def test_host_device_helpers_and_constants_go_to_both_sides():
    src = RELU.replace(
        "#define BLOCK 256",
        "#define BLOCK 256\nconstexpr int kVec = 4;\n__host__ __device__ inline int cdiv(int a, int b) { return (a + b - 1) / b; }\n"
        "struct Params { int n; float slope; };",
    )
    s = split(src)
    host = "".join(s.host)
    for piece in ("constexpr int kVec = 4;", "inline int cdiv", "struct Params"):
        assert piece in s.device and piece in host, piece


# ------------------------------------------------------------------------------------------ the header tiers' stop
from forge_lsp.engine.harness.loading import _headers_may_fix  # noqa: E402

WORDS = frozenset({"torch", "at", "cuda", "getCurrentCUDAStream", "empty", "Tensor", "ScalarType", "c10", "half"})


@pytest.mark.parametrize(
    "log,may",
    [
        ('/b/cuda.cu(31): error: identifier "scale_min_kernal" is undefined', False),
        (
            "/b/main.cpp:9:49: error: \u2018swish_cuda\u2019 was not declared in this scope; did you mean \u2018swish_forward\u2019?",
            False,
        ),
        (
            '/b/cuda.cu(40): error: argument of type "double *" is incompatible with parameter of type "const float *"',
            False,
        ),
        (
            '/b/cuda.cu(22): error: no suitable conversion function from "const at::DeprecatedTypeProperties" to "c10::ScalarType" exists',
            False,
        ),
        ('/b/cuda.cu(12): error: namespace "at::cuda" has no member "getCurrentCUDAStream"', True),
        ('/b/cuda.cu(12): error: no instance of overloaded function "torch::empty" matches the argument list', True),
        ('/t/include/ATen/core/TensorBody.h(88): error: expected a ";"', True),
        ("ninja: build stopped: subcommand failed.", True),
        ('/b/cuda.cu(5): error: identifier "half" is undefined', True),
        # torch::nn under <torch/types.h> (as run on the H100): the message names no word, the qualifier a header has
        ('/b/cuda.cu(25): error: name followed by "::" must be a class or namespace name', True),
    ],
)
def test_heavier_headers_are_tried_only_where_they_could_help(log, may):
    assert _headers_may_fix(log, WORDS) is may


def test_the_library_words_are_torchs_and_cudas_names(tmp_path, monkeypatch):
    from forge_lsp.engine.harness import loading

    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(loading, "_LIBRARY_WORDS", {})
    words = loading.library_words()
    assert {"getCurrentCUDAStream", "empty_like", "TORCH_CHECK", "ScalarType"} <= words
    assert "scale_min_kernal" not in words and "swish_cuda" not in words
    assert list(tmp_path.glob("library-words-*.txt"))  # kept for the machine's next builds


def test_a_candidates_own_compile_error_stops_the_header_tiers(tmp_path, monkeypatch):
    """The tiers in order, through `cached_load_inline`, with torch's builder standing in: a typo in the candidate's
    kernel fails the split and the slim tier and no more; a missing torch declaration goes on to every tier."""
    from torch.utils import cpp_extension

    from forge_lsp.engine.harness import loading

    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setattr(loading, "_LIBRARY_WORDS", {"words": WORDS})
    # the builders stand in: torch's precompiled header is neither built nor waited for (the machine's lock is held by
    # the real builds of tests beside this one; each tier waited for it, minutes in all)
    monkeypatch.setenv("FORGE_LOAD_INLINE_PCH", "0")
    monkeypatch.setattr(loading, "pch_lock_path", lambda: tmp_path / "pch.lock")
    seen: list[str] = []

    def builder(message):
        def load_inline(name, cpp_sources, cuda_sources=None, *, no_implicit_headers=False, **kw):
            main = "\n".join(cpp_sources) if isinstance(cpp_sources, list) else cpp_sources
            seen.append("split" if cuda_sources is None and "forge_split_prelude.h" in main else "cuda")
            raise RuntimeError(f"Error building extension '{name}': {message}")

        return load_inline

    def device_object(device_src, name, kwargs, extra_flags=None):
        seen.append("nvcc")
        return str(tmp_path / "device.o")

    monkeypatch.setattr(loading, "device_object", device_object)
    for message, tiers in (
        ('/b/cuda.cu(9): error: identifier "relu_kernal" is undefined', 2),
        (  # x.type() for a scalar type: the split's error is the source's own
            "FAILED: main.o\n/c/relu_0123.cu:9:5: error: cannot convert \u2018const at::DeprecatedTypeProperties\u2019 to "
            "\u2018c10::ScalarType\u2019",
            1,
        ),
        ('/b/cuda.cu(9): error: namespace "at::cuda" has no member "getCurrentCUDAStream"', 4),
    ):
        seen.clear()
        loading.BUILD_ATTEMPTS.clear()
        monkeypatch.setattr(cpp_extension, "load_inline", builder(message))
        with loading.cached_load_inline(), pytest.raises(loading.CompileError):
            cpp_extension.load_inline("relu", CPP, RELU, functions=["relu_cuda"])
        labels = [a[0] for a in loading.BUILD_ATTEMPTS]
        assert len(labels) == tiers, (message, labels)
        assert labels[0] == loading.SPLIT_TIER and seen[:2] == ["nvcc", "split"]


# ------------------------------------------------------------------------------------------ real compilers
def compile_both(tmp_path: Path, s) -> tuple[str, str]:
    """nvcc on the split's device source and g++ on its main.cpp (with the bindings load_inline writes), with the
    real compilers: (what device.o defines, what main.o needs), as `nm -C` lists them."""
    from torch.utils import cpp_extension

    (tmp_path / "device.cu").write_text(s.device)
    nvcc = subprocess.run(
        ["nvcc", "-c", "device.cu", "-o", "device.o", "-gencode=arch=compute_90,code=sm_90", "-Xcompiler", "-fPIC"]
        + ["-O3", "-lineinfo", *cpp_extension.COMMON_NVCC_FLAGS, *s.device_flags],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert nvcc.returncode == 0, nvcc.stderr
    stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n")  # generated only by CUDA builds of torch
    bindings = '\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\nm.def("relu_cuda", torch::wrap_pybind_function(relu_cuda), "relu_cuda");\n}\n'
    (tmp_path / "main.cpp").write_text("\n".join(s.host) + bindings)
    inc = [f"-I{tmp_path / 'stub'}", *(f"-isystem{d}" for d in cpp_extension.include_paths())]
    inc += [f"-isystem{sysconfig.get_paths()['include']}", f"-isystem{cuda_include()}"]
    gxx = subprocess.run(
        ["g++", "-c", "main.cpp", "-o", "main.o", "-fPIC", "-std=c++20", "-DTORCH_EXTENSION_NAME=relu", *inc]
        + s.host_flags,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert gxx.returncode == 0, gxx.stderr[-3000:]
    defined = subprocess.run(["nm", "-C", "--defined-only", "device.o"], cwd=tmp_path, capture_output=True, text=True)
    wanted = subprocess.run(["nm", "-C", "-u", "main.o"], cwd=tmp_path, capture_output=True, text=True)
    assert "torch" not in defined.stdout  # no torch in the device object
    return defined.stdout, wanted.stdout


@pytest.mark.slow
@pytest.mark.skipif(not _compilers(), reason="needs nvcc and g++")
def test_both_sides_compile_and_main_declares_the_symbols_the_device_object_defines(tmp_path):
    """nvcc compiles the device source without any torch header; g++ compiles main.cpp with the bindings load_inline
    writes; each kernel main.cpp launches is defined in the device object under the same symbol."""
    src = (
        RELU.replace("#define BLOCK 256", "#define BLOCK 256\nstruct Params { int n; };")
        .replace(
            "}\n\ntorch::Tensor",
            "}\n__global__ void fill_kernel(Params p, float* out) { if (threadIdx.x < p.n) out[threadIdx.x] = 1.f; }\n\ntorch::Tensor",
        )
        .replace(
            "return out;", "Params p{4};\n    fill_kernel<<<1, 32, 0, 0>>>(p, out.data_ptr<float>());\n    return out;"
        )
    )
    s = split(src, flags=["-O3", "-lineinfo"])
    assert s is not None and s.kernels == ["fill_kernel", "relu_kernel"]
    defined, wanted = compile_both(tmp_path, s)
    for sig in ("relu_kernel(float const*, float*, int)", "fill_kernel(Params, float*)"):
        assert sig in wanted and f" T {sig}" in defined, sig


@pytest.mark.slow
@pytest.mark.skipif(not _compilers(), reason="needs nvcc and g++")
def test_the_specializations_main_launches_are_the_ones_the_device_object_defines(tmp_path):
    defined, wanted = compile_both(tmp_path, split(TEMPLATED))
    sigs = [
        "void relu_kernel<double, 2>(double const*, double*, int)",
        "void relu_kernel<float, 2>(float const*, float*, int)",
        "void scale_kernel<256>(float*, int)",
    ]
    for sig in sigs:
        assert sig in wanted and re.search(rf" [TW] {re.escape(sig)}$", defined, re.MULTILINE), sig


@pytest.mark.skipif(not _compilers(), reason="needs the CUDA toolkit")
def test_mains_flags_are_read_from_torchs_own_ninja_writer_before_any_build(monkeypatch):
    """The first split builds of a machine precompile the prelude beside themselves: the flags come from the
    build.ninja torch would write for them (its writer, nothing compiled)."""
    from torch.utils import cpp_extension

    from forge_lsp.engine.harness import loading

    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(cuda_include().parent))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    ninja = loading.ninja_for("relu_1", {"extra_cflags": ["-O3"], "extra_include_paths": ["/opt/inc"]})
    assert ninja is not None
    cflags = re.search(r"^cflags = (.*)$", ninja, re.MULTILINE).group(1)
    assert "-DTORCH_EXTENSION_NAME=relu_1" in cflags and "-O3" in cflags and "-I/opt/inc" in cflags
    assert str(cuda_include()) in cflags  # with_cuda: the toolkit's headers, as main.cpp gets them
    assert re.search(r"^cxx = ", ninja, re.MULTILINE)


@pytest.mark.slow
@pytest.mark.skipif(not _compilers(), reason="needs g++")
def test_the_split_prelude_is_precompiled_once_for_the_flags_main_cpp_was_built_with(tmp_path, monkeypatch):
    """After a split build, the prelude is precompiled for the flags torch's build.ninja gave main.cpp (less the
    extension's name), beside the header; g++ then uses it for another extension's main.cpp with the same flags,
    and not for other flags (it parses the header there)."""
    from torch.utils import cpp_extension

    from forge_lsp.engine.harness import loading

    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path / "cache"))
    stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n")  # generated only by CUDA builds of torch
    cuda_inc = cuda_include()
    inc = [f"-I{tmp_path / 'stub'}", *(f"-isystem {d}" for d in cpp_extension.include_paths())]
    inc += [f"-isystem {sysconfig.get_paths()['include']}", f"-isystem {cuda_inc}"]
    flags = f"-DTORCH_API_INCLUDE_EXTENSION_H {' '.join(inc)} -fPIC -std=c++20"
    build = tmp_path / "relu_build"
    build.mkdir()
    (build / "build.ninja").write_text(f"cxx = c++\ncflags = -DTORCH_EXTENSION_NAME=relu_1 {flags}\npost_cflags = \n")
    thread = loading.split_prelude_pch(build, [])
    assert thread is not None
    thread.join(timeout=300)
    header = loading.split_prelude_file()
    assert len(list(header.with_name(header.name + ".gch").glob("*.gch"))) == 1
    assert loading.split_prelude_pch(build, []) is None  # made once
    assert loading.split_prelude_pch(build, ["-DTILE=32"]) is None  # not for a candidate's own defines
    s = split_cuda_source(
        list(CPP), RELU, include_dir(), "/src/cand.cu", [], ["relu_cuda"], prelude_include=str(header)
    )
    (tmp_path / "main.cpp").write_text("".join(s.host))
    assert "".join(s.host).startswith(f'#include "{header}"')

    def compile_main(*extra: str) -> str:
        cmd = f"c++ -DTORCH_EXTENSION_NAME=other {flags} {' '.join(extra)} -Winvalid-pch -H -c main.cpp -o main.o"
        done = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stderr

    assert re.search(r"^! .*forge_split_prelude\.h\.gch/", compile_main(), re.MULTILINE)
    assert not re.search(r"^! ", compile_main("-O2"), re.MULTILINE)


@pytest.mark.gpu
def test_split_builds_keep_each_candidates_verdict_and_stream_domain(tmp_path):
    """On the GPU, through the engine: a legacy-launch ReLU and a current-stream Softplus build through the split tier
    (their device objects are in the cache), are correct, and keep the stream domain their launches give them: the
    legacy stream's candidate `default`, the current stream's `any`. The legacy one's repair (launches moved to the
    current stream) links the device object its original built: no second nvcc build."""
    from forge_lsp.engine import EvalOptions, load_candidate, load_task
    from forge_lsp.engine.executors import make_executor
    from forge_lsp.usecases.evaluate import evaluate_batch

    tasks = ROOT / "corpus" / "kernelbench" / "tasks"
    cands = ROOT / "corpus" / "model_style" / "candidates"
    work = [
        (load_task(tasks / "level1_19_ReLU.py"), load_candidate(cands / "level1_19_ReLU_legacy_raw.py")),
        (load_task(tasks / "level1_29_Softplus.py"), load_candidate(cands / "level1_29_Softplus_threshold_stream.py")),
    ]
    options = EvalOptions(timing_budget_s=0.1, min_reps=5, max_reps=10)
    with make_executor("local", "cuda:0", options=options, cache_dir=tmp_path) as ex:
        legacy, current = evaluate_batch(ex, work)
    assert legacy.verdict.correct and legacy.verdict.domain.streams == "default", legacy.verdict.reason
    assert current.verdict.correct and current.verdict.domain.streams == "any", current.verdict.reason
    assert legacy.repair is not None and legacy.repair.verdict.correct and legacy.repair.verdict.domain.full
    objects = sorted(p.name for p in (tmp_path / "device_objects").glob("*.o"))
    assert len(objects) == 2, objects  # one per original: the repair reused its original's
    # their bindings: objects of their own, which no main.cpp re-parses pybind11 for
    mains = [p.read_text() for p in (tmp_path / "torch_extensions").glob("*/main.cpp")]
    assert len(mains) == 3 and all("forge-bindings" in m and "pybind11" not in m for m in mains)
    binds = list((tmp_path / "split_bindings").glob("*.o"))
    assert 1 <= len(binds) <= 2, binds  # one per set of function types, the repair's its original's


# ---------------------------------------------------------------- bindings as an object of their own
from forge_lsp.engine.harness.cudasplit import binding_signatures, bindings_tag, bindings_tail  # noqa: E402

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)


@pytest.mark.parametrize(
    ("cpp", "functions", "want"),
    [
        (["torch::Tensor relu_cuda(torch::Tensor x);"], ["relu_cuda"], ["torch :: Tensor (torch :: Tensor)"]),
        (
            [
                "#include <torch/extension.h>\n// the launchers\ntorch::Tensor f(const torch::Tensor& a, float alpha = 0.1f,"
                " int64_t n=3);\nstd::vector<torch::Tensor> g(torch::Tensor, torch::Tensor b);"
            ],
            ["f", "g"],
            [
                "torch :: Tensor (const torch :: Tensor &, float, int64_t)",
                "std :: vector < torch :: Tensor > (torch :: Tensor, torch :: Tensor)",
            ],
        ),
        (
            ["at::Tensor fw(at::Tensor x, c10::optional<at::Tensor> b, unsigned int k);"],
            ["fw"],
            ["at :: Tensor (at :: Tensor, c10 :: optional < at :: Tensor >, unsigned int)"],
        ),
        (["torch::Tensor f(torch::Tensor x);\ntorch::Tensor f(torch::Tensor x, float y);"], ["f"], None),  # overloads
        (["using namespace torch;\nTensor f(Tensor x);"], ["f"], None),  # a name only this file gives meaning to
        (["typedef torch::Tensor T;\nT f(T x);"], ["f"], None),
        (["torch::Tensor f(torch::Tensor x) { return x; }"], ["f"], None),  # a definition, not a declaration
        (["torch::Tensor f(torch::Tensor x);"], ["g"], None),  # the bound function is not declared
        (["#define N 4\ntorch::Tensor f(torch::Tensor x);"], ["f"], None),
        (["torch::Tensor f(torch::Tensor x, void (*cb)(int));"], ["f"], None),
    ],
)
def test_the_bound_functions_types_are_read_from_plain_declarations_only(cpp, functions, want):
    assert binding_signatures(cpp, functions) == want


HOST_FUNCS = """
torch::Tensor twice(torch::Tensor x) {
  TORCH_CHECK(x.dim() > 0, "twice needs a tensor with a dimension");
  return x.mul(2);
}
std::vector<torch::Tensor> halves(const torch::Tensor& x, double k) { return {x.div(k), x.div(2 * k)}; }
"""
HOST_DECLS = (
    "torch::Tensor twice(torch::Tensor x);\nstd::vector<torch::Tensor> halves(const torch::Tensor& x, double k);"
)


@pytest.mark.slow
@pytest.mark.skipif(not _compilers(), reason="needs the CUDA toolkit's headers and g++")
def test_bindings_built_once_bind_each_modules_own_functions_as_load_inline_does(tmp_path, monkeypatch):
    """The bindings' object is compiled once for these function types and linked by two modules whose main.cpp
    never includes pybind11: each module's functions are its own (the table is per module), named by the module's
    own name, with load_inline's docstrings and torch's error translation."""
    import torch
    from torch.utils import cpp_extension

    from forge_lsp.engine.harness import loading

    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(cuda_include().parent))
    stub = tmp_path / "stub"
    (stub / "c10" / "cuda" / "impl").mkdir(parents=True)
    (stub / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text("#pragma once\n")  # CUDA builds of torch
    ninja = loading.ninja_for("forge_bind_check", {"extra_include_paths": [str(stub)]})
    assert ninja is not None
    functions = {"twice": "twice", "halves": "halves"}
    sigs = binding_signatures([HOST_DECLS], list(functions))
    assert sigs is not None
    bind = loading.bindings_object(sigs, True, ninja)
    assert loading.bindings_object(list(reversed(sigs)), True, ninja) == bind  # one object for these types
    tag = bindings_tag(sigs, True)
    lite = loading.split_prelude_file(lite=True)
    assert "pybind" not in lite.read_text()
    modules = []
    for i, scale in enumerate(("2", "3")):
        (tmp_path / f"m{i}").mkdir()
        main = "\n".join(
            [
                f'#include "{lite}"',
                HOST_FUNCS.replace("x.mul(2)", f"x.mul({scale})"),
                HOST_DECLS,
                bindings_tail(functions, sigs, tag),
            ]
        )
        modules.append(
            cpp_extension.load_inline(
                f"forge_bind_check_{i}",
                [main],
                no_implicit_headers=True,
                extra_ldflags=[bind],
                extra_include_paths=[str(stub), str(cuda_include())],
                build_directory=str(tmp_path / f"m{i}"),
            )
        )
    x = torch.arange(4.0)
    assert torch.equal(modules[0].twice(x), x * 2) and torch.equal(modules[1].twice(x), x * 3)
    assert [m.__name__ for m in modules] == ["forge_bind_check_0", "forge_bind_check_1"]
    assert modules[0].twice.__doc__.startswith("twice(arg0: torch.Tensor) -> torch.Tensor\n\ntwice")
    a, b = modules[1].halves(x, 2.0)
    assert torch.equal(a, x / 2) and torch.equal(b, x / 4)
    with pytest.raises(RuntimeError, match="twice needs a tensor with a dimension"):
        modules[0].twice(torch.tensor(1.0))
    with pytest.raises(TypeError, match="incompatible function arguments"):
        modules[0].twice("no tensor")
    # only the module's own init is exported: no module's init can reach another module's copy of the bindings
    exported = subprocess.run(["nm", "-D", "--defined-only", modules[0].__file__], capture_output=True, text=True)
    assert "PyInit_forge_bind_check_0" in exported.stdout and f"forge_bind_{tag}" not in exported.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
