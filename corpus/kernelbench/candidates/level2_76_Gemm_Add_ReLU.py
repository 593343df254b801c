"""KernelBench level2/76_Gemm_Add_ReLU: nn.Linear's GEMM without bias (at::linear), then the bias add and ReLU
fused in one CUDA kernel.

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

// y: the linear layer's output, contiguous (rows, cols), rewritten in place (this function's own temporary).
__global__ void gemm_add_relu_forward_tail_kernel(float* __restrict__ y, const float* __restrict__ col_bias, long long n, long long cols) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const long long j = i % cols;
        const float v = y[i];
        const float t = v + col_bias[j];
        y[i] = t < 0.f ? 0.f : t;
    }
}

torch::Tensor gemm_add_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor col_bias) {
    check_input(x, "gemm_add_relu_forward: x");
    check_input(weight, "gemm_add_relu_forward: weight");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::linear(x, weight).contiguous();
    check_input(col_bias, "gemm_add_relu_forward: col_bias");
    TORCH_CHECK(col_bias.numel() == y.size(-1), "gemm_add_relu_forward: col_bias needs one value per output feature");
    auto cb = col_bias.contiguous();
    const long long n = y.numel();
    if (n == 0) return y;
    const long long cols = y.size(-1);
    const int threads = 256;
    gemm_add_relu_forward_tail_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), cb.data_ptr<float>(), n, cols);
    check_launch("gemm_add_relu_forward");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor gemm_add_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor col_bias);
"""

_ext = load_inline(
    name="kb_level2_76_gemm_add_relu",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["gemm_add_relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_add_relu_forward(x, self.gemm.weight, self.bias)
