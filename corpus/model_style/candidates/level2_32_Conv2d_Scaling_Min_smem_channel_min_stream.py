import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scale_min_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <cfloat>

#define PIX 32   // pixels per block (threadIdx.x, coalesced)
#define CSPLIT 8 // channel groups per block (threadIdx.y)

__global__ void scale_channel_min_kernel(const float* __restrict__ y, float* __restrict__ out,
                                         int C, int HW, float scale) {
    __shared__ float partial[CSPLIT][PIX];
    const int n = blockIdx.y;
    const int p = blockIdx.x * PIX + threadIdx.x;
    float m = FLT_MAX;
    if (p < HW) {
        const float* src = y + (size_t)n * C * HW + p;
        for (int c = threadIdx.y; c < C; c += CSPLIT) m = fminf(m, src[(size_t)c * HW] * scale);
    }
    partial[threadIdx.y][threadIdx.x] = m;
    __syncthreads();
    if (threadIdx.y == 0 && p < HW) {
        float r = partial[0][threadIdx.x];
        #pragma unroll
        for (int g = 1; g < CSPLIT; ++g) r = fminf(r, partial[g][threadIdx.x]);
        out[(size_t)n * HW + p] = r;
    }
}

torch::Tensor scale_channel_min(torch::Tensor y, double scale) {
    y = y.contiguous();
    const int N = y.size(0), C = y.size(1), H = y.size(2), W = y.size(3);
    auto out = torch::empty({N, 1, H, W}, y.options());
    dim3 block(PIX, CSPLIT);
    dim3 grid((H * W + PIX - 1) / PIX, N);
    scale_channel_min_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), out.data_ptr<float>(), C, H * W, static_cast<float>(scale));
    return out;
}
"""

scale_min_cpp = "torch::Tensor scale_channel_min(torch::Tensor y, double scale);"

scale_min = load_inline(
    name="conv_scale_channel_min_smem",
    cpp_sources=scale_min_cpp,
    cuda_sources=scale_min_source,
    functions=["scale_channel_min"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scale_min.scale_channel_min(self.conv(x), self.scale_factor)
