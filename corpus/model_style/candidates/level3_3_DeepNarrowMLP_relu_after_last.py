import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

linear_relu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void add_bias_relu_kernel(float* out, const float* bias, int total, int features) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total) {
        float v = out[idx] + bias[idx % features];
        out[idx] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor linear_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto out = torch::mm(x, weight.t());
    int total = out.numel();
    int features = out.size(1);
    const int block_size = 256;
    const int num_blocks = (total + block_size - 1) / block_size;
    add_bias_relu_kernel<<<num_blocks, block_size>>>(out.data_ptr<float>(), bias.data_ptr<float>(), total, features);
    return out;
}
"""

linear_relu_cpp_source = "torch::Tensor linear_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_relu = load_inline(
    name="deep_mlp_linear_relu",
    cpp_sources=linear_relu_cpp_source,
    cuda_sources=linear_relu_source,
    functions=["linear_relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super().__init__()
        layers = []
        current_input_size = input_size
        for hidden_size in hidden_layer_sizes:
            layers.append(nn.Linear(current_input_size, hidden_size))
            layers.append(nn.ReLU())
            current_input_size = hidden_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)
        self.linear_relu = linear_relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # every Linear fused with its bias and ReLU
        for layer in self.network:
            if isinstance(layer, nn.Linear):
                x = self.linear_relu.linear_relu_cuda(x, layer.weight, layer.bias)
        return x
