import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

log_softmax_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

#define BLOCK_SIZE 1024

__global__ void log_softmax_kernel(const float* input, float* output, int batch_size, int dim) {
    __shared__ float sdata[BLOCK_SIZE];

    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float* x = input + row * dim;
    float* y = output + row * dim;

    // Step 1: row max
    float local_max = -FLT_MAX;
    for (int i = tid; i < dim; i += BLOCK_SIZE) {
        local_max = fmaxf(local_max, x[i]);
    }
    sdata[tid] = local_max;
    __syncthreads();
    for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] = fmaxf(sdata[tid], sdata[tid + s]);
        }
        __syncthreads();
    }
    float max_val = sdata[0];
    __syncthreads();

    // Step 2: sum of exp(x - max)
    float local_sum = 0.0f;
    for (int i = tid; i < dim; i += BLOCK_SIZE) {
        local_sum += expf(x[i] - max_val);
    }
    sdata[tid] = local_sum;
    __syncthreads();
    for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    float log_sum = logf(sdata[0]);

    // Step 3: x - max - log(sum)
    for (int i = tid; i < dim; i += BLOCK_SIZE) {
        y[i] = x[i] - max_val - log_sum;
    }
}

torch::Tensor log_softmax_cuda(torch::Tensor input) {
    int batch_size = input.size(0);
    int dim = input.size(1);
    auto output = torch::empty_like(input);

    log_softmax_kernel<<<batch_size, BLOCK_SIZE>>>(
        input.data_ptr<float>(), output.data_ptr<float>(), batch_size, dim);

    return output;
}
"""

log_softmax_cpp_source = "torch::Tensor log_softmax_cuda(torch::Tensor input);"

log_softmax = load_inline(
    name="log_softmax",
    cpp_sources=log_softmax_cpp_source,
    cuda_sources=log_softmax_source,
    functions=["log_softmax_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.log_softmax = log_softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_softmax.log_softmax_cuda(x)
