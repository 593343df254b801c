import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

// Vectorized: each thread scales 4 consecutive elements of B by the diagonal entry of their row.
__global__ void diag_scale_vec4_kernel(const float* __restrict__ diag,
                                       const float4* __restrict__ B,
                                       float4* __restrict__ out,
                                       int M, int total_vec) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total_vec) {
        int row = (i * 4) / M;
        float d = diag[row];
        float4 b = B[i];
        float4 r;
        r.x = d * b.x;
        r.y = d * b.y;
        r.z = d * b.z;
        r.w = d * b.w;
        out[i] = r;
    }
}

torch::Tensor diag_matmul_cuda(torch::Tensor A, torch::Tensor B) {
    const int N = B.size(0);
    const int M = B.size(1);
    auto out = torch::empty_like(B);

    const int total_vec = (N * M) / 4;
    const int threads = 256;
    const int blocks = (total_vec + threads - 1) / threads;

    diag_scale_vec4_kernel<<<blocks, threads>>>(
        A.data_ptr<float>(),
        reinterpret_cast<const float4*>(B.data_ptr<float>()),
        reinterpret_cast<float4*>(out.data_ptr<float>()),
        M, total_vec);

    return out;
}
"""

cpp_source = "torch::Tensor diag_matmul_cuda(torch::Tensor A, torch::Tensor B);"

diag_ext = load_inline(
    name="diag_matmul_vec4",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["diag_matmul_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        return diag_ext.diag_matmul_cuda(A, B)
