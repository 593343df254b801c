"""KernelBench level1/12_Matmul_with_diagonal_matrices_: diag(A) @ B as a row-scaling CUDA kernel.

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

__global__ void diag_scale_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                  long long n, long long m) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        c[i] = a[i / m] * b[i];
    }
}

torch::Tensor diag_matmul_forward(torch::Tensor A, torch::Tensor B) {
    check_input(A, "diag_matmul_forward: A");
    check_input(B, "diag_matmul_forward: B");
    TORCH_CHECK(A.dim() == 1 && B.dim() == 2 && A.size(0) == B.size(0), "diag_matmul_forward: A (N,), B (N, M)");
    const c10::cuda::CUDAGuard guard(B.device());
    auto ac = A.contiguous();
    auto bc = B.contiguous();
    auto c = at::empty_like(bc);
    const long long n = bc.numel();
    const long long m = bc.size(1);
    if (n == 0) return c;
    const int threads = 256;
    diag_scale_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), n, m);
    check_launch("diag_matmul_forward");
    return c;
}
"""

CPP_SRC = r"""
torch::Tensor diag_matmul_forward(torch::Tensor A, torch::Tensor B);
"""

_ext = load_inline(
    name="kb_level1_12_matmul_with_diagonal_matrices_",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["diag_matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.diag_matmul_forward(A, B)
