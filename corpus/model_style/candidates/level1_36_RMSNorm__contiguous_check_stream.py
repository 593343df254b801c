import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

__global__ void rmsnorm_kernel(const float* __restrict__ x, float* __restrict__ y,
                               int64_t n_pixels, int C, int64_t HW, float eps) {
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < n_pixels;
         p += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = p / HW;
        const int64_t hw = p - b * HW;
        const float* src = x + b * C * HW + hw;
        float* dst = y + b * C * HW + hw;
        float acc = 0.f;
        for (int c = 0; c < C; ++c) {
            const float v = src[c * HW];
            acc += v * v;
        }
        const float scale = 1.0f / sqrtf(acc / C + eps);
        for (int c = 0; c < C; ++c) dst[c * HW] = src[c * HW] * scale;
    }
}

torch::Tensor rmsnorm_forward(torch::Tensor x, double eps) {
    CHECK_INPUT(x);
    auto y = torch::empty_like(x);
    const int C = x.size(1);
    const int64_t HW = x.numel() / (x.size(0) * C);
    const int64_t n_pixels = x.size(0) * HW;
    const int threads = 256;
    const int blocks = std::min<int64_t>((n_pixels + threads - 1) / threads, 4096);
    rmsnorm_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n_pixels, C, HW, (float)eps);
    return y;
}
"""

cpp_src = "torch::Tensor rmsnorm_forward(torch::Tensor x, double eps);"

rmsnorm_ext = load_inline(
    name="rmsnorm_checked_stream",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["rmsnorm_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_ext.rmsnorm_forward(x, self.eps)
