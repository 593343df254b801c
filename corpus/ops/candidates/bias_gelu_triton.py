"""Triton fused bias-add + exact (erf) GELU: y = gelu(x + bias), bias over the last dim.

2D tiles of BLOCK_M rows x BLOCK_N columns: the bias slice is loaded once per tile and
broadcast over its rows; one read of x, one write of y.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_gelu_kernel(x_ptr, b_ptr, y_ptr, n_rows, n_cols,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < n_cols
    mask = (rows[:, None] < n_rows) & cmask[None, :]
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=cmask, other=0.0)
    v = x + b[None, :]
    y = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


BLOCK_N_MAX = 1024   # columns per tile
TILE_ELEMS = 2048    # elements per tile (BLOCK_M = TILE_ELEMS // BLOCK_N)
NUM_WARPS = 8


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = self.bias.shape[0]
        if x.shape[-1] != n_cols:
            raise ValueError("last dimension does not match bias")
        x2 = x.contiguous().view(-1, n_cols)
        n_rows = x2.shape[0]
        y = torch.empty_like(x2)
        if n_rows > 0:
            BLOCK_N = min(BLOCK_N_MAX, triton.next_power_of_2(n_cols))
            BLOCK_M = max(1, TILE_ELEMS // BLOCK_N)
            grid = (triton.cdiv(n_rows, BLOCK_M), triton.cdiv(n_cols, BLOCK_N))
            _bias_gelu_kernel[grid](
                x2, self.bias.contiguous(), y, n_rows, n_cols,
                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS,
            )
        return y.view(x.shape)
