import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Single fused kernel: C = relu(x @ W^T + bias) with 16x16 shared-memory tiles.
cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE_SIZE 16

__global__ void gemm_bias_relu_kernel(const float* x, const float* w, const float* bias, float* out,
                                      int M, int N, int K) {
    __shared__ float tile_x[TILE_SIZE][TILE_SIZE];
    __shared__ float tile_w[TILE_SIZE][TILE_SIZE];

    int row = blockIdx.y * TILE_SIZE + threadIdx.y;
    int col = blockIdx.x * TILE_SIZE + threadIdx.x;
    float sum = 0.0f;

    for (int t = 0; t < K / TILE_SIZE; ++t) {
        tile_x[threadIdx.y][threadIdx.x] = x[row * K + t * TILE_SIZE + threadIdx.x];
        tile_w[threadIdx.y][threadIdx.x] = w[(blockIdx.x * TILE_SIZE + threadIdx.y) * K + t * TILE_SIZE + threadIdx.x];
        __syncthreads();
        for (int k = 0; k < TILE_SIZE; ++k) {
            sum += tile_x[threadIdx.y][k] * tile_w[threadIdx.x][k];
        }
        __syncthreads();
    }

    sum += bias[col];
    out[row * N + col] = sum > 0.0f ? sum : 0.0f;
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
    int M = x.size(0);
    int K = x.size(1);
    int N = w.size(0);
    auto out = torch::empty({M, N}, x.options());

    dim3 block(TILE_SIZE, TILE_SIZE);
    dim3 grid(N / TILE_SIZE, M / TILE_SIZE);
    gemm_bias_relu_kernel<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(),
                                           out.data_ptr<float>(), M, N, K);
    return out;
}
"""

cpp_source = "torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias);"

gemm_bias_relu_ext = load_inline(
    name="gemm_bias_relu_tiled16",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_bias_relu"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return gemm_bias_relu_ext.gemm_bias_relu(x, self.gemm.weight, self.bias)
