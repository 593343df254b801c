"""KernelBench level3/4_LeNet5: LeNet-5 in one C++ call: cuDNN convolutions with ReLU + 2x2 max-pool fused in one
CUDA kernel, cuBLAS fully connected layers with a ReLU kernel in place.

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

// x: (planes, H, W) contiguous; y: (planes, H / 2, W / 2) = max over each 2x2 window of relu(x), NaN propagating.
__global__ void relu_maxpool2_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, int H, int W,
                                     int Ho, int Wo) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const int wo = (int)(i % Wo);
        const long long t = i / Wo;
        const int ho = (int)(t % Ho);
        const long long plane = t / Ho;
        const float* p = x + (plane * H + 2 * ho) * (long long)W + 2 * wo;
        float m = p[0];
        const float c1 = p[1], c2 = p[W], c3 = p[W + 1];
        if (c1 > m || c1 != c1) m = c1;
        if (c2 > m || c2 != c2) m = c2;
        if (c3 > m || c3 != c3) m = c3;
        y[i] = m < 0.f ? 0.f : m;  // relu(max) == max(relu)
    }
}

// ReLU in place on a tensor this extension allocated (contiguous).
static void relu_inplace(torch::Tensor& h) {
    const long long n = h.numel();
    if (n == 0) return;
    relu_inplace_kernel<<<blocks_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(h.data_ptr<float>(), n);
    check_launch("relu_inplace");
}

static torch::Tensor relu_maxpool2(const torch::Tensor& x) {
    const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int64_t Ho = H / 2, Wo = W / 2;
    auto y = at::empty({B, C, Ho, Wo}, x.options());
    const long long n = y.numel();
    if (n == 0) return y;
    relu_maxpool2_kernel<<<blocks_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n, (int)H, (int)W, (int)Ho, (int)Wo);
    check_launch("relu_maxpool2");
    return y;
}

torch::Tensor lenet5_forward(torch::Tensor x, torch::Tensor conv1_w, torch::Tensor conv1_b, torch::Tensor conv2_w,
                             torch::Tensor conv2_b, torch::Tensor fc1_w, torch::Tensor fc1_b, torch::Tensor fc2_w,
                             torch::Tensor fc2_b, torch::Tensor fc3_w, torch::Tensor fc3_b) {
    check_input(x, "lenet5_forward: x");
    const c10::cuda::CUDAGuard guard(x.device());
    auto h = relu_maxpool2(at::conv2d(x, conv1_w, conv1_b).contiguous());
    h = relu_maxpool2(at::conv2d(h, conv2_w, conv2_b).contiguous());
    h = h.view({-1, 16 * 5 * 5});
    h = at::linear(h, fc1_w, fc1_b).contiguous();
    relu_inplace(h);
    h = at::linear(h, fc2_w, fc2_b).contiguous();
    relu_inplace(h);
    return at::linear(h, fc3_w, fc3_b);
}
"""

CPP_SRC = r"""
torch::Tensor lenet5_forward(torch::Tensor x, torch::Tensor conv1_w, torch::Tensor conv1_b, torch::Tensor conv2_w,
                             torch::Tensor conv2_b, torch::Tensor fc1_w, torch::Tensor fc1_b, torch::Tensor fc2_w,
                             torch::Tensor fc2_b, torch::Tensor fc3_w, torch::Tensor fc3_b);
"""

_ext = load_inline(
    name="kb_level3_4_lenet5",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["lenet5_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=1, out_channels=6, kernel_size=5, stride=1)
        self.conv2 = nn.Conv2d(in_channels=6, out_channels=16, kernel_size=5, stride=1)
        self.fc1 = nn.Linear(in_features=16 * 5 * 5, out_features=120)
        self.fc2 = nn.Linear(in_features=120, out_features=84)
        self.fc3 = nn.Linear(in_features=84, out_features=num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.lenet5_forward(
            x,
            self.conv1.weight,
            self.conv1.bias,
            self.conv2.weight,
            self.conv2.bias,
            self.fc1.weight,
            self.fc1.bias,
            self.fc2.weight,
            self.fc2.bias,
            self.fc3.weight,
            self.fc3.bias,
        )
