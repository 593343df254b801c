"""NVRTC CUDA fused bias-add + exact (erf) GELU: y = gelu(x + bias), bias over the last dim.

bias_gelu_vec4: grid (column chunks of 256 float4, row groups); each thread keeps its
float4 of bias in registers and walks rows with a grid stride (one float4 read + one float4
write per element group).  bias_gelu_scalar: same layout, scalar, for n_cols % 4 != 0.
"""
import torch
import torch.nn as nn

from forge_lsp.runtime import cuda as fcuda

SRC = r'''
__device__ __forceinline__ float gelu_erf(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

extern "C" __global__ void bias_gelu_vec4(const float* __restrict__ x,
                                          const float* __restrict__ bias,
                                          float* __restrict__ y, int n_rows, int n_cols) {
    const int n4 = n_cols >> 2;
    const int c4 = blockIdx.x * blockDim.x + threadIdx.x;
    if (c4 >= n4) return;
    const float4 bb = __ldg(reinterpret_cast<const float4*>(bias) + c4);
    for (long long r = blockIdx.y; r < n_rows; r += gridDim.y) {
        const long long idx = r * n4 + c4;
        const float4 v = __ldg(reinterpret_cast<const float4*>(x) + idx);
        float4 o;
        o.x = gelu_erf(v.x + bb.x);
        o.y = gelu_erf(v.y + bb.y);
        o.z = gelu_erf(v.z + bb.z);
        o.w = gelu_erf(v.w + bb.w);
        reinterpret_cast<float4*>(y)[idx] = o;
    }
}

extern "C" __global__ void bias_gelu_scalar(const float* __restrict__ x,
                                            const float* __restrict__ bias,
                                            float* __restrict__ y, int n_rows, int n_cols) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_cols) return;
    const float bb = bias[c];
    for (long long r = blockIdx.y; r < n_rows; r += gridDim.y) {
        const long long idx = r * n_cols + c;
        y[idx] = gelu_erf(x[idx] + bb);
    }
}
'''

THREADS = 256
MAX_GRID_Y = 65535

_bias_gelu_vec4 = fcuda.compile_kernel(SRC, "bias_gelu_vec4")
_bias_gelu_scalar = fcuda.compile_kernel(SRC, "bias_gelu_scalar")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = self.bias.shape[0]
        if x.shape[-1] != n_cols or x.dtype != torch.float32:
            raise ValueError("expected float32 input with last dim == bias size")
        x2 = x.contiguous().view(-1, n_cols)
        n_rows = x2.shape[0]
        y = torch.empty_like(x2)
        b = self.bias.contiguous()
        if n_rows > 0:
            gy = min(n_rows, MAX_GRID_Y)
            if n_cols % 4 == 0 and all(t.data_ptr() % 16 == 0 for t in (x2, b, y)):
                gx = -(-(n_cols // 4) // THREADS)
                _bias_gelu_vec4(grid=(gx, gy), block=(THREADS,),
                                args=(x2, b, y, n_rows, n_cols), shared_mem=0)
            else:
                gx = -(-n_cols // THREADS)
                _bias_gelu_scalar(grid=(gx, gy), block=(THREADS,),
                                  args=(x2, b, y, n_rows, n_cols), shared_mem=0)
        return y.view(x.shape)
