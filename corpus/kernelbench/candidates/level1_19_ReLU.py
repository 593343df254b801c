"""KernelBench level1/19_ReLU: torch.relu as one grid-stride CUDA kernel.

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

__global__ void relu_forward_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const float v = x[i];
        y[i] = v < 0.f ? 0.f : v;  // NaN stays NaN, as in torch.relu
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    check_input(x, "relu_forward: x");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const long long n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    relu_forward_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    check_launch("relu_forward");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor relu_forward(torch::Tensor x);
"""

_ext = load_inline(
    name="kb_level1_19_relu",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_forward(x)
