"""KernelBench level2/25_Conv2d_Min_Tanh_Tanh: cuDNN convolution (at::conv2d), then the channel minimum and both
tanh fused in one CUDA kernel (the conv's output is read once, a 1-channel map written).

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

// y: (batch, channels, hw) contiguous; out[b, 0, p] = tail(min over c), NaN propagating as torch.min does.
__global__ void conv_min_tanh_tanh_forward_kernel(const float* __restrict__ y, float* __restrict__ out, long long n, long long hw,
                            int channels) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const long long b = i / hw, p = i - b * hw;
        const float* yb = y + b * channels * hw + p;
        float m = yb[0];
        for (int c = 1; c < channels; ++c) {
            const float v = yb[(long long)c * hw];
            if (v < m || v != v) m = v;
        }
        out[i] = tanhf(tanhf(m));
    }
}

torch::Tensor conv_min_tanh_tanh_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    check_input(x, "conv_min_tanh_tanh_forward: x");
    check_input(weight, "conv_min_tanh_tanh_forward: weight");
    check_input(bias, "conv_min_tanh_tanh_forward: bias");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::conv2d(x, weight, bias).contiguous();
    const int64_t batch = y.size(0), channels = y.size(1), height = y.size(2), width = y.size(3);
    auto out = at::empty({batch, (int64_t)1, height, width}, y.options());
    const long long hw = height * width;
    const long long n = batch * hw;
    if (n == 0 || channels == 0) return out;
    const int threads = 256;
    conv_min_tanh_tanh_forward_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), out.data_ptr<float>(), n, hw, (int)channels);
    check_launch("conv_min_tanh_tanh_forward");
    return out;
}
"""

CPP_SRC = r"""
torch::Tensor conv_min_tanh_tanh_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
"""

_ext = load_inline(
    name="kb_level2_25_conv2d_min_tanh_tanh",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["conv_min_tanh_tanh_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_min_tanh_tanh_forward(x, self.conv.weight, self.conv.bias)
