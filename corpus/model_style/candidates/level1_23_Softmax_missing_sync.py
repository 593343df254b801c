import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ out, int dim) {
    extern __shared__ float buf[];
    const int tid = threadIdx.x;
    const int row = blockIdx.x;
    const float* xr = x + row * dim;
    float* outr = out + row * dim;

    // row max
    float m = -FLT_MAX;
    for (int i = tid; i < dim; i += blockDim.x) m = fmaxf(m, xr[i]);
    buf[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] = fmaxf(buf[tid], buf[tid + s]);
        __syncthreads();
    }
    m = buf[0];
    __syncthreads();

    // row sum
    float sum = 0.0f;
    for (int i = tid; i < dim; i += blockDim.x) sum += expf(xr[i] - m);
    buf[tid] = sum;
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] += buf[tid + s];
        __syncthreads();
    }
    sum = buf[0];

    for (int i = tid; i < dim; i += blockDim.x) outr[i] = expf(xr[i] - m) / sum;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    int rows = x.size(0);
    int dim = x.size(1);
    const int threads = 256;
    softmax_kernel<<<rows, threads, threads * sizeof(float)>>>(x.data_ptr<float>(), out.data_ptr<float>(), dim);
    return out;
}
"""

cpp_source = "torch::Tensor softmax_forward(torch::Tensor x);"

softmax_ext = load_inline(
    name="softmax_smem",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x)
