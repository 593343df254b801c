"""KernelBench level2/9_Matmul_Subtract_Multiply_ReLU: nn.Linear's GEMM (at::linear), then the subtraction,
multiplication and ReLU fused in one CUDA kernel.

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
__global__ void linear_sub_mul_relu_forward_tail_kernel(float* __restrict__ y, long long n, long long cols, float subtract_value, float multiply_value) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const float v = y[i];
        float t = v - subtract_value;
        t = t * multiply_value;
        y[i] = t < 0.f ? 0.f : t;
    }
}

torch::Tensor linear_sub_mul_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double subtract_value, double multiply_value) {
    check_input(x, "linear_sub_mul_relu_forward: x");
    check_input(weight, "linear_sub_mul_relu_forward: weight");
    check_input(bias, "linear_sub_mul_relu_forward: bias");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::linear(x, weight, bias).contiguous();
    const long long n = y.numel();
    if (n == 0) return y;
    const long long cols = y.size(-1);
    const int threads = 256;
    linear_sub_mul_relu_forward_tail_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), n, cols, (float)subtract_value, (float)multiply_value);
    check_launch("linear_sub_mul_relu_forward");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor linear_sub_mul_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double subtract_value, double multiply_value);
"""

_ext = load_inline(
    name="kb_level2_9_matmul_subtract_multiply_relu",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["linear_sub_mul_relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_sub_mul_relu_forward(
            x, self.linear.weight, self.linear.bias, float(self.subtract_value), float(self.multiply_value)
        )
