import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# BatchNorm folded into a per-channel scale/shift applied right after each convolution:
#   y = (x - running_mean) / sqrt(running_var + eps) * weight + bias
# with an optional ReLU, and the residual add + ReLU fused at the end.
cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void bn_act_kernel(const float* x, const float* mean, const float* var,
                              const float* gamma, const float* beta, float* y,
                              int total, int C, int HW, float eps, bool relu) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total) {
        int c = (idx / HW) % C;
        float v = (x[idx] - mean[c]) * rsqrtf(var[c] + eps) * gamma[c] + beta[c];
        if (relu) v = fmaxf(v, 0.0f);
        y[idx] = v;
    }
}

__global__ void add_relu_kernel(const float* a, const float* b, float* out, int total) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total) {
        out[idx] = fmaxf(a[idx] + b[idx], 0.0f);
    }
}

torch::Tensor bn_act(torch::Tensor x, torch::Tensor mean, torch::Tensor var,
                     torch::Tensor gamma, torch::Tensor beta, double eps, bool relu) {
    auto y = torch::empty_like(x);
    int total = x.numel();
    int C = x.size(1);
    int HW = x.size(2) * x.size(3);
    const int threads = 256;
    bn_act_kernel<<<(total + threads - 1) / threads, threads>>>(
        x.data_ptr<float>(), mean.data_ptr<float>(), var.data_ptr<float>(),
        gamma.data_ptr<float>(), beta.data_ptr<float>(), y.data_ptr<float>(),
        total, C, HW, (float)eps, relu);
    return y;
}

torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int total = a.numel();
    const int threads = 256;
    add_relu_kernel<<<(total + threads - 1) / threads, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), total);
    return out;
}
"""

cpp_source = """
torch::Tensor bn_act(torch::Tensor x, torch::Tensor mean, torch::Tensor var,
                     torch::Tensor gamma, torch::Tensor beta, double eps, bool relu);
torch::Tensor add_relu(torch::Tensor a, torch::Tensor b);
"""

resblock_ops = load_inline(
    name="resnet_block_bn_folded",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["bn_act", "add_relu"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


def _bn(x, bn, relu):
    return resblock_ops.bn_act(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, bn.eps, relu)


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
        out = _bn(self.conv1(x), self.bn1, True)
        out = _bn(self.conv2(out), self.bn2, False)
        identity = _bn(self.downsample[0](x), self.downsample[1], False)
        return resblock_ops.add_relu(out, identity)
