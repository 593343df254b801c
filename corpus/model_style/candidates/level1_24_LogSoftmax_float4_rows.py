import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

log_softmax_vec_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// One block (256 threads) per row; the row is read as float4 (dim divisible by 4).
__global__ void log_softmax_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, int dim) {
    __shared__ float smem[8];
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const float4* x4 = reinterpret_cast<const float4*>(x + (size_t)blockIdx.x * dim);
    float4* y4 = reinterpret_cast<float4*>(y + (size_t)blockIdx.x * dim);
    const int n4 = dim >> 2;

    float m = -FLT_MAX;
    for (int i = tid; i < n4; i += blockDim.x) {
        float4 v = x4[i];
        m = fmaxf(fmaxf(m, fmaxf(v.x, v.y)), fmaxf(v.z, v.w));
    }
    m = warp_max(m);
    if (lane == 0) smem[wid] = m;
    __syncthreads();
    m = smem[0];
    for (int w = 1; w < 8; ++w) m = fmaxf(m, smem[w]);
    __syncthreads();

    float s = 0.0f;
    for (int i = tid; i < n4; i += blockDim.x) {
        float4 v = x4[i];
        s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
    }
    s = warp_sum(s);
    if (lane == 0) smem[wid] = s;
    __syncthreads();
    s = 0.0f;
    for (int w = 0; w < 8; ++w) s += smem[w];
    const float lse = m + logf(s);

    for (int i = tid; i < n4; i += blockDim.x) {
        float4 v = x4[i];
        v.x -= lse; v.y -= lse; v.z -= lse; v.w -= lse;
        y4[i] = v;
    }
}

torch::Tensor log_softmax_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int rows = x.size(0);
    int dim = x.size(1);
    log_softmax_vec4_kernel<<<rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), dim);
    return y;
}
"""

log_softmax_vec_cpp = "torch::Tensor log_softmax_cuda(torch::Tensor x);"

log_softmax_vec = load_inline(
    name="log_softmax_vec4",
    cpp_sources=log_softmax_vec_cpp,
    cuda_sources=log_softmax_vec_source,
    functions=["log_softmax_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return log_softmax_vec.log_softmax_cuda(x)
