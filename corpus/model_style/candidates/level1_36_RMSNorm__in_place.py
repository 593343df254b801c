import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Fused RMSNorm: one pass to compute the RMS over the feature dim, then normalize in place
# (saves allocating a second tensor of the same size).
cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void rmsnorm_inplace_kernel(float* x, int B, int C, int HW, float eps) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < B * HW) {
        int b = tid / HW;
        int hw = tid % HW;
        float* p = x + (size_t)b * C * HW + hw;

        float acc = 0.0f;
        for (int c = 0; c < C; c++) {
            float v = p[c * HW];
            acc += v * v;
        }
        float inv_rms = 1.0f / sqrtf(acc / (float)C + eps);

        for (int c = 0; c < C; c++) {
            p[c * HW] = p[c * HW] * inv_rms;
        }
    }
}

torch::Tensor rmsnorm_forward(torch::Tensor x, float eps) {
    const int B = x.size(0);
    const int C = x.size(1);
    const int HW = x.numel() / (B * C);

    const int threads = 256;
    const int blocks = (B * HW + threads - 1) / threads;
    rmsnorm_inplace_kernel<<<blocks, threads>>>(x.data_ptr<float>(), B, C, HW, eps);

    return x;
}
"""

cpp_source = "torch::Tensor rmsnorm_forward(torch::Tensor x, float eps);"

rmsnorm_ext = load_inline(
    name="rmsnorm_inplace",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rmsnorm_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_ext.rmsnorm_forward(x, self.eps)
