import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

// Fused bias + ReLU epilogue for the convolution output.
__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, int C, int HW, int total) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) {
        int c = (i / HW) % C;
        float v = x[i] + bias[c];
        y[i] = fmaxf(v, 0.0f);
    }
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
    const int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    auto y = torch::empty_like(x);
    const int total = N * C * H * W;
    const int threads = 256;
    bias_relu_kernel<<<(total + threads - 1) / threads, threads>>>(
        x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), C, H * W, total);
    return y;
}
"""

cpp_source = "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);"

bias_relu_ext = load_inline(
    name="conv_bias_relu_epilogue",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["bias_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        return bias_relu_ext.bias_relu(x, self.bias)
