import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

diag_mm_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

// Each thread scales four consecutive elements of one row of B with a 128-bit load/store.
__global__ void diag_mm_vec4_kernel(const float* __restrict__ diag, const float* __restrict__ B,
                                    float* __restrict__ C, int N, int M) {
    int row = blockIdx.y;
    int v = blockIdx.x * blockDim.x + threadIdx.x;   // float4 index within the row
    int vec_per_row = M / 4;
    const float* b_row = B + (size_t)row * M;
    float* c_row = C + (size_t)row * M;
    float d = diag[row];

    if (v < vec_per_row) {
        float4 b = reinterpret_cast<const float4*>(b_row)[v];
        float4 c;
        c.x = d * b.x;
        c.y = d * b.y;
        c.z = d * b.z;
        c.w = d * b.w;
        reinterpret_cast<float4*>(c_row)[v] = c;
    }
    // leftover columns when M is not a multiple of 4
    int tail = vec_per_row * 4 + v;
    if (v < M - vec_per_row * 4) {
        c_row[tail] = d * b_row[tail];
    }
}

torch::Tensor diag_mm_cuda(torch::Tensor A, torch::Tensor B) {
    const int N = B.size(0);
    const int M = B.size(1);
    auto C = torch::empty_like(B);
    const int threads = 256;
    dim3 grid((M / 4 + threads - 1) / threads, N);
    diag_mm_vec4_kernel<<<grid, threads>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), N, M);
    return C;
}
"""

diag_mm_cpp_source = "torch::Tensor diag_mm_cuda(torch::Tensor A, torch::Tensor B);"

diag_mm = load_inline(
    name="diag_mm_row_vec4",
    cpp_sources=diag_mm_cpp_source,
    cuda_sources=diag_mm_source,
    functions=["diag_mm_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return diag_mm.diag_mm_cuda(A, B)
