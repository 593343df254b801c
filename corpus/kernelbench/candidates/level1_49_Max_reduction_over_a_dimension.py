"""KernelBench level1/49_Max_reduction_over_a_dimension: torch.max(x, dim)[0], thread per output.

load_inline CUDA candidate for the forge-lsp KernelBench batch (benchmarks/batch_memory.py): float32,
kernels launched on at::cuda::getCurrentCUDAStream(); the module keeps the reference's parameters.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

// Blocks for a grid-stride loop over n elements (capped: the loop covers the rest).
static unsigned int blocks_for(long long n, int threads) {
    long long b = (n + threads - 1) / threads;
    if (b > 65535LL * 16) b = 65535LL * 16;
    return (unsigned int)(b < 1 ? 1 : b);
}

static void check_launch(const char* what) {
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, what, ": kernel launch failed: ", cudaGetErrorString(err));
}

static void check_input(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda(), what, " must be a CUDA tensor");
    TORCH_CHECK(t.scalar_type() == at::kFloat, what, " must be float32");
}

// x viewed as (outer, r, inner); y[o, p] = max_k x[o, k, p], NaN propagating as in torch.max.
__global__ void max_dim_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, long long r,
                               long long inner) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const long long o = i / inner, p = i - o * inner;
        const float* xo = x + o * r * inner + p;
        float m = xo[0];
        for (long long k = 1; k < r; ++k) {
            const float v = xo[k * inner];
            if (v > m || v != v) m = v;
        }
        y[i] = m;
    }
}

torch::Tensor max_dim(torch::Tensor x, int64_t dim) {
    check_input(x, "max_dim: x");
    TORCH_CHECK(x.dim() >= 1, "max_dim: x must have a dimension");
    if (dim < 0) dim += x.dim();
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "max_dim: dim out of range");
    TORCH_CHECK(x.size(dim) > 0, "max_dim: cannot reduce an empty dimension");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    long long outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
    const long long r = xc.size(dim);
    std::vector<int64_t> shape = xc.sizes().vec();
    shape.erase(shape.begin() + dim);  // keepdim=False
    auto y = at::empty(shape, xc.options());
    const long long n = outer * inner;
    if (n == 0) return y;
    const int threads = 256;
    max_dim_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n, r, inner);
    check_launch("max_dim");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor max_dim(torch::Tensor x, int64_t dim);
"""

_ext = load_inline(
    name="kb_level1_49_max_reduction_over_a_dimension",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["max_dim"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.max_dim(x, self.dim)
