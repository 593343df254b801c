"""KernelBench level1/24_LogSoftmax: log_softmax over the last dim, one block per row.

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

// One block per row of a contiguous (rows, cols) matrix.
__global__ void log_softmax_forward_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = -__int_as_float(0x7f800000);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
    m = block_max(m, red);
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(xr[j] - m);
    s = block_sum(s, red);
    const float lse = logf(s);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = (xr[j] - m) - lse;
}

torch::Tensor log_softmax_forward(torch::Tensor x, int64_t dim) {
    check_input(x, "log_softmax_forward: x");
    TORCH_CHECK(x.dim() == 2, "log_softmax_forward: x must be 2-D");
    TORCH_CHECK(dim == 1 || dim == -1, "log_softmax_forward: only the last dim of a 2-D tensor");
    TORCH_CHECK(x.size(1) < 2147483647LL && x.size(0) < 2147483647LL, "log_softmax_forward: too large");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const long long rows = xc.size(0);
    const int cols = (int)xc.size(1);
    if (rows == 0 || cols == 0) return y;
    log_softmax_forward_kernel<<<(unsigned int)rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    check_launch("log_softmax_forward");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor log_softmax_forward(torch::Tensor x, int64_t dim);
"""

_ext = load_inline(
    name="kb_level1_24_logsoftmax",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["log_softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.log_softmax_forward(x, self.dim)
