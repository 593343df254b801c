"""Triton RMSNorm over the last dimension: y = x * rsqrt(mean(x^2) + eps) * weight.

Rows up to MAX_BLOCK wide: one program per row, row kept in registers (one read, one
write).  Wider rows: a sum-of-squares pass and a normalize pass over global memory.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK = 16384


@triton.jit
def _rms_row_kernel(x_ptr, w_ptr, y_ptr, n_cols, stride_x, stride_y, eps,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / n_cols
    r = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_y + cols, x * r * w, mask=mask)


@triton.jit
def _rms_tiled_kernel(x_ptr, w_ptr, y_ptr, n_cols, stride_x, stride_y, eps,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        x = tl.load(x_row + c, mask=c < n_cols, other=0.0)
        acc += x * x
    r = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        msk = c < n_cols
        x = tl.load(x_row + c, mask=msk, other=0.0)
        w = tl.load(w_ptr + c, mask=msk, other=0.0)
        tl.store(y_row + c, x * r * w, mask=msk)


def _num_warps(block):
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = self.weight.shape[0]
        if x.shape[-1] != n_cols:
            raise ValueError("last dimension does not match weight")
        x2 = x.contiguous().view(-1, n_cols)
        n_rows = x2.shape[0]
        y = torch.empty_like(x2)
        w = self.weight.contiguous()
        if n_rows > 0:
            block = triton.next_power_of_2(n_cols)
            if block <= MAX_BLOCK:
                _rms_row_kernel[(n_rows,)](
                    x2, w, y, n_cols, x2.stride(0), y.stride(0), self.eps,
                    BLOCK=block, num_warps=_num_warps(block),
                )
            else:
                _rms_tiled_kernel[(n_rows,)](
                    x2, w, y, n_cols, x2.stride(0), y.stride(0), self.eps,
                    BLOCK=min(4096, MAX_BLOCK), num_warps=8,
                )
        return y.view(x.shape)
