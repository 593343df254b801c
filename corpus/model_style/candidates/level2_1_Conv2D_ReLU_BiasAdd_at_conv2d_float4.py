import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

conv_relu_bias_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

// 4 outputs per thread; hw is a multiple of 4 so a float4 never crosses a channel
__global__ void relu_bias_vec4_kernel(const float4* __restrict__ in, const float* __restrict__ bias,
                                      float4* __restrict__ out, int n_vec, int channels, int hw) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_vec) {
        int c = ((i * 4) / hw) % channels;
        float b = bias[c];
        float4 v = in[i];
        v.x = fmaxf(v.x, 0.0f) + b;
        v.y = fmaxf(v.y, 0.0f) + b;
        v.z = fmaxf(v.z, 0.0f) + b;
        v.w = fmaxf(v.w, 0.0f) + b;
        out[i] = v;
    }
}

torch::Tensor conv_relu_bias_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor conv_bias, torch::Tensor bias) {
    auto y = at::conv2d(x, weight, conv_bias);
    auto out = torch::empty_like(y);
    int channels = y.size(1);
    int hw = y.size(2) * y.size(3);
    TORCH_CHECK(hw % 4 == 0, "spatial size must be a multiple of 4");
    int n_vec = y.numel() / 4;
    const int threads = 256;
    const int blocks = (n_vec + threads - 1) / threads;
    relu_bias_vec4_kernel<<<blocks, threads>>>(reinterpret_cast<const float4*>(y.data_ptr<float>()), bias.data_ptr<float>(),
                                               reinterpret_cast<float4*>(out.data_ptr<float>()), n_vec, channels, hw);
    return out;
}
"""

conv_relu_bias_cpp_source = "torch::Tensor conv_relu_bias_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor conv_bias, torch::Tensor bias);"

conv_relu_bias = load_inline(
    name="conv_relu_bias_vec4",
    cpp_sources=conv_relu_bias_cpp_source,
    cuda_sources=conv_relu_bias_source,
    functions=["conv_relu_bias_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return conv_relu_bias.conv_relu_bias_cuda(x, self.conv.weight, self.conv.bias, self.bias)
