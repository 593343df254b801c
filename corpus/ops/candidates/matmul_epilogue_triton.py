"""Linear + fused Triton epilogue: y = relu(x @ W.T + b) * scale.

The GEMM stays in torch (cuBLAS fp32 via torch.matmul into a fresh tensor, no bias); one
Triton kernel then applies bias + ReLU + scale in place on that fresh tensor (one read, one
write) instead of torch's separate bias/ReLU/mul passes.  2D tiles: the bias slice is loaded
once per tile and broadcast over its rows.

(A full Triton fp32 GEMM with the epilogue fused, IEEE dot products, was correct but measured
5.1-6.4 ms vs cuBLAS 2.8 ms for 4096^3 on an H200, so the GEMM is left to cuBLAS.)
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_relu_scale_kernel(y_ptr, b_ptr, n_rows, n_cols, scale,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < n_cols
    mask = (rows[:, None] < n_rows) & cmask[None, :]
    offs = rows[:, None] * n_cols + cols[None, :]
    v = tl.load(y_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=cmask, other=0.0)
    v = v + b[None, :]
    v = tl.where(v < 0.0, 0.0, v) * scale  # NaN propagates like torch.relu
    tl.store(y_ptr + offs, v, mask=mask)


BLOCK_N_MAX = 1024   # columns per tile
TILE_ELEMS = 2048    # elements per tile (BLOCK_M = TILE_ELEMS // BLOCK_N)
NUM_WARPS = 8


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        b = self.linear.bias.contiguous()
        N, K = w.shape
        if x.shape[-1] != K:
            raise ValueError("last dimension does not match in_features")
        x2 = x.reshape(-1, K)
        y = torch.matmul(x2, w.t())  # fresh (M, N) tensor owned by this call
        if not y.is_contiguous():
            y = y.contiguous()
        n_rows = y.shape[0]
        if n_rows > 0 and N > 0:
            BLOCK_N = min(BLOCK_N_MAX, triton.next_power_of_2(N))
            BLOCK_M = max(1, TILE_ELEMS // BLOCK_N)
            grid = (triton.cdiv(n_rows, BLOCK_M), triton.cdiv(N, BLOCK_N))
            _bias_relu_scale_kernel[grid](
                y, b, n_rows, N, float(self.scale),
                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS,
            )
        return y.view(*x.shape[:-1], N)
