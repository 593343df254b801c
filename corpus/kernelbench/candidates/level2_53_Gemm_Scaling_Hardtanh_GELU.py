"""KernelBench level2/53_Gemm_Scaling_Hardtanh_GELU: nn.Linear's GEMM (at::linear), then the scaling, Hardtanh and
exact GELU fused in one CUDA kernel.

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

// y: the linear layer's output, contiguous (rows, cols), rewritten in place (this function's own temporary).
__global__ void gemm_scale_hardtanh_gelu_forward_tail_kernel(float* __restrict__ y, long long n, long long cols, float scaling_factor, float min_val, float max_val) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        const float v = y[i];
        float t = v * scaling_factor;
        t = t < min_val ? min_val : (t > max_val ? max_val : t);
        y[i] = t * 0.5f * (1.f + erff(t * 0.70710678118654752440f));
    }
}

torch::Tensor gemm_scale_hardtanh_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scaling_factor, double min_val, double max_val) {
    check_input(x, "gemm_scale_hardtanh_gelu_forward: x");
    check_input(weight, "gemm_scale_hardtanh_gelu_forward: weight");
    check_input(bias, "gemm_scale_hardtanh_gelu_forward: bias");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::linear(x, weight, bias).contiguous();
    const long long n = y.numel();
    if (n == 0) return y;
    const long long cols = y.size(-1);
    const int threads = 256;
    gemm_scale_hardtanh_gelu_forward_tail_kernel<<<blocks_for(n, threads), threads, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), n, cols, (float)scaling_factor, (float)min_val, (float)max_val);
    check_launch("gemm_scale_hardtanh_gelu_forward");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor gemm_scale_hardtanh_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scaling_factor, double min_val, double max_val);
"""

_ext = load_inline(
    name="kb_level2_53_gemm_scaling_hardtanh_gelu",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["gemm_scale_hardtanh_gelu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor, hardtanh_min, hardtanh_max):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)
        self.gelu = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_scale_hardtanh_gelu_forward(
            x,
            self.gemm.weight,
            self.gemm.bias,
            float(self.scaling_factor),
            float(self.hardtanh.min_val),
            float(self.hardtanh.max_val),
        )
