"""NVRTC candidates for the profiler's acceptance run: one well-written kernel, three flawed ones.

Each entry: (task file, candidate name, expected top finding rule, marker comment on the line
the finding should point at, candidate source).
"""

HEADER = """
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda
"""

GOOD_COPY = HEADER + r'''
SRC = r"""
extern "C" __global__ void scale4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        float4 v = x[i];
        y[i] = make_float4(2.f * v.x, 2.f * v.y, 2.f * v.z, 2.f * v.w);
    }
}
"""
k = fcuda.compile_kernel(SRC, "scale4")


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n4 = x.numel() // 4
        k(grid=(132 * 8,), block=(512,), args=(x, y, n4))
        return y
'''

UNCOALESCED_TRANSPOSE = HEADER + r'''
SRC = r"""
extern "C" __global__ void transpose_naive(const float* __restrict__ x, float* __restrict__ y, int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n)
        y[(long long)col * n + row] = x[(long long)row * n + col];  // FLAW: strided store
}
"""
k = fcuda.compile_kernel(SRC, "transpose_naive")


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.shape[0]
        y = torch.empty_like(x)
        k(grid=((n + 31) // 32, (n + 31) // 32), block=(32, 32), args=(x, y, n))
        return y
'''

BANK_CONFLICT_TRANSPOSE = HEADER + r'''
SRC = r"""
extern "C" __global__ void transpose_smem(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[32][32];              // no padding column
    int bx = blockIdx.x * 32, by = blockIdx.y * 32;
    tile[threadIdx.y][threadIdx.x] = x[(long long)(by + threadIdx.y) * n + bx + threadIdx.x];
    __syncthreads();
    y[(long long)(bx + threadIdx.y) * n + by + threadIdx.x] = tile[threadIdx.x][threadIdx.y];  // FLAW: 32-way bank conflict
}
"""
k = fcuda.compile_kernel(SRC, "transpose_smem")


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.shape[0]
        y = torch.empty_like(x)
        k(grid=(n // 32, n // 32), block=(32, 32), args=(x, y, n))
        return y
'''

REGISTER_PRESSURE_COPY = HEADER + r'''
SRC = r"""
#define R 96
extern "C" __global__ void scale_regs(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    float acc[R];
    #pragma unroll
    for (int j = 0; j < R; ++j) acc[j] = tid + j * stride < n ? x[tid + j * stride] : 0.f;   // FLAW: R live values per thread
    #pragma unroll
    for (int j = 0; j < R; ++j) if (tid + j * stride < n) y[tid + j * stride] = 2.f * acc[j];
}
"""
k = fcuda.compile_kernel(SRC, "scale_regs")


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        threads = (n + 95) // 96
        k(grid=((threads + 255) // 256,), block=(256,), args=(x, y, n))
        return y
'''

CASES = [
    ("copy_task.py", "good_copy", "memory_bound", None, GOOD_COPY),
    ("transpose_task.py", "uncoalesced_transpose", "uncoalesced_global_access", "FLAW", UNCOALESCED_TRANSPOSE),
    ("transpose_task.py", "bank_conflict_transpose", "shared_bank_conflicts", "FLAW", BANK_CONFLICT_TRANSPOSE),
    ("copy_task.py", "register_pressure_copy", "low_occupancy", "FLAW", REGISTER_PRESSURE_COPY),
]
