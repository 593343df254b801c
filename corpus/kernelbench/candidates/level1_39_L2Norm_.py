"""KernelBench level1/39_L2Norm_: x / ||x||_2 over dim 1, one block per row.

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
__global__ void l2norm_forward_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        const float v = xr[j];
        s += v * v;
    }
    s = block_sum(s, red);
    const float norm = sqrtf(s);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = xr[j] / norm;
}

torch::Tensor l2norm_forward(torch::Tensor x) {
    check_input(x, "l2norm_forward: x");
    TORCH_CHECK(x.dim() == 2, "l2norm_forward: x must be 2-D");
    TORCH_CHECK(x.size(1) < 2147483647LL && x.size(0) < 2147483647LL, "l2norm_forward: too large");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const long long rows = xc.size(0);
    const int cols = (int)xc.size(1);
    if (rows == 0 || cols == 0) return y;
    l2norm_forward_kernel<<<(unsigned int)rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    check_launch("l2norm_forward");
    return y;
}
"""

CPP_SRC = r"""
torch::Tensor l2norm_forward(torch::Tensor x);
"""

_ext = load_inline(
    name="kb_level1_39_l2norm_",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["l2norm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.l2norm_forward(x)
