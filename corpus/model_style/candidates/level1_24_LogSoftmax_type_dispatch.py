import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

log_softmax_cuda_source = """
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

template <typename scalar_t>
__global__ void log_softmax_kernel(const scalar_t* __restrict__ input,
                                   scalar_t* __restrict__ output,
                                   const int dim) {
    __shared__ scalar_t sdata[512];
    const int row = blockIdx.x;
    const int tid = threadIdx.x;
    const scalar_t* x = input + row * dim;
    scalar_t* y = output + row * dim;

    scalar_t local_max = x[0];
    for (int i = tid; i < dim; i += blockDim.x) {
        local_max = x[i] > local_max ? x[i] : local_max;
    }
    sdata[tid] = local_max;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s && sdata[tid + s] > sdata[tid]) {
            sdata[tid] = sdata[tid + s];
        }
        __syncthreads();
    }
    const scalar_t max_val = sdata[0];
    __syncthreads();

    scalar_t local_sum = 0;
    for (int i = tid; i < dim; i += blockDim.x) {
        local_sum += exp(x[i] - max_val);
    }
    sdata[tid] = local_sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    const scalar_t log_sum = log(sdata[0]);

    for (int i = tid; i < dim; i += blockDim.x) {
        y[i] = x[i] - max_val - log_sum;
    }
}

torch::Tensor log_softmax_cuda(torch::Tensor input) {
    auto output = torch::empty_like(input);
    const int batch_size = input.size(0);
    const int dim = input.size(1);
    const int threads = 512;

    AT_DISPATCH_FLOATING_TYPES(input.type(), "log_softmax_cuda", ([&] {
        log_softmax_kernel<scalar_t><<<batch_size, threads>>>(
            input.data_ptr<scalar_t>(),
            output.data_ptr<scalar_t>(),
            dim);
    }));

    return output;
}
"""

log_softmax_cpp_source = "torch::Tensor log_softmax_cuda(torch::Tensor input);"

log_softmax_module = load_inline(
    name="log_softmax_dispatch",
    cpp_sources=log_softmax_cpp_source,
    cuda_sources=log_softmax_cuda_source,
    functions=["log_softmax_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.log_softmax = log_softmax_module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_softmax.log_softmax_cuda(x)
