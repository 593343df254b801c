"""KernelBench level2/54_Conv2d_Multiply_LeakyReLU_GELU: cuDNN convolution (at::conv2d), then the per-channel
multiplier, LeakyReLU and exact GELU fused in one CUDA kernel.

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

// y: the conv's output, contiguous NCHW, rewritten in place (it is this function's own temporary).
__global__ void conv_mul_lrelu_gelu_forward_tail_kernel(float* __restrict__ y, const float* __restrict__ multiplier, long long n, long long hw, int channels, float slope) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const int c = (int)((i / hw) % channels);
        const float v = y[i];
        float t = v * multiplier[c];
        t = t > 0.f ? t : t * slope;
        y[i] = t * 0.5f * (1.f + erff(t * 0.70710678118654752440f));
    }
}

torch::Tensor conv_mul_lrelu_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor multiplier, double slope) {
    check_input(x, "conv_mul_lrelu_gelu_forward: x");
    check_input(weight, "conv_mul_lrelu_gelu_forward: weight");
    check_input(bias, "conv_mul_lrelu_gelu_forward: bias");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::conv2d(x, weight, bias).contiguous();
    check_input(multiplier, "conv_mul_lrelu_gelu_forward: multiplier");
    TORCH_CHECK(multiplier.numel() == y.size(1), "conv_mul_lrelu_gelu_forward: multiplier needs one value per channel");
    auto multiplierc = multiplier.contiguous();
    const long long n = y.numel();
    if (n == 0) return y;
    const long long hw = y.size(2) * y.size(3);
    const int channels = (int)y.size(1);
    const int threads = 256;
    conv_mul_lrelu_gelu_forward_tail_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), multiplierc.data_ptr<float>(), n, hw, channels, (float)slope);
    check_launch("conv_mul_lrelu_gelu_forward");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor conv_mul_lrelu_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor multiplier, double slope);
"""

_ext = load_inline(
    name="kb_level2_54_conv2d_multiply_leakyrelu_gelu",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["conv_mul_lrelu_gelu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, multiplier_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.leaky_relu = nn.LeakyReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_mul_lrelu_gelu_forward(
            x, self.conv.weight, self.conv.bias, self.multiplier, float(self.leaky_relu.negative_slope)
        )
