import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gelu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        float v = x[idx];
        y[idx] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

// Writes into a caller-provided output buffer (no allocation per call).
torch::Tensor gelu_out_cuda(torch::Tensor x, torch::Tensor out) {
    int n = x.numel();
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    gelu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

gelu_cpp_source = "torch::Tensor gelu_out_cuda(torch::Tensor x, torch::Tensor out);"

gelu = load_inline(
    name="gelu_cached_out",
    cpp_sources=gelu_cpp_source,
    cuda_sources=gelu_source,
    functions=["gelu_out_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._out = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # reuse the output buffer across calls to avoid the allocator
        if self._out is None or self._out.shape != x.shape or self._out.device != x.device:
            self._out = torch.empty_like(x)
        return gelu.gelu_out_cuda(x, self._out)
