import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

relu_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(float* __restrict__ x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = fmaxf(x[i], 0.0f);
}

// ReLU applied in place to the (fresh) output of a Linear layer
torch::Tensor relu_inplace(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "expected a contiguous activation");
    const int64_t n = x.numel();
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 1024);
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), n);
    return x;
}
"""

relu_cpp = "torch::Tensor relu_inplace(torch::Tensor x);"

relu_ext = load_inline(
    name="mlp_relu_inplace_stream",
    cpp_sources=relu_cpp,
    cuda_sources=relu_source,
    functions=["relu_inplace"],
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
        for layer in self.network:
            if isinstance(layer, nn.Linear):
                x = F.linear(x, layer.weight, layer.bias)
            else:
                x = relu_ext.relu_inplace(x)
        return x
