import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

tail_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void add_relu_kernel(const float* a, const float* b, float* out, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        out[idx] = fmaxf(a[idx] + b[idx], 0.0f);
    }
}

// bn2(conv2 out) and the downsample BatchNorm (training mode, batch statistics) through ATen,
// then residual add + ReLU in one kernel
torch::Tensor bn_add_relu_cuda(torch::Tensor main, torch::Tensor w2, torch::Tensor b2, torch::Tensor rm2, torch::Tensor rv2,
                               torch::Tensor shortcut, torch::Tensor wd, torch::Tensor bd, torch::Tensor rmd, torch::Tensor rvd,
                               double momentum, double eps) {
    auto a = at::batch_norm(main, w2, b2, rm2, rv2, true, momentum, eps, true);
    auto b = at::batch_norm(shortcut, wd, bd, rmd, rvd, true, momentum, eps, true);
    auto out = torch::empty_like(a);
    int n = a.numel();
    const int block_size = 256;
    const int num_blocks = (n + block_size - 1) / block_size;
    add_relu_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

tail_cpp_source = """
torch::Tensor bn_add_relu_cuda(torch::Tensor main, torch::Tensor w2, torch::Tensor b2, torch::Tensor rm2, torch::Tensor rv2,
                               torch::Tensor shortcut, torch::Tensor wd, torch::Tensor bd, torch::Tensor rmd, torch::Tensor rvd,
                               double momentum, double eps);
"""

tail = load_inline(
    name="resnet_bn_add_relu_aten",
    cpp_sources=tail_cpp_source,
    cuda_sources=tail_source,
    functions=["bn_add_relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    expansion = 1

    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.conv2(out)
        shortcut = self.downsample[0](x)
        bn2, bnd = self.bn2, self.downsample[1]
        return tail.bn_add_relu_cuda(
            out,
            bn2.weight,
            bn2.bias,
            bn2.running_mean,
            bn2.running_var,
            shortcut,
            bnd.weight,
            bnd.bias,
            bnd.running_mean,
            bnd.running_var,
            bn2.momentum,
            bn2.eps,
        )
