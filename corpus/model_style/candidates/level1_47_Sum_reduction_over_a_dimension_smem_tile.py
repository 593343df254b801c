import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_reduce_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE_X 32
#define TILE_Y 8

// x: [outer, reduce, inner] -> out: [outer, 1, inner]
// threadIdx.x walks the inner (contiguous) dimension for coalesced loads,
// threadIdx.y splits the reduced dimension; partial sums are combined in shared memory.
__global__ void sum_dim1_kernel(const float* x, float* out, int reduce, int inner) {
    __shared__ float partial[TILE_Y][TILE_X];
    int j = blockIdx.x * TILE_X + threadIdx.x;
    int b = blockIdx.y;

    float acc = 0.0f;
    if (j < inner) {
        const float* base = x + (size_t)b * reduce * inner + j;
        for (int k = threadIdx.y; k < reduce; k += TILE_Y) {
            acc += base[(size_t)k * inner];
        }
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();

    if (threadIdx.y == 0 && j < inner) {
        float total = 0.0f;
        for (int t = 0; t < TILE_Y; ++t) total += partial[t][threadIdx.x];
        out[(size_t)b * inner + j] = total;
    }
}

torch::Tensor sum_reduce_cuda(torch::Tensor x, int64_t dim) {
    int outer = x.size(0);
    int reduce = x.size(1);
    int inner = x.size(2);
    auto out = torch::empty({outer, 1, inner}, x.options());

    dim3 block(TILE_X, TILE_Y);
    dim3 grid((inner + TILE_X - 1) / TILE_X, outer);
    sum_dim1_kernel<<<grid, block>>>(x.data_ptr<float>(), out.data_ptr<float>(), reduce, inner);
    return out;
}
"""

sum_reduce_cpp_source = "torch::Tensor sum_reduce_cuda(torch::Tensor x, int64_t dim);"

sum_reduce = load_inline(
    name="sum_reduce_smem_tile",
    cpp_sources=sum_reduce_cpp_source,
    cuda_sources=sum_reduce_source,
    functions=["sum_reduce_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.sum_reduce = sum_reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sum_reduce.sum_reduce_cuda(x, self.dim)
