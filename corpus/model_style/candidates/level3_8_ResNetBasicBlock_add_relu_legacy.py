import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Custom ReLU after bn1 and a fused residual add + ReLU at the end of the block.
cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* input, float* output, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        output[idx] = input[idx] > 0.0f ? input[idx] : 0.0f;
    }
}

__global__ void add_relu_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float v = a[idx] + b[idx];
        out[idx] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor relu_cuda(torch::Tensor input) {
    auto output = torch::empty_like(input);
    int size = input.numel();
    const int block_size = 256;
    relu_kernel<<<(size + block_size - 1) / block_size, block_size>>>(input.data_ptr<float>(), output.data_ptr<float>(), size);
    return output;
}

torch::Tensor add_relu_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int size = a.numel();
    const int block_size = 256;
    add_relu_kernel<<<(size + block_size - 1) / block_size, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    return out;
}
"""

cpp_source = """
torch::Tensor relu_cuda(torch::Tensor input);
torch::Tensor add_relu_cuda(torch::Tensor a, torch::Tensor b);
"""

block_ops = load_inline(
    name="resnet_block_add_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_cuda", "add_relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    expansion = 1

    def __init__(self, in_channels, out_channels, stride=1):
        super(ModelNew, self).__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels * self.expansion, kernel_size=1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels * self.expansion),
        )
        self.stride = stride

    def forward(self, x):
        out = self.conv1(x)
        out = self.bn1(out)
        out = block_ops.relu_cuda(out)

        out = self.conv2(out)
        out = self.bn2(out)

        identity = self.downsample(x)
        return block_ops.add_relu_cuda(out, identity)
