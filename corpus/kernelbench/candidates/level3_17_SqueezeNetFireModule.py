"""KernelBench level3/17_SqueezeNetFireModule: the fire module in one C++ call: cuDNN convolutions, a ReLU kernel in
place on the squeeze output, and both expand ReLUs fused with the channel concatenation in one CUDA kernel.

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

__global__ void relu_inplace_kernel(float* __restrict__ y, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const float v = y[i];
        y[i] = v < 0.f ? 0.f : v;
    }
}

// out (B, C1 + C3, hw) = relu(cat(e1 (B, C1, hw), e3 (B, C3, hw), dim 1)); all contiguous.
__global__ void relu_concat_kernel(const float* __restrict__ e1, const float* __restrict__ e3, float* __restrict__ out,
                                   long long n, long long hw, int c1, int c3) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const long long p = i % hw;
        const long long t = i / hw;
        const int c = (int)(t % (c1 + c3));
        const long long b = t / (c1 + c3);
        const float v = c < c1 ? e1[(b * c1 + c) * hw + p] : e3[(b * c3 + (c - c1)) * hw + p];
        out[i] = v < 0.f ? 0.f : v;
    }
}

// ReLU in place on a tensor this extension allocated (contiguous).
static void relu_inplace(torch::Tensor& h) {
    const long long n = h.numel();
    if (n == 0) return;
    relu_inplace_kernel<<<blocks_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(h.data_ptr<float>(), n);
    check_launch("relu_inplace");
}

torch::Tensor fire_forward(torch::Tensor x, torch::Tensor squeeze_w, torch::Tensor squeeze_b, torch::Tensor e1_w,
                           torch::Tensor e1_b, torch::Tensor e3_w, torch::Tensor e3_b) {
    check_input(x, "fire_forward: x");
    const c10::cuda::CUDAGuard guard(x.device());
    const std::vector<int64_t> ones{1, 1};
    auto s = at::conv2d(x, squeeze_w, squeeze_b).contiguous();
    relu_inplace(s);
    auto e1 = at::conv2d(s, e1_w, e1_b).contiguous();
    auto e3 = at::conv2d(s, e3_w, e3_b, ones, ones).contiguous();
    TORCH_CHECK(e1.size(0) == e3.size(0) && e1.size(2) == e3.size(2) && e1.size(3) == e3.size(3),
                "fire_forward: expand outputs differ in shape");
    const int64_t B = e1.size(0), C1 = e1.size(1), C3 = e3.size(1), H = e1.size(2), W = e1.size(3);
    auto out = at::empty({B, C1 + C3, H, W}, e1.options());
    const long long n = out.numel();
    if (n == 0) return out;
    relu_concat_kernel<<<blocks_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        e1.data_ptr<float>(), e3.data_ptr<float>(), out.data_ptr<float>(), n, (long long)(H * W), (int)C1, (int)C3);
    check_launch("fire_forward");
    return out;
}
"""

CPP_SRC = r"""
torch::Tensor fire_forward(torch::Tensor x, torch::Tensor squeeze_w, torch::Tensor squeeze_b, torch::Tensor e1_w,
                           torch::Tensor e1_b, torch::Tensor e3_w, torch::Tensor e3_b);
"""

_ext = load_inline(
    name="kb_level3_17_squeezenetfiremodule",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["fire_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, squeeze_channels, expand1x1_channels, expand3x3_channels):
        super().__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze_channels, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_channels, expand1x1_channels, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_channels, expand3x3_channels, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.fire_forward(
            x,
            self.squeeze.weight,
            self.squeeze.bias,
            self.expand1x1.weight,
            self.expand1x1.bias,
            self.expand3x3.weight,
            self.expand3x3.bias,
        )
