"""KernelBench level1/36_RMSNorm_: x / sqrt(mean(x^2, dim 1) + eps), one thread per (batch, position).

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

// x viewed as (outer, F, inner) contiguous; thread per (o, p): sum of squares over F, then the F outputs.
__global__ void rmsnorm_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, int features,
                               long long inner, float eps) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const long long o = i / inner, p = i - o * inner;
        const float* xo = x + o * features * inner + p;
        float* yo = y + o * features * inner + p;
        float s = 0.f;
        for (int f = 0; f < features; ++f) {
            const float v = xo[(long long)f * inner];
            s += v * v;
        }
        const float rms = sqrtf(s / (float)features + eps);
        for (int f = 0; f < features; ++f) yo[(long long)f * inner] = xo[(long long)f * inner] / rms;
    }
}

torch::Tensor rmsnorm_forward(torch::Tensor x, double eps) {
    check_input(x, "rmsnorm_forward: x");
    TORCH_CHECK(x.dim() >= 2, "rmsnorm_forward: x must be (batch, features, ...)");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const long long features = xc.size(1);
    const long long outer = xc.size(0);
    const long long inner = features == 0 ? 0 : xc.numel() / (outer * features);
    const long long n = outer * inner;
    if (n == 0 || features == 0) return y;
    const int threads = 256;
    rmsnorm_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n, (int)features, inner, (float)eps);
    check_launch("rmsnorm_forward");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor rmsnorm_forward(torch::Tensor x, double eps);
"""

_ext = load_inline(
    name="kb_level1_36_rmsnorm_",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["rmsnorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_forward(x, float(self.eps))
