import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

template <typename scalar_t>
__global__ void add_bias_relu_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ b,
                                     scalar_t* __restrict__ y, int64_t n, int64_t features) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        scalar_t v = x[i] + b[i % features];
        y[i] = v > scalar_t(0) ? v : scalar_t(0);
    }
}

torch::Tensor add_bias_relu(torch::Tensor x, torch::Tensor bias) {
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int64_t features = x.size(-1);
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    AT_DISPATCH_FLOATING_TYPES(x.type(), "add_bias_relu", ([&] {
        add_bias_relu_kernel<scalar_t><<<blocks, threads>>>(
            x.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n, features);
    }));
    return y;
}
"""

cpp_source = "torch::Tensor add_bias_relu(torch::Tensor x, torch::Tensor bias);"

add_bias_relu_ext = load_inline(
    name="gemm_add_bias_relu_dispatch",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_bias_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.gemm(x)
        return add_bias_relu_ext.add_bias_relu(x, self.bias)
