"""Linear + fused epilogue: y = relu(x @ W.T + b) * scale.

The GEMM stays in torch (cuBLAS fp32, torch.matmul into a fresh tensor, no bias); one NVRTC
kernel then applies bias + ReLU + scale in place on that fresh tensor (one read + one
write) instead of torch's separate bias/ReLU/mul passes.  Vectorized float4 kernel with the
bias float4 held in registers across a grid-stride walk over rows; scalar kernel otherwise.
"""
import torch
import torch.nn as nn

from forge_lsp.runtime import cuda as fcuda

SRC = r'''
__device__ __forceinline__ float relu_scale(float v, float scale) {
    return (v < 0.f ? 0.f : v) * scale;   // NaN propagates like torch.relu
}

extern "C" __global__ void bias_relu_scale_vec4(float* __restrict__ y,
                                                const float* __restrict__ bias,
                                                int n_rows, int n_cols, float scale) {
    const int n4 = n_cols >> 2;
    const int c4 = blockIdx.x * blockDim.x + threadIdx.x;
    if (c4 >= n4) return;
    const float4 bb = __ldg(reinterpret_cast<const float4*>(bias) + c4);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (long long r = blockIdx.y; r < n_rows; r += gridDim.y) {
        const long long idx = r * n4 + c4;
        float4 v = y4[idx];
        v.x = relu_scale(v.x + bb.x, scale);
        v.y = relu_scale(v.y + bb.y, scale);
        v.z = relu_scale(v.z + bb.z, scale);
        v.w = relu_scale(v.w + bb.w, scale);
        y4[idx] = v;
    }
}

extern "C" __global__ void bias_relu_scale_scalar(float* __restrict__ y,
                                                  const float* __restrict__ bias,
                                                  int n_rows, int n_cols, float scale) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_cols) return;
    const float bb = bias[c];
    for (long long r = blockIdx.y; r < n_rows; r += gridDim.y) {
        const long long idx = r * n_cols + c;
        y[idx] = relu_scale(y[idx] + bb, scale);
    }
}
'''

THREADS = 256
MAX_GRID_Y = 65535

_epi_vec4 = fcuda.compile_kernel(SRC, "bias_relu_scale_vec4")
_epi_scalar = fcuda.compile_kernel(SRC, "bias_relu_scale_scalar")


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        b = self.linear.bias.contiguous()
        N, K = w.shape
        if x.shape[-1] != K or x.dtype != torch.float32:
            raise ValueError("expected float32 input with last dim == in_features")
        x2 = x.reshape(-1, K)
        y = torch.matmul(x2, w.t())  # fresh (M, N) tensor owned by this call
        if not y.is_contiguous():
            y = y.contiguous()
        n_rows = y.shape[0]
        if n_rows > 0 and N > 0:
            gy = min(n_rows, MAX_GRID_Y)
            scale = float(self.scale)
            if N % 4 == 0 and y.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0:
                gx = -(-(N // 4) // THREADS)
                _epi_vec4(grid=(gx, gy), block=(THREADS,), args=(y, b, n_rows, N, scale),
                          shared_mem=0)
            else:
                gx = -(-N // THREADS)
                _epi_scalar(grid=(gx, gy), block=(THREADS,), args=(y, b, n_rows, N, scale),
                            shared_mem=0)
        return y.view(*x.shape[:-1], N)
