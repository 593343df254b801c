"""KernelBench level2/99_Matmul_GELU_Softmax: nn.Linear's GEMM (at::linear), then exact GELU and the row softmax
fused in one CUDA kernel, a block per row.

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

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide sum / max (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// All threads of the block must call it; `red` is __shared__ float[32].
__device__ __forceinline__ float block_sum(float v, float* red) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // `red` may still be read by the previous call
    if (lane == 0) red[wid] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* red) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -__int_as_float(0x7f800000);
    return warp_max(v);
}

static void check_launch(const char* what) {
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, what, ": kernel launch failed: ", cudaGetErrorString(err));
}

static void check_input(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda(), what, " must be a CUDA tensor");
    TORCH_CHECK(t.scalar_type() == at::kFloat, what, " must be float32");
}

__device__ __forceinline__ float gelu_erf(float v) { return v * 0.5f * (1.f + erff(v * 0.70710678118654752440f)); }

__global__ void gelu_softmax_kernel(const float* __restrict__ y, float* __restrict__ out, int cols) {
    __shared__ float red[32];
    const float* yr = y + (long long)blockIdx.x * cols;
    float* orow = out + (long long)blockIdx.x * cols;
    float m = -__int_as_float(0x7f800000);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, gelu_erf(yr[j]));
    m = block_max(m, red);
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(gelu_erf(yr[j]) - m);
    s = block_sum(s, red);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) orow[j] = expf(gelu_erf(yr[j]) - m) / s;
}

torch::Tensor linear_gelu_softmax_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    check_input(x, "linear_gelu_softmax_forward: x");
    check_input(weight, "linear_gelu_softmax_forward: weight");
    check_input(bias, "linear_gelu_softmax_forward: bias");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::linear(x, weight, bias).contiguous();
    TORCH_CHECK(y.dim() == 2 && y.size(1) < 2147483647LL, "linear_gelu_softmax_forward: 2-D output");
    auto out = at::empty_like(y);
    const int64_t rows = y.size(0), cols = y.size(1);
    if (rows == 0 || cols == 0) return out;
    gelu_softmax_kernel<<<(unsigned int)rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), out.data_ptr<float>(), (int)cols);
    check_launch("linear_gelu_softmax_forward");
    return out;
}
"""

CPP_SRC = r"""
torch::Tensor linear_gelu_softmax_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
"""

_ext = load_inline(
    name="kb_level2_99_matmul_gelu_softmax",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["linear_gelu_softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_gelu_softmax_forward(x, self.linear.weight, self.linear.bias)
