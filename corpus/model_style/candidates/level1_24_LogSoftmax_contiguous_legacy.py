import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

template <int BLOCK>
__device__ float block_reduce(float v, float* smem, bool is_max) {
    const int tid = threadIdx.x;
    smem[tid] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) {
            smem[tid] = is_max ? fmaxf(smem[tid], smem[tid + s]) : smem[tid] + smem[tid + s];
        }
        __syncthreads();
    }
    float r = smem[0];
    __syncthreads();
    return r;
}

template <int BLOCK>
__global__ void log_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float smem[BLOCK];
    const float* xr = x + (int64_t)blockIdx.x * cols;
    float* yr = y + (int64_t)blockIdx.x * cols;

    float m = -FLT_MAX;
    for (int j = threadIdx.x; j < cols; j += BLOCK) m = fmaxf(m, xr[j]);
    m = block_reduce<BLOCK>(m, smem, true);

    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += BLOCK) s += expf(xr[j] - m);
    s = block_reduce<BLOCK>(s, smem, false);

    const float lse = m + logf(s);
    for (int j = threadIdx.x; j < cols; j += BLOCK) yr[j] = xr[j] - lse;
}

torch::Tensor log_softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2, "expected a 2D tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int rows = xc.size(0);
    const int cols = xc.size(1);
    log_softmax_kernel<256><<<rows, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

cpp_source = "torch::Tensor log_softmax_forward(torch::Tensor x);"

log_softmax_ext = load_inline(
    name="log_softmax_contig",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["log_softmax_forward"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return log_softmax_ext.log_softmax_forward(x)
