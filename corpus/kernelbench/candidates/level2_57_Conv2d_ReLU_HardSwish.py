"""KernelBench level2/57_Conv2d_ReLU_HardSwish: cuDNN convolution (at::conv2d), then ReLU and x * clamp((x + 3) / 6,
0, 1) fused in one CUDA kernel.

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
__global__ void conv_relu_hardswish_forward_tail_kernel(float* __restrict__ y, long long n, long long hw, int channels) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const float v = y[i];
        const float r = v < 0.f ? 0.f : v;
        float t = (r + 3.f) / 6.f;
        t = t < 0.f ? 0.f : (t > 1.f ? 1.f : t);
        y[i] = r * t;
    }
}

torch::Tensor conv_relu_hardswish_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    check_input(x, "conv_relu_hardswish_forward: x");
    check_input(weight, "conv_relu_hardswish_forward: weight");
    check_input(bias, "conv_relu_hardswish_forward: bias");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::conv2d(x, weight, bias).contiguous();
    const long long n = y.numel();
    if (n == 0) return y;
    const long long hw = y.size(2) * y.size(3);
    const int channels = (int)y.size(1);
    const int threads = 256;
    conv_relu_hardswish_forward_tail_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), n, hw, channels);
    check_launch("conv_relu_hardswish_forward");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor conv_relu_hardswish_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
"""

_ext = load_inline(
    name="kb_level2_57_conv2d_relu_hardswish",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["conv_relu_hardswish_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_relu_hardswish_forward(x, self.conv.weight, self.conv.bias)
