import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_reduce_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

// x viewed as [outer, reduce, inner]; one thread per (outer, inner) output element.
__global__ void sum_reduce_kernel(const float* x, float* out, int outer, int reduce, int inner) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < outer * inner) {
        int o = idx / inner;
        int i = idx % inner;
        float sum = 0.0f;
        for (int r = 0; r < reduce; r++) {
            sum += x[o * reduce * inner + r * inner + i];
        }
        out[idx] = sum;
    }
}

torch::Tensor sum_reduce_cuda(torch::Tensor x, int dim) {
    auto sizes = x.sizes().vec();
    int outer = 1;
    for (int d = 0; d < dim; d++) outer *= sizes[d];
    int reduce = sizes[dim];
    int inner = 1;
    for (int d = dim + 1; d < (int)sizes.size(); d++) inner *= sizes[d];

    sizes[dim] = 1;
    auto out = torch::empty(sizes, x.options());

    const int block_size = 256;
    const int num_blocks = (outer * inner + block_size - 1) / block_size;
    sum_reduce_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), out.data_ptr<float>(), outer, reduce, inner);

    return out;
}
"""

sum_reduce_cpp_source = "torch::Tensor sum_reduce_cuda(torch::Tensor x, int dim);"

sum_reduce = load_inline(
    name="sum_reduce_thread_out",
    cpp_sources=sum_reduce_cpp_source,
    cuda_sources=sum_reduce_source,
    functions=["sum_reduce_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.sum_reduce = sum_reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sum_reduce.sum_reduce_cuda(x, self.dim)
