"""KernelBench level3/2_ShallowWideMLP: the MLP in one C++ call: cuBLAS GEMMs with a ReLU
CUDA kernel in place between layers.

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

// ReLU in place on a tensor this extension allocated (contiguous).
static void relu_inplace(torch::Tensor& h) {
    const long long n = h.numel();
    if (n == 0) return;
    relu_inplace_kernel<<<blocks_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(h.data_ptr<float>(), n);
    check_launch("relu_inplace");
}

// nn.Linear layers (at::linear, cuBLAS) with a ReLU kernel in place between them.
torch::Tensor mlp_forward(torch::Tensor x, std::vector<torch::Tensor> weights, std::vector<torch::Tensor> biases) {
    check_input(x, "mlp_forward: x");
    TORCH_CHECK(!weights.empty() && weights.size() == biases.size(), "mlp_forward: one bias per weight");
    const c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor h = x;
    for (size_t l = 0; l < weights.size(); ++l) {
        h = at::linear(h, weights[l], biases[l]).contiguous();
        if (l + 1 < weights.size()) relu_inplace(h);
    }
    return h;
}
"""

CPP_SRC = r"""
torch::Tensor mlp_forward(torch::Tensor x, std::vector<torch::Tensor> weights, std::vector<torch::Tensor> biases);
"""

_ext = load_inline(
    name="kb_level3_2_shallowwidemlp",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["mlp_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super().__init__()
        layers = []
        current_input_size = input_size
        for size in hidden_layer_sizes:
            layers.append(nn.Linear(current_input_size, size))
            layers.append(nn.ReLU())
            current_input_size = size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        linears = [m for m in self.network if isinstance(m, nn.Linear)]
        return _ext.mlp_forward(x, [m.weight for m in linears], [m.bias for m in linears])
