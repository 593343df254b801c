import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

__global__ void scale_residual_kernel(const float* __restrict__ y, float* __restrict__ out, float scale, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
        const float v = y[i];
        out[i] = v * scale + v;
    }
}

torch::Tensor scale_residual(torch::Tensor y, double scale) {
    TORCH_CHECK(y.is_cuda() && y.scalar_type() == at::kFloat, "expected a float32 CUDA tensor");
    auto yc = y.contiguous();
    auto out = torch::empty_like(yc);
    const int64_t n = yc.numel();
    if (n == 0) return out;
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 4096);
    scale_residual_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        yc.data_ptr<float>(), out.data_ptr<float>(), (float)scale, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor scale_residual(torch::Tensor y, double scale);"

scale_residual_ext = load_inline(
    name="matmul_scale_residual_stream",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scale_residual"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return scale_residual_ext.scale_residual(self.matmul(x), self.scaling_factor)
