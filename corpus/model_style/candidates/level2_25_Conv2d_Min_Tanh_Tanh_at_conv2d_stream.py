import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cfloat>

// one thread per output pixel: min over channels, then tanh twice
__global__ void channel_min_tanh2_kernel(const float* __restrict__ y, float* __restrict__ out,
                                         int N, int C, int HW) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * HW) return;
    int n = idx / HW;
    int p = idx - n * HW;
    const float* src = y + (size_t)n * C * HW + p;
    float m = FLT_MAX;
    for (int c = 0; c < C; ++c) m = fminf(m, __ldg(src + (size_t)c * HW));
    out[idx] = tanhf(tanhf(m));
}

torch::Tensor conv_min_tanh2(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto y = at::conv2d(x, w, b).contiguous();
    const int N = y.size(0), C = y.size(1), H = y.size(2), W = y.size(3);
    auto out = torch::empty({N, 1, H, W}, y.options());
    const int total = N * H * W;
    const int threads = 256;
    channel_min_tanh2_kernel<<<(total + threads - 1) / threads, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), out.data_ptr<float>(), N, C, H * W);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor conv_min_tanh2(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

ext = load_inline(
    name="conv_min_tanh2_stream",
    cpp_sources=cpp_source,
    cuda_sources=source,
    functions=["conv_min_tanh2"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.conv_min_tanh2(x, self.conv.weight, self.conv.bias)
