import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

// One block per row. Shared memory tree reductions for the row max and the row sum.
__global__ void softmax_kernel(const float* input, float* output, int batch_size, int dim) {
    extern __shared__ float sdata[];

    int row = blockIdx.x;
    int tid = threadIdx.x;
    if (row >= batch_size) return;

    const float* row_in = input + row * dim;
    float* row_out = output + row * dim;

    // 1. max
    float max_val = -FLT_MAX;
    for (int i = tid; i < dim; i += blockDim.x) {
        max_val = fmaxf(max_val, row_in[i]);
    }
    sdata[tid] = max_val;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] = fmaxf(sdata[tid], sdata[tid + s]);
        }
        __syncthreads();
    }
    max_val = sdata[0];
    __syncthreads();

    // 2. sum of exp(x - max)
    float sum = 0.0f;
    for (int i = tid; i < dim; i += blockDim.x) {
        sum += expf(row_in[i] - max_val);
    }
    sdata[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    sum = sdata[0];

    // 3. normalize
    for (int i = tid; i < dim; i += blockDim.x) {
        row_out[i] = expf(row_in[i] - max_val) / sum;
    }
}

torch::Tensor softmax_cuda(torch::Tensor input) {
    int batch_size = input.size(0);
    int dim = input.size(1);
    auto output = torch::empty_like(input);

    const int threads = 256;
    const int blocks = batch_size;
    const int shared_mem = threads * sizeof(float);

    softmax_kernel<<<blocks, threads, shared_mem>>>(
        input.data_ptr<float>(), output.data_ptr<float>(), batch_size, dim);

    return output;
}
"""

softmax_cpp_source = "torch::Tensor softmax_cuda(torch::Tensor input);"

softmax = load_inline(
    name="softmax",
    cpp_sources=softmax_cpp_source,
    cuda_sources=softmax_source,
    functions=["softmax_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.softmax = softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.softmax.softmax_cuda(x)
