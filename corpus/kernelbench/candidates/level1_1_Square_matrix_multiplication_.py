"""KernelBench level1/1_Square_matrix_multiplication_: C = A @ B, a 64x64-tile shared-memory SGEMM (fp32 FMA,
no TF32), 4x4 outputs per thread, any sizes (edges zero-padded in shared memory).

load_inline CUDA candidate for the forge-lsp KernelBench batch (benchmarks/batch_memory.py): float32,
kernels launched on at::cuda::getCurrentCUDAStream(); the module keeps the reference's parameters.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

static void check_launch(const char* what) {
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, what, ": kernel launch failed: ", cudaGetErrorString(err));
}

static void check_input(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda(), what, " must be a CUDA tensor");
    TORCH_CHECK(t.scalar_type() == at::kFloat, what, " must be float32");
}

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16

// C (M, N) = A (M, K) @ B (K, N), all row-major; 256 threads, thread (ty, tx) owns rows ty + 16 i, cols tx + 16 j.
__global__ void sgemm_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int M, int N, int K) {
    __shared__ float As[TILE_K][TILE_M + 1];
    __shared__ float Bs[TILE_K][TILE_N + 1];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int row0 = blockIdx.y * TILE_M, col0 = blockIdx.x * TILE_N;
    float acc[4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) acc[a][b] = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        for (int l = threadIdx.x; l < TILE_M * TILE_K; l += 256) {
            const int r = l / TILE_K, c = l % TILE_K;
            const int gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? A[(long long)gr * K + gc] : 0.f;
        }
        for (int l = threadIdx.x; l < TILE_K * TILE_N; l += 256) {
            const int r = l / TILE_N, c = l % TILE_N;
            const int gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < K && gc < N) ? B[(long long)gr * N + gc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                a[t] = As[kk][ty + 16 * t];
                b[t] = Bs[kk][tx + 16 * t];
            }
#pragma unroll
            for (int p = 0; p < 4; ++p)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[p][q] = fmaf(a[p], b[q], acc[p][q]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int p = 0; p < 4; ++p) {
        const int r = row0 + ty + 16 * p;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int c = col0 + tx + 16 * q;
            if (r < M && c < N) C[(long long)r * N + c] = acc[p][q];
        }
    }
}

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    check_input(A, "matmul_forward: A");
    check_input(B, "matmul_forward: B");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "matmul_forward: A (M, K) @ B (K, N)");
    TORCH_CHECK(A.size(0) < 65535LL * TILE_M && B.size(1) < 2147483647LL && A.size(1) < 2147483647LL,
                "matmul_forward: too large");
    const c10::cuda::CUDAGuard guard(A.device());
    auto ac = A.contiguous();
    auto bc = B.contiguous();
    const int M = (int)ac.size(0), K = (int)ac.size(1), N = (int)bc.size(1);
    auto c = at::empty({(int64_t)M, (int64_t)N}, ac.options());
    if (M == 0 || N == 0) return c;
    const dim3 grid((N + TILE_N - 1) / TILE_N, (M + TILE_M - 1) / TILE_M);
    sgemm_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    check_launch("matmul_forward");
    return c;
}
"""

CPP_SRC = r"""
torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);
"""

_ext = load_inline(
    name="kb_level1_1_square_matrix_multiplication_",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.matmul_forward(A, B)
