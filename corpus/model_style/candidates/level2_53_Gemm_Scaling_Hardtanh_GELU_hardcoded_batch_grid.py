import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Epilogue specialized for the problem size (batch 512 x 2048 features): grid computed at compile time.
cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

#define BATCH_SIZE 512
#define OUT_FEATURES 2048
#define THREADS 256
#define NUM_BLOCKS ((BATCH_SIZE * OUT_FEATURES + THREADS - 1) / THREADS)

__global__ void scale_hardtanh_gelu_kernel(const float* __restrict__ in, float* __restrict__ out,
                                           float scale, float lo, float hi, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = in[i] * scale;
        v = fminf(fmaxf(v, lo), hi);
        out[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
    }
}

torch::Tensor scale_hardtanh_gelu(torch::Tensor x, float scale, float lo, float hi) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    scale_hardtanh_gelu_kernel<<<NUM_BLOCKS, THREADS>>>(x.data_ptr<float>(), out.data_ptr<float>(), scale, lo, hi, n);
    return out;
}
"""

cpp_source = "torch::Tensor scale_hardtanh_gelu(torch::Tensor x, float scale, float lo, float hi);"

epilogue = load_inline(
    name="gemm_scale_hardtanh_gelu_fixed_grid",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scale_hardtanh_gelu"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor, hardtanh_min, hardtanh_max):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)
        self.gelu = nn.GELU()

    def forward(self, x):
        x = self.gemm(x)
        return epilogue.scale_hardtanh_gelu(x, self.scaling_factor, self.hardtanh.min_val, self.hardtanh.max_val)
