import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void add_bias_relu_kernel(const float* y, const float* linear_bias, const float* bias,
                                     float* out, int total, int out_features) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total) {
        int col = idx % out_features;
        float v = y[idx] + linear_bias[col] + bias[col];
        out[idx] = fmaxf(v, 0.0f);
    }
}

torch::Tensor linear_bias_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor linear_bias, torch::Tensor bias) {
    auto y = torch::mm(x, weight.t());
    auto out = torch::empty_like(y);
    int total = y.numel();
    int out_features = y.size(1);
    const int block_size = 256;
    const int num_blocks = (total + block_size - 1) / block_size;
    add_bias_relu_kernel<<<num_blocks, block_size>>>(y.data_ptr<float>(), linear_bias.data_ptr<float>(),
                                                      bias.data_ptr<float>(), out.data_ptr<float>(), total, out_features);
    return out;
}
"""

fused_cpp_source = "torch::Tensor linear_bias_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor linear_bias, torch::Tensor bias);"

fused = load_inline(
    name="linear_bias_relu",
    cpp_sources=fused_cpp_source,
    cuda_sources=fused_source,
    functions=["linear_bias_relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.fused = fused

    def forward(self, x):
        return self.fused.linear_bias_relu_cuda(x, self.gemm.weight, self.gemm.bias, self.bias)
