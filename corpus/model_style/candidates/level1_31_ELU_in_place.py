import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

elu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

// In-place ELU: saves allocating an output tensor
__global__ void elu_inplace_kernel(float* x, float alpha, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        float v = x[idx];
        x[idx] = v > 0.0f ? v : alpha * (expf(v) - 1.0f);
    }
}

torch::Tensor elu_cuda(torch::Tensor x, float alpha) {
    int n = x.numel();
    const int block_size = 256;
    const int num_blocks = (n + block_size - 1) / block_size;
    elu_inplace_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), alpha, n);
    return x;
}
"""

elu_cpp_source = "torch::Tensor elu_cuda(torch::Tensor x, float alpha);"

elu = load_inline(
    name="elu_inplace",
    cpp_sources=elu_cpp_source,
    cuda_sources=elu_source,
    functions=["elu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha
        self.elu = elu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.elu.elu_cuda(x, self.alpha)
