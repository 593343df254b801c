import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

log_softmax_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

// log_softmax(x)_i = x_i - log(sum_j exp(x_j))
__global__ void log_softmax_kernel(const float* __restrict__ input, float* __restrict__ output, int dim) {
    __shared__ float partial[256];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float* x = input + row * dim;
    float* y = output + row * dim;

    float sum = 0.0f;
    for (int i = tid; i < dim; i += blockDim.x) {
        sum += expf(x[i]);
    }
    partial[tid] = sum;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        __syncthreads();
    }
    float log_sum = logf(partial[0]);

    for (int i = tid; i < dim; i += blockDim.x) {
        y[i] = x[i] - log_sum;
    }
}

torch::Tensor log_softmax_cuda(torch::Tensor input) {
    auto output = torch::empty_like(input);
    int batch_size = input.size(0);
    int dim = input.size(1);
    log_softmax_kernel<<<batch_size, 256>>>(input.data_ptr<float>(), output.data_ptr<float>(), dim);
    return output;
}
"""

log_softmax_cpp = "torch::Tensor log_softmax_cuda(torch::Tensor input);"

log_softmax_ext = load_inline(
    name="log_softmax_nomax",
    cpp_sources=log_softmax_cpp,
    cuda_sources=log_softmax_source,
    functions=["log_softmax_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return log_softmax_ext.log_softmax_cuda(x)
