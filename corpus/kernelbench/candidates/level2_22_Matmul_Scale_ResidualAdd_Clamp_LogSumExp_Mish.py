"""KernelBench level2/22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish: nn.Linear's GEMM (at::linear), then one
CUDA kernel, a block per row: scale, x + x, clamp, logsumexp over the row, and lse * mish(lse).

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

__device__ __forceinline__ float scale_double_clamp(float v, float scale, float lo, float hi) {
    float t = v * scale;
    t = t + t;
    return t < lo ? lo : (t > hi ? hi : t);  // NaN stays NaN, as in torch.clamp
}

// y: (rows, cols) contiguous; out: (rows, 1).
__global__ void lse_mish_kernel(const float* __restrict__ y, float* __restrict__ out, int cols, float scale, float lo,
                                float hi) {
    __shared__ float red[32];
    const float* yr = y + (long long)blockIdx.x * cols;
    float m = -__int_as_float(0x7f800000);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, scale_double_clamp(yr[j], scale, lo, hi));
    m = block_max(m, red);
    const float shift = fabsf(m) == __int_as_float(0x7f800000) ? 0.f : m;  // as torch.logsumexp: an infinite max is 0
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(scale_double_clamp(yr[j], scale, lo, hi) - shift);
    s = block_sum(s, red);
    if (threadIdx.x == 0) {
        const float lse = logf(s) + shift;
        const float mish = lse * tanhf(log1pf(expf(lse)));
        out[blockIdx.x] = lse * mish;
    }
}

torch::Tensor linear_lse_mish_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale,
                                      double clamp_min, double clamp_max) {
    check_input(x, "linear_lse_mish_forward: x");
    check_input(weight, "linear_lse_mish_forward: weight");
    check_input(bias, "linear_lse_mish_forward: bias");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = at::linear(x, weight, bias).contiguous();
    TORCH_CHECK(y.dim() == 2 && y.size(1) > 0 && y.size(1) < 2147483647LL, "linear_lse_mish_forward: 2-D output");
    const int64_t rows = y.size(0);
    auto out = at::empty({rows, (int64_t)1}, y.options());
    if (rows == 0) return out;
    lse_mish_kernel<<<(unsigned int)rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), out.data_ptr<float>(), (int)y.size(1), (float)scale, (float)clamp_min, (float)clamp_max);
    check_launch("linear_lse_mish_forward");
    return out;
}
"""

CPP_SRC = r"""
torch::Tensor linear_lse_mish_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale,
                                      double clamp_min, double clamp_max);
"""

_ext = load_inline(
    name="kb_level2_22_matmul_scale_residualadd_clamp_logsumexp_mish",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["linear_lse_mish_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.matmul = nn.Linear(input_size, hidden_size)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_lse_mish_forward(
            x,
            self.matmul.weight,
            self.matmul.bias,
            float(self.scale_factor),
            float(self.clamp_min),
            float(self.clamp_max),
        )
