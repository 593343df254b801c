import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

template <typename scalar_t>
__global__ void sum_reduction_kernel(const scalar_t* __restrict__ input,
                                     scalar_t* __restrict__ output,
                                     int64_t reduce_size,
                                     int64_t inner_size,
                                     int64_t total) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx < total) {
        int64_t outer = idx / inner_size;
        int64_t inner = idx % inner_size;
        scalar_t acc = 0;
        for (int64_t r = 0; r < reduce_size; ++r) {
            acc += input[(outer * reduce_size + r) * inner_size + inner];
        }
        output[idx] = acc;
    }
}

torch::Tensor sum_reduction_cuda(torch::Tensor input, int64_t dim) {
    auto sizes = input.sizes().vec();
    int64_t reduce_size = sizes[dim];
    int64_t outer_size = 1, inner_size = 1;
    for (int64_t i = 0; i < dim; ++i) outer_size *= sizes[i];
    for (int64_t i = dim + 1; i < (int64_t)sizes.size(); ++i) inner_size *= sizes[i];

    sizes[dim] = 1;
    auto output = torch::empty(sizes, input.options());
    const int64_t total = outer_size * inner_size;

    const int threads = 256;
    const int blocks = (total + threads - 1) / threads;

    AT_DISPATCH_FLOATING_TYPES(input.type(), "sum_reduction_cuda", ([&] {
        sum_reduction_kernel<scalar_t><<<blocks, threads>>>(
            input.data_ptr<scalar_t>(), output.data_ptr<scalar_t>(), reduce_size, inner_size, total);
    }));

    return output;
}
"""

cpp_source = "torch::Tensor sum_reduction_cuda(torch::Tensor input, int64_t dim);"

sum_reduction = load_inline(
    name="sum_reduction_dispatch",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_reduction_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_reduction.sum_reduction_cuda(x, self.dim)
