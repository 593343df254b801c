"""KernelBench level3/8_ResNetBasicBlock: the block in one C++ call: cuDNN convolutions and batch norms (at::conv2d,
at::batch_norm, as nn.Conv2d / nn.BatchNorm2d run them, running statistics included), a ReLU kernel in place after
bn1, and the residual add + ReLU fused in one CUDA kernel.

load_inline CUDA candidate for the forge-lsp KernelBench batch (benchmarks/batch_memory.py): float32,
kernels launched on at::cuda::getCurrentCUDAStream(); the module keeps the reference's parameters.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

// Blocks for a grid-stride loop over n elements (capped: the loop covers the rest).
static unsigned int blocks_for(long long n, int threads) {
    long long b = (n + threads - 1) / threads;
    if (b > 65535LL * 16) b = 65535LL * 16;
    return (unsigned int)(b < 1 ? 1 : b);
}

static void check_launch(const char* what) {
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, what, ": kernel launch failed: ", cudaGetErrorString(err));
}

static void check_input(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda(), what, " must be a CUDA tensor");
    TORCH_CHECK(t.scalar_type() == at::kFloat, what, " must be float32");
}

__global__ void relu_inplace_kernel(float* __restrict__ y, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const float v = y[i];
        y[i] = v < 0.f ? 0.f : v;
    }
}

// a = relu(a + b), in place on a (this extension's own temporary); both contiguous, same shape.
__global__ void add_relu_kernel(float* __restrict__ a, const float* __restrict__ b, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const float t = a[i] + b[i];
        a[i] = t < 0.f ? 0.f : t;
    }
}

// ReLU in place on a tensor this extension allocated (contiguous).
static void relu_inplace(torch::Tensor& h) {
    const long long n = h.numel();
    if (n == 0) return;
    relu_inplace_kernel<<<blocks_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(h.data_ptr<float>(), n);
    check_launch("relu_inplace");
}

static torch::Tensor bn(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, const torch::Tensor& rm,
                        const torch::Tensor& rv, bool training, double momentum, double eps, bool cudnn_enabled) {
    return at::batch_norm(x, w, b, rm, rv, training, momentum, eps, cudnn_enabled);
}

torch::Tensor basic_block_forward(torch::Tensor x, torch::Tensor conv1_w, torch::Tensor bn1_w, torch::Tensor bn1_b,
                                  torch::Tensor bn1_rm, torch::Tensor bn1_rv, torch::Tensor conv2_w, torch::Tensor bn2_w,
                                  torch::Tensor bn2_b, torch::Tensor bn2_rm, torch::Tensor bn2_rv, torch::Tensor ds_w,
                                  torch::Tensor ds_bn_w, torch::Tensor ds_bn_b, torch::Tensor ds_bn_rm,
                                  torch::Tensor ds_bn_rv, int64_t stride, bool training, double momentum1,
                                  double momentum2, double momentum_ds, double eps1, double eps2, double eps_ds,
                                  bool cudnn_enabled) {
    check_input(x, "basic_block_forward: x");
    const c10::cuda::CUDAGuard guard(x.device());
    const std::vector<int64_t> strides{stride, stride}, ones{1, 1}, zeros{0, 0};
    auto out = at::conv2d(x, conv1_w, std::nullopt, strides, ones);
    out = bn(out, bn1_w, bn1_b, bn1_rm, bn1_rv, training, momentum1, eps1, cudnn_enabled).contiguous();
    relu_inplace(out);
    out = at::conv2d(out, conv2_w, std::nullopt, ones, ones);
    out = bn(out, bn2_w, bn2_b, bn2_rm, bn2_rv, training, momentum2, eps2, cudnn_enabled).contiguous();
    auto identity = at::conv2d(x, ds_w, std::nullopt, strides, zeros);
    identity = bn(identity, ds_bn_w, ds_bn_b, ds_bn_rm, ds_bn_rv, training, momentum_ds, eps_ds, cudnn_enabled)
                   .contiguous();
    TORCH_CHECK(out.sizes() == identity.sizes(), "basic_block_forward: residual shape mismatch");
    const long long n = out.numel();
    if (n == 0) return out;
    add_relu_kernel<<<blocks_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(out.data_ptr<float>(), identity.data_ptr<float>(), n);
    check_launch("basic_block_forward");
    return out;
}
"""

CPP_SRC = r"""
torch::Tensor basic_block_forward(torch::Tensor x, torch::Tensor conv1_w, torch::Tensor bn1_w, torch::Tensor bn1_b,
                                  torch::Tensor bn1_rm, torch::Tensor bn1_rv, torch::Tensor conv2_w, torch::Tensor bn2_w,
                                  torch::Tensor bn2_b, torch::Tensor bn2_rm, torch::Tensor bn2_rv, torch::Tensor ds_w,
                                  torch::Tensor ds_bn_w, torch::Tensor ds_bn_b, torch::Tensor ds_bn_rm,
                                  torch::Tensor ds_bn_rv, int64_t stride, bool training, double momentum1,
                                  double momentum2, double momentum_ds, double eps1, double eps2, double eps_ds,
                                  bool cudnn_enabled);
"""

_ext = load_inline(
    name="kb_level3_8_resnetbasicblock",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["basic_block_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def _bn_factor(bn: nn.BatchNorm2d) -> float:
    """The running-average factor nn.BatchNorm2d.forward would use, counting the batch as it does."""
    factor = 0.0 if bn.momentum is None else bn.momentum
    if bn.training and bn.track_running_stats and bn.num_batches_tracked is not None:
        bn.num_batches_tracked.add_(1)
        if bn.momentum is None:
            factor = 1.0 / float(bn.num_batches_tracked)
    return factor


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
        ds_conv, ds_bn = self.downsample[0], self.downsample[1]
        f1, f2, fd = _bn_factor(self.bn1), _bn_factor(self.bn2), _bn_factor(ds_bn)
        # as nn.BatchNorm2d: batch statistics in training mode (or without running statistics)
        training = self.training or self.bn1.running_mean is None
        return _ext.basic_block_forward(
            x,
            self.conv1.weight,
            self.bn1.weight,
            self.bn1.bias,
            self.bn1.running_mean,
            self.bn1.running_var,
            self.conv2.weight,
            self.bn2.weight,
            self.bn2.bias,
            self.bn2.running_mean,
            self.bn2.running_var,
            ds_conv.weight,
            ds_bn.weight,
            ds_bn.bias,
            ds_bn.running_mean,
            ds_bn.running_var,
            int(self.stride),
            bool(training),
            f1,
            f2,
            fd,
            float(self.bn1.eps),
            float(self.bn2.eps),
            float(ds_bn.eps),
            bool(torch.backends.cudnn.enabled),
        )
