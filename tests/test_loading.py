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


KERNELBENCH_STYLE_CU = r'''
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
'''


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
def test_slim_prelude_compiles_with_nvcc(tmp_path):
    """Compile-only: the slim .cu must build where the torch headers are (no GPU needed)."""
    import shutil
    import subprocess
    import sysconfig

    from torch.utils import cpp_extension

    from forge_lsp.engine.harness.loading import slim_cuda_sources, torch_include_dir

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    if not (torch_include_dir() / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").exists():
        (stub / "cuda_cmake_macros.h").write_text("#define C10_CUDA_BUILD_SHARED_LIBS\n")  # CPU torch lacks it
    cu = tmp_path / "k.cu"
    cu.write_text(slim_cuda_sources(KERNELBENCH_STYLE_CU, torch_include_dir()))
    includes = [f"-I{p}" for p in cpp_extension.include_paths()] + [f"-I{tmp_path / 'stub'}",
                                                                    f"-I{sysconfig.get_paths()['include']}"]
    r = subprocess.run([nvcc, "-c", "-std=c++17", "-arch=sm_90", *includes, str(cu), "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
