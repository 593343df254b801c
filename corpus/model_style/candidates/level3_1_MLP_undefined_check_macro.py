import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

linear_relu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void bias_relu_kernel(float* out, const float* bias, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        float v = out[idx] + bias[idx % cols];
        out[idx] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor linear_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    CHECK_INPUT(x);
    CHECK_INPUT(weight);
    CHECK_INPUT(bias);
    auto out = torch::matmul(x, weight.t()).contiguous();
    int rows = out.size(0);
    int cols = out.size(1);
    const int threads = 256;
    const int blocks = (rows * cols + threads - 1) / threads;
    bias_relu_kernel<<<blocks, threads>>>(out.data_ptr<float>(), bias.data_ptr<float>(), rows, cols);
    return out;
}
"""

linear_relu_cpp_source = "torch::Tensor linear_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_relu = load_inline(
    name="mlp_linear_relu",
    cpp_sources=linear_relu_cpp_source,
    cuda_sources=linear_relu_source,
    functions=["linear_relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        layers = list(self.network)
        for layer in layers[:-1]:
            if isinstance(layer, nn.Linear):
                x = linear_relu.linear_relu_cuda(x, layer.weight, layer.bias)
        return layers[-1](x)
