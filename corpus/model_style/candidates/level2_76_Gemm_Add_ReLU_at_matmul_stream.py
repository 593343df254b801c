import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ bias, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (row < rows && col < cols) {
        float v = y[(size_t)row * cols + col] + bias[col];
        y[(size_t)row * cols + col] = v > 0.f ? v : 0.f;
    }
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto y = at::matmul(x, weight.t()).contiguous();
    const int rows = y.size(0), cols = y.size(1);
    dim3 block(256);
    dim3 grid((cols + block.x - 1) / block.x, rows);
    bias_relu_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), bias.data_ptr<float>(), rows, cols);
    return y;
}
"""

cpp_source = "torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

gemm_bias_relu = load_inline(
    name="gemm_bias_relu_stream",
    cpp_sources=cpp_source,
    cuda_sources=source,
    functions=["gemm_bias_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_bias_relu.gemm_bias_relu(x, self.gemm.weight, self.bias)
